// One thread's run of the whole sweep: the -g ranks it drives (one without -g), their init, the fingerprint, every
// type, op, root and size, the reports. The lifecycle is in thread_runner.cpp, the per-size loop in size_loop.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/datatypes.h"
#include "perf/sweep/rank_gpu.h"
#include "perf/sweep/rank_memory.h"
#include "perf/sweep/report.h"
#include "perf/sweep/sweep_context.h"

namespace tutti::perf {

// One rank of the thread.
struct Rank {
  int localIndex = 0;  // among this process's ranks
  // rank is the world's: the rank's name in messages and reports. The collectives run on comm, the rank's group's
  // communicator with a split (world without one), as groupRank of groupRanks: sizes, offsets, references and bus
  // bandwidth are the group's.
  int rank = 0;
  int groupRank = 0, groupRanks = 1;
  ncclComm_t world = nullptr;
  ncclComm_t comm = nullptr;
  std::unique_ptr<RankGpu> gpu;  // when the cuda backend is expected: bound before init, released after the comms
  std::unique_ptr<RankMemory> memory;
  char* send = nullptr;  // maxBytes and room for -u, in memory
  char* recv = nullptr;
  std::vector<void*> registrations;  // -R
  ncclWindow_t window = nullptr;     // rma_perf: recv as a window
  ncclRedOp_t op = ncclSum;          // the current test's op: mulsum is a PreMulSum of this comm
  bool customOp = false;
};

class ThreadRunner {
 public:
  // The thread'th of this process's threads: it drives the ranks from thread * -g on.
  ThreadRunner(SweepContext& context, int thread);
  ~ThreadRunner();
  ThreadRunner(const ThreadRunner&) = delete;
  ThreadRunner& operator=(const ThreadRunner&) = delete;

  // Runs the sweep; a failure is reported on stderr and recorded in the context's exit code.
  void run();

 private:
  bool printing() const { return ranks_.front().rank == 0; }
  int firstRank() const { return ranks_.front().rank; }

  // thread_runner.cpp: the lifecycle, and the calls that reach every rank of the thread at once.
  void runAll();
  void init();
  void bindGpus();
  void initRank(Rank& r);
  void makeMemory();
  void registerWindows(size_t bytes);
  void splitWorld(Rank& r);
  void describeRanks();
  std::vector<NodeDescription> describeNodes(int nodes);
  void busy(const std::string& what, int limitSeconds = 0);
  void idle();
  // Blocking calls every rank must make at once (init, split): with several ranks, each on a thread of its own.
  void concurrently(const std::function<void(Rank&)>& call);
  // Calls made for every rank in one NCCL group (none for one rank), as nccl-tests drives its -g GPUs.
  void grouped(const std::function<void(Rank&, size_t)>& call);
  void synchronize();
  // perf's own collectives over the world communicators: rank i sends inBytes of in[i], receives outBytes into out[i].
  using ExchangeCall = std::function<ncclResult_t(const Rank&, const void* send, void* recv, cudaStream_t stream)>;
  void exchange(const std::vector<const void*>& in, size_t inBytes, const std::vector<void*>& out, size_t outBytes,
                const std::string& what, const ExchangeCall& call);
  void barrier();
  double combine(const std::vector<double>& perRank, int op);
  double combineTime(const std::vector<double>& perRankSeconds);
  IterationStats iterationStatsOverRanks(const std::vector<double>& mySeconds);
  void finish();
  void writeFile(const std::string& path, const std::string& text, const char* kind);

  // size_loop.cpp: every size of one type, op and root, timed and checked.
  struct Timing {
    double seconds = 0;                    // per operation, over ranks (as -a and -C ask)
    std::vector<double> iterationSeconds;  // -I 1: this thread's iterations
  };
  void runTest(const DataTypeInfo& type, const RedOpInfo& opInfo, int root);
  void makeOps(const DataTypeInfo& type, const RedOpInfo& opInfo);
  void destroyOps(bool checked);
  void runSizes(const DataTypeInfo& type, const RedOpInfo& opInfo, int root);
  void runSize(const DataTypeInfo& type, const RedOpInfo& opInfo, int root, size_t bytes);
  std::string algorithmFor(size_t count, ncclDataType_t type) const;
  BufferCounts countsFor(size_t bytes, const DataTypeInfo& type) const;
  void launch(const DataTypeInfo& type, int root, bool inPlace, const BufferCounts& counts);
  void issueIterations(const DataTypeInfo& type, int root, bool inPlace, const BufferCounts& counts, Timing& timing,
                       double& collectiveOnly);
  Timing timePlacement(const DataTypeInfo& type, int root, bool inPlace, const BufferCounts& counts);
  std::vector<int64_t> checkPlacement(const DataTypeInfo& type, const RedOpInfo& opInfo, int root, bool inPlace,
                                      const BufferCounts& counts, size_t bytes);

  SweepContext& ctx_;
  const Options& opt_;
  const Collective& coll_;
  int nranks_;  // the world's: the ranks that time and check together
  std::vector<Rank> ranks_;
  std::string backend_ = "unknown";  // the communicators' device backend
  bool failed_ = false;
  int repetition_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  Report report_;
};

}  // namespace tutti::perf
