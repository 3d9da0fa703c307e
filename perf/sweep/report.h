// The perf sweep's output: nccl-tests' text table, and tutti's JSON and CSV reports with a fingerprint.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perf/sweep/build_info.h"

namespace tutti::perf {

// -I 1: one placement's per-iteration times, each the maximum over ranks, and their summary.
struct IterationStats {
  int skipped = 0;  // -K: leading iterations left out of the summary (still in timesUs)
  double minUs = 0, maxUs = 0, avgUs = 0, p50Us = 0, p95Us = 0, p99Us = 0, stdevUs = 0;
  double cvPercent = 0;                              // stdev / avg, in percent
  std::vector<double> timesUs;                       // every iteration
  std::vector<std::vector<double>> perProcessMaxUs;  // one row per process, when there are several
};

// The summary of timesUs[skip..]: nearest-rank percentiles and the population standard deviation.
IterationStats iterationStats(std::vector<double> timesUs, int skip);

// One measured placement (out-of-place or in-place) of one row.
struct Measurement {
  double timeUs = 0;
  double algBw = 0;
  double busBw = 0;
  int64_t wrong = -1;                          // -1: not checked (printed N/A)
  std::optional<IterationStats> perIteration;  // -I 1
};

// One table row.
struct ResultRow {
  size_t bytes = 0;
  size_t count = 0;
  std::string type, redop;
  int root = -1;
  std::string algorithm;
  Measurement outOfPlace, inPlace;
  std::string timestamp;  // -S
};

// What each rank reports about itself for the "# Using devices" block and the fingerprint.
struct RankDescription {
  int rank = 0;
  int pid = 0;
  int localIndex = 0;  // index of the rank in its process
  std::string host;
  std::string affinity;  // CPUs the rank's thread may run on, e.g. "0-1"
  int group = 0;         // nccl-tests' split colour: the group whose communicator the rank runs the sweep on
  // The rank's GPU on the cuda backend: CUDA ordinal, name and PCI bus id ("0000:18:00.0"); none on the host backends.
  int gpuOrdinal = -1;
  std::string gpu{}, pciBusId{};
};

// nccl-tests' number cell: the most decimals (2, 1, 0, then exponent) that fit width.
std::string formatNumber(double value, int width);

// The table header (the "#" line and the two column lines); perIteration adds i_min i_max i_p99 i_cv% per placement.
std::string tableHeader(bool cpuTime, bool timestamps, bool perIteration = false);
// One row, as nccl-tests prints it (with the per-iteration columns where the measurements have them).
std::string tableRow(const ResultRow& row);
// The "# Using devices" line of one rank: its GPU's ordinal, bus id and name, as nccl-tests prints them, or on the
// host backends the rank's index on its node, a zero bus id and the backend's name.
std::string deviceLine(const RankDescription& rank, const std::string& backend);
// The line's bracket, nccl-tests' "domain:bus:device" ("0000:18:00"; zeros without a GPU).
std::string deviceHex(const RankDescription& rank);
// The footer: out-of-bounds count, average bus bandwidth, concluded line.
std::string tableFooter(int outOfBounds, double averageBusBw, const std::string& program);

// One node of the communicator's topology (tuttiCommNodeTopology, tuttiCommNodeNic).
struct NodeDescription {
  std::string host;
  int ranks = 0, numaNodes = 0, cpus = 0, gpus = 0;  // cpus: 0 when discovery could not tell
  std::vector<std::pair<std::string, int>> nics;     // name, speed in Mb/s (0 unknown)
};

// One group of a split world (NCCL_TESTS_SPLIT_MASK, NCCL_TESTS_SPLIT): its colour and its ranks in the world.
struct GroupDescription {
  int colour = 0;
  std::vector<int> ranks;
};

// Key facts about the run that every report carries.
struct Fingerprint {
  std::string tuttiVersion, ncclVersion, backend, transports, topology, launcher, hostCpu;
  std::string cudaDriver;  // cuDriverGetVersion as "12.4" on the cuda backend, "" otherwise
  BuildInfo build;
  std::vector<NodeDescription> nodes;
  std::vector<RankDescription> ranks;
  std::string split;                     // the split variable as set (NCCL_TESTS_SPLIT_MASK=0x1), "" when none is
  std::vector<GroupDescription> groups;  // with a split, every group in colour order
};

// The "# Build:" line: tutti's version, build type, compiler, MPI and the commit when known.
std::string buildLine(const Fingerprint& fingerprint);
// On the cuda backend, the "# GPUs:" line: the driver version and the GPUs by name; "" otherwise.
std::string gpuLine(const Fingerprint& fingerprint);
// One "# Topology:" line per node: its ranks, NUMA nodes, CPUs, GPUs and NICs.
std::string topologyLines(const Fingerprint& fingerprint);
// With a split, the "# Groups:" line: the variable, each group's ranks, and whose group the table's sizes and
// bandwidths are for; "" without one.
std::string groupLines(const Fingerprint& fingerprint);

// Everything a JSON or CSV report holds.
struct Report {
  std::string program, collective;
  std::vector<std::string> arguments;
  std::map<std::string, std::string> config;  // nccl-tests' config keys, values already JSON literals
  Fingerprint fingerprint;
  std::vector<ResultRow> rows;
  int outOfBounds = 0;
  double averageBusBw = 0;
};

std::string jsonReport(const Report& report);
std::string csvReport(const Report& report);

}  // namespace tutti::perf
