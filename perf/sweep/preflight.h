// What the sweep checks and settles before any rank starts: options that need the world's size, the report paths,
// the --compare baseline, and the bootstrap's deadline under -T.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perf/sweep/baseline.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/group_split.h"
#include "perf/sweep/options.h"
#include "perf/sweep/report.h"

namespace tutti::perf {

// Options that only the world's size can judge; refused (perf::Error) like the parser's errors. With a split
// (colours: every world rank's) they are judged for each group, which runs the collective on its own.
void checkOptionsForWorld(const Options& options, const Collective& coll, int nranks,
                          const std::optional<GroupSplit>& split, const std::vector<int>& colours);

// Whether the report at path could be written (flag names it in the error), learnt without leaving a file behind:
// a sweep that cannot write its report at the end would have measured for nothing.
void requireWritable(const std::string& path, const char* flag);

// --compare's baseline, read and checked against this run: a baseline of another collective, another number of
// ranks or another split would mark every size, or none, for nothing.
Baseline readCompareBaseline(const Options& options, const Collective& coll, int nranks,
                             const std::optional<GroupSplit>& split);

// -G captures CUDA graphs: refused (perf::Error) when the run's device backend (as expected before init; tuttiDevice
// is TUTTI_DEVICE, null when unset) is not cuda.
void requireGraphBackend(const Options& options, const std::string& backend, const char* tuttiDevice);

// -T bounds init too: the bootstrap waits at most that long for the ranks (a longer TUTTI_BOOTSTRAP_TIMEOUT is cut).
// Returns the bootstrap's wait in seconds, which also bounds the wait for --id-file's file.
int boundBootstrap(int timeoutSeconds);

}  // namespace tutti::perf
