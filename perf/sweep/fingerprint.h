// The run's fingerprint from every rank's self-description, and the header lines that show it before the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "perf/sweep/collectives.h"
#include "perf/sweep/group_split.h"
#include "perf/sweep/launcher.h"
#include "perf/sweep/options.h"
#include "perf/sweep/report.h"

namespace tutti::perf {

// A rank's self-description travels as a fixed-size record through one all-gather.
struct RankRecord {
  int32_t rank, pid, localIndex, colour;
  char host[64];
  char affinity[116];
  char transports[64];  // how this rank reaches the peers of its group (tuttiCommTransports)
  int32_t gpuOrdinal;   // the cuda backend's GPU (-1 on the host backends): CUDA ordinal, name, PCI bus id
  char gpu[96];
  char pciBusId[32];
};

// The ranks, transports, topology and split groups of f from every rank's record (all, in rank order); nodes is the
// world's node count, split the run's split if any.
void addRankRecords(Fingerprint& f, const std::vector<RankRecord>& all, int nodes,
                    const std::optional<GroupSplit>& split);

// Everything rank 0 prints before the table: nccl-tests' header lines, tutti's lines about the run, and the
// "# Using devices" block. threads: the "nThread" nccl-tests prints; notes: what the run does with the GPU-only flags.
struct HeaderFacts {
  const Options& options;
  const Collective& collective;
  const std::optional<GroupSplit>& split;
  const std::string& program;
  int threads;
  int ncclVersion;
  std::vector<std::string> notes;
};
std::string headerLines(const Fingerprint& f, const HeaderFacts& facts);

}  // namespace tutti::perf
