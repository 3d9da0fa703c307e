// The checks and settings before any rank starts (preflight.h).
#include "perf/sweep/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "perf/sweep/alltoallv_pattern.h"
#include "perf/sweep/error.h"

namespace tutti::perf {

// Options that only the world's size can judge; refused before any rank starts, like the parser's errors. With a
// split (colours: every world rank's) they are judged for each group, which runs the collective on its own.
void checkOptionsForWorld(const Options& options, const Collective& coll, int nranks,
                          const std::optional<GroupSplit>& split, const std::vector<int>& colours) {
  // A round trip waits before it puts, but a group (-g's ranks of one thread, -m's operations) runs its puts before
  // its waits: the put would leave before the signal it answers came.
  if (options.rmaRoundTrip && (options.gpus > 1 || options.aggIters > 1))
    throw Error(
        ErrorCode::InvalidArgument,
        std::string("--rma_roundtrip 1 issues each rank's wait before its put, which a group reorders: ") +
            (options.gpus > 1 ? "-g " + std::to_string(options.gpus) : "-m " + std::to_string(options.aggIters)) +
            " would group them; run with -g 1 -m 1 (-t or --local for more ranks in a process)");
  if (std::string(coll.name) == "alltoallv") {
    int largest = nranks;  // the ranks of the largest group that runs it
    if (split) {
      std::map<int, int> sizes;
      for (int colour : colours) sizes[colour]++;
      largest = 0;
      for (auto [colour, ranks] : sizes) largest = std::max(largest, ranks);
    }
    if (auto why = allToAllvProblem(largest, options.minBytes, options.maxBytes))
      throw Error(ErrorCode::InvalidUsage, *why);
  }
  if (!split) {
    if (auto why = coll.unsupported(nranks)) throw Error(ErrorCode::InvalidUsage, *why);
    if (options.root >= nranks)
      throw Error(ErrorCode::InvalidArgument,
                  "option -r " + std::to_string(options.root) + ": only " + std::to_string(nranks) + " ranks");
    return;
  }
  std::map<int, int> groupRanks;  // colour -> ranks
  for (int colour : colours) groupRanks[colour]++;
  std::string where = " (" + split->describe() + ")";
  for (auto [colour, ranks] : groupRanks) {
    if (auto why = coll.unsupported(ranks))
      throw Error(ErrorCode::InvalidUsage, "group " + std::to_string(colour) + where + ": " + *why);
    if (options.root >= ranks)
      throw Error(ErrorCode::InvalidArgument, "option -r " + std::to_string(options.root) + ": only " +
                                                  std::to_string(ranks) + " ranks in group " + std::to_string(colour) +
                                                  where);
  }
  // Every root in turn is a different number of rows in groups of different sizes, and the groups keep in step.
  auto [smallest, largest] =
      std::minmax_element(groupRanks.begin(), groupRanks.end(), [](auto& a, auto& b) { return a.second < b.second; });
  if (coll.usesRoot && options.root == -1 && smallest->second != largest->second)
    throw Error(ErrorCode::InvalidUsage, "option -r -1 (every root) needs groups of one size; " + split->describe() +
                                             " makes group " + std::to_string(smallest->first) + " of " +
                                             std::to_string(smallest->second) + " ranks and group " +
                                             std::to_string(largest->first) + " of " + std::to_string(largest->second));
}

// Whether the report at path could be written, learnt without leaving a file behind: a sweep that cannot write its
// report at the end would have measured for nothing.
void requireWritable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (fd >= 0) {
    close(fd);
    unlink(path.c_str());
    return;
  }
  if (errno == EEXIST) fd = open(path.c_str(), O_WRONLY);
  if (fd >= 0) {
    close(fd);
    return;
  }
  int err = errno;
  throw Error(ErrorCode::InvalidArgument, std::string(flag) + " " + path + ": cannot write it: " + std::strerror(err));
}

// --compare's baseline, read and checked against this run before it starts: a baseline of another collective, another
// number of ranks or another split would mark every size, or none, for nothing.
Baseline readCompareBaseline(const Options& options, const Collective& coll, int nranks,
                             const std::optional<GroupSplit>& split) {
  const std::string& path = options.compareFile;
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": cannot read it: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  Baseline baseline = readBaseline(text.str(), "--compare " + path);
  if (!baseline.collective.empty() && baseline.collective != coll.name)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline measured " + baseline.collective +
                                                ", this run " + coll.name +
                                                "; compare a sweep with one of the same collective");
  if (baseline.nranks != 0 && baseline.nranks != nranks)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline ran on " +
                                                std::to_string(baseline.nranks) + " ranks, this run has " +
                                                std::to_string(nranks) + "; compare runs of the same size");
  std::string mine = split ? split->describe() : "";
  if (baseline.split != mine)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline ran " +
                                                (baseline.split.empty() ? "unsplit" : "with " + baseline.split) +
                                                ", this run " + (mine.empty() ? "unsplit" : "with " + mine) +
                                                "; compare runs split into the same groups");
  return baseline;
}

void requireGraphBackend(const Options& options, const std::string& backend, const char* tuttiDevice) {
  if (options.cudaGraph == 0 || backend == "cuda") return;
  std::string why =
      tuttiDevice ? std::string("TUTTI_DEVICE=") + tuttiDevice : std::string("TUTTI_DEVICE unset and no CUDA device");
  throw Error(ErrorCode::InvalidUsage, "option -G " + std::to_string(options.cudaGraph) +
                                           ": -G needs the cuda device backend, and this run's is " + backend + " (" +
                                           why + ")");
}

// -T bounds init too: the bootstrap waits at most that long for the ranks (a longer TUTTI_BOOTSTRAP_TIMEOUT is cut).
// Returns the bootstrap's wait in seconds, which also bounds the wait for --id-file's file.
int boundBootstrap(int timeoutSeconds) {
  constexpr long kBootstrapDefaultSeconds = 120;  // TUTTI_BOOTSTRAP_TIMEOUT's default (base/params.cpp)
  const char* set = std::getenv("TUTTI_BOOTSTRAP_TIMEOUT");
  long configured = set ? std::atol(set) : 0;
  if (timeoutSeconds > 0 && !(configured > 0 && configured <= timeoutSeconds)) {
    setenv("TUTTI_BOOTSTRAP_TIMEOUT", std::to_string(timeoutSeconds).c_str(), 1);
    configured = timeoutSeconds;
  }
  return int(std::min<long>(configured > 0 ? configured : kBootstrapDefaultSeconds, 1L << 30));
}

}  // namespace tutti::perf
