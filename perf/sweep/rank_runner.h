// One rank's run of the whole sweep, on a thread of its own: init, the fingerprint, every type, op, root and size,
// the reports. Its lifecycle is in rank_runner.cpp, the per-size loop in size_loop.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/datatypes.h"
#include "perf/sweep/report.h"
#include "perf/sweep/sweep_context.h"

namespace tutti::perf {

// A buffer from ncclMemAlloc, freed on every path.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int rank);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* bytes() const { return static_cast<char*>(pointer_); }

 private:
  void* pointer_ = nullptr;
};

class RankRunner {
 public:
  RankRunner(SweepContext& context, int localIndex);
  ~RankRunner();
  RankRunner(const RankRunner&) = delete;
  RankRunner& operator=(const RankRunner&) = delete;

  // Runs the sweep; a failure is reported on stderr and recorded in the context's exit code.
  void run();

 private:
  bool printing() const { return rank_ == 0; }

  // rank_runner.cpp: the lifecycle and perf's own exchanges over the world.
  void runAll();
  void init();
  void splitWorld();
  void describeRanks();
  std::vector<NodeDescription> describeNodes(int nodes);
  void barrier();
  void synchronize();
  double combine(double value, int op);
  double combineTime(double seconds);
  IterationStats iterationStatsOverRanks(const std::vector<double>& mySeconds);
  void finish();
  void writeFile(const std::string& path, const std::string& text, const char* kind);

  // size_loop.cpp: every size of one type, op and root, timed and checked.
  struct Timing {
    double seconds = 0;                     // per operation, over ranks (as -a and -C ask)
    std::vector<double> iterationSeconds;   // -I 1: this rank's iterations
  };
  void runTest(const DataTypeInfo& type, const RedOpInfo& opInfo, int root);
  void runSizes(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root);
  void runSize(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, size_t bytes);
  std::string algorithmFor(size_t count, ncclDataType_t type) const;
  BufferCounts countsFor(size_t bytes, const DataTypeInfo& type) const;
  void launch(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts);
  Timing timePlacement(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts);
  int64_t checkPlacement(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, bool inPlace,
                         const BufferCounts& counts, size_t bytes);

  SweepContext& ctx_;
  const Options& opt_;
  const Collective& coll_;
  // rank_ and nranks_ are the world's: the rank's name in messages and reports, and the ranks that time and check
  // together. The collectives run on comm_, the rank's group's communicator with a split (world_ without one), as
  // groupRank_ of groupRanks_: sizes, offsets, references and bus bandwidth are the group's.
  int localIndex_, rank_, nranks_;
  int groupRank_ = 0, groupRanks_ = 1;
  ncclComm_t world_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceBuffer> sendBuffer_, recvBuffer_;
  std::vector<void*> registrations_;
  bool failed_ = false;
  int repetition_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  Report report_;
};

}  // namespace tutti::perf
