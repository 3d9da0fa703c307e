// A thread's lifecycle (thread_runner.h): init and split under the watchdog, the fingerprint, perf's own exchanges
// over the world (barriers, statistics), the reports, and teardown on every path.
#include "perf/sweep/thread_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <thread>

#include "perf/sweep/build_info.h"
#include "perf/sweep/fingerprint.h"
#include "perf/sweep/machine.h"
#include "tutti/tutti.h"

namespace tutti::perf {

ThreadRunner::ThreadRunner(SweepContext& context, int thread)
    : ctx_(context), opt_(context.options), coll_(context.collective), nranks_(context.world.nranks()) {
  int perThread = opt_.gpus;
  ranks_.resize(size_t(perThread));
  for (int i = 0; i < perThread; i++) {
    ranks_[size_t(i)].localIndex = thread * perThread + i;
    ranks_[size_t(i)].rank = context.world.firstRank() + thread * perThread + i;
  }
}

// Every communicator of the thread goes first: after a failure, aborting them ends the kernels that might still wait
// for a peer, which a stream's synchronisation or cuMemFree would otherwise wait for. Then the memory, then the GPUs.
ThreadRunner::~ThreadRunner() {
  for (Rank& r : ranks_) {
    ctx_.watchdog.detach(r.localIndex);
    for (void* handle : r.registrations) ncclCommDeregister(r.comm, handle);
    if (r.window) ncclCommWindowDeregister(r.comm, r.window);
    if (r.comm && r.comm != r.world) (failed_ ? ncclCommAbort(r.comm) : ncclCommDestroy(r.comm));
    if (r.world) (failed_ ? ncclCommAbort(r.world) : ncclCommDestroy(r.world));
  }
  for (Rank& r : ranks_) r.memory.reset();
  for (Rank& r : ranks_) r.gpu.reset();
}

void ThreadRunner::run() {
  try {
    runAll();
  } catch (const std::exception& error) {
    failed_ = true;
    if (ctx_.watchdog.firing()) return;  // it reports the timeout and ends the process
    auto* perfError = dynamic_cast<const Error*>(&error);
    bool timedOut = perfError && perfError->code() == ErrorCode::Timeout;
    bool usage = perfError && perfError->code() == ErrorCode::InvalidArgument;  // an option the run cannot serve
    // One report per process for what every thread meets alike (a timeout, an option).
    if (!(timedOut || usage) || !ctx_.sharedErrorReported.exchange(true))
      std::fprintf(stderr, "%s: %s\n", ctx_.program.c_str(), error.what());
    ctx_.fail(timedOut ? kTimeoutExitCode : usage ? kUsageExitCode : 1);
  }
}

void ThreadRunner::runAll() {
  init();
  makeMemory();
  busy("the first all-gather after init (rank descriptions)");
  describeRanks();
  idle();
  size_t bytes = opt_.maxBytes + 8 * size_t(opt_.unalign) + 64;
  for (Rank& r : ranks_) {
    r.send = r.memory->allocate(bytes);
    r.recv = r.memory->allocate(bytes);
    if (opt_.localRegister)
      for (char* buffer : {r.send, r.recv}) {
        void* handle = nullptr;
        check(ncclCommRegister(r.comm, buffer, bytes, &handle), r.rank, "ncclCommRegister");
        r.registrations.push_back(handle);
      }
  }
  if (coll_.runWindowed) registerWindows(bytes);
  if (printing()) std::printf("%s", tableHeader(opt_.reportCpuTime, opt_.reportTimestamps, opt_.perIterTiming).c_str());
  std::vector<RedOpInfo> ops = coll_.usesOp ? selectRedOps(opt_.op) : std::vector<RedOpInfo>{{ncclSum, "none"}};
  int groupRanks = ranks_.front().groupRanks;  // the same in every group (checkOptionsForWorld) when every root runs
  int firstRoot = coll_.usesRoot ? (opt_.root == -1 ? 0 : opt_.root) : -1;
  int lastRoot = coll_.usesRoot ? (opt_.root == -1 ? groupRanks - 1 : opt_.root) : -1;
  for (const DataTypeInfo& type : selectDataTypes(opt_.datatype))
    for (const RedOpInfo& op : ops)
      for (int root = firstRoot; root <= lastRoot; root++) runTest(type, op, root);
  finish();
}

// The buffers live where the communicators' backend wants them: device memory on cuda, host memory otherwise.
void ThreadRunner::makeMemory() {
  const char* backend = "unknown";
  check(tuttiCommDeviceBackend(ranks_.front().comm, &backend), firstRank(), "tuttiCommDeviceBackend");
  backend_ = backend;
  if (opt_.cudaGraph && backend_ != "cuda")
    throw Error(ErrorCode::InvalidArgument, "option -G " + std::to_string(opt_.cudaGraph) +
                                                ": -G needs the cuda device backend; the "
                                                "communicators run on the " +
                                                backend_ + " backend");
  if (backend_ == "cuda" && !ranks_.front().gpu)
    throw Error(ErrorCode::System, "rank " + std::to_string(firstRank()) +
                                       ": the communicators run on the cuda backend, but the sweep "
                                       "expected " +
                                       ctx_.expectedBackend + " and has no GPU for its buffers; set TUTTI_DEVICE");
  // The largest of perf's own exchanges: the rank descriptions, or -I's iteration times, all-gathered.
  size_t largest =
      std::max(sizeof(RankRecord), opt_.perIterTiming ? sizeof(double) * size_t(opt_.iters) : 0) * size_t(nranks_);
  size_t exchangeBytes = 2 * (std::max<size_t>(largest, 64) + 256);
  for (Rank& r : ranks_)
    r.memory = backend_ == "cuda" ? makeCudaMemory(*r.gpu, exchangeBytes) : makeHostMemory(opt_.streamNull, r.rank);
}

// rma_perf puts into the peers' receive buffers: each is registered as a window, collectively (so with -g each rank on
// a thread of its own), once for the whole sweep.
void ThreadRunner::registerWindows(size_t bytes) {
  busy("ncclCommWindowRegister (the receive buffers as windows)");
  concurrently([bytes](Rank& r) {
    check(ncclCommWindowRegister(r.comm, r.recv, bytes, &r.window, NCCL_WIN_COLL_SYMMETRIC), r.rank,
          "ncclCommWindowRegister");
  });
  idle();
}

void ThreadRunner::busy(const std::string& what, int limitSeconds) {
  for (const Rank& r : ranks_) ctx_.watchdog.busy(r.localIndex, what, limitSeconds);
}

void ThreadRunner::idle() {
  for (const Rank& r : ranks_) ctx_.watchdog.idle(r.localIndex);
}

void ThreadRunner::concurrently(const std::function<void(Rank&)>& call) {
  if (ranks_.size() == 1) return call(ranks_.front());
  std::vector<std::exception_ptr> errors(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks_.size(); i++)
    threads.emplace_back([&, i] {
      try {
        call(ranks_[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

void ThreadRunner::grouped(const std::function<void(Rank&, size_t)>& call) {
  bool group = ranks_.size() > 1;
  if (group) check(ncclGroupStart(), firstRank(), "ncclGroupStart");
  for (size_t i = 0; i < ranks_.size(); i++) call(ranks_[i], i);
  if (group) check(ncclGroupEnd(), firstRank(), "ncclGroupEnd");
}

// Init under -T: the bootstrap's deadline is -T (runSweep sets it), so a rank that did not come makes init fail at
// -T with the bootstrap's list of missing ranks; the watchdog bounds whatever hangs past it. A thread's ranks wait
// for each other in init (a group does not defer it in tutti), so each makes its calls on a thread of its own.
void ThreadRunner::init() {
  if (ctx_.expectedBackend == "cuda") bindGpus();
  for (const Rank& r : ranks_) ctx_.watchdog.attach(r.localIndex, nullptr, r.rank);  // a late init names its rank
  busy("init (ncclCommInitRank)", opt_.timeoutSeconds + kInitGraceSeconds);
  concurrently([this](Rank& r) { initRank(r); });
  idle();
}

// On the cuda backend the i'th rank of a node takes GPU i modulo the GPU count, as nccl-tests does; ranks that share a
// GPU need TUTTI_ALLOW_SHARED_GPU=1 (tutti checks it at init).
void ThreadRunner::bindGpus() {
  const cuda::Driver& driver = *ctx_.driver;
  for (Rank& r : ranks_) {
    int nodeIndex = ctx_.world.localRank * ctx_.world.ranksPerProcess + r.localIndex;
    r.gpu = std::make_unique<RankGpu>(driver, nodeIndex % driver.deviceCount, r.rank);
  }
}

void ThreadRunner::initRank(Rank& r) {
  if (r.gpu) r.gpu->makeCurrent();  // this thread's, so that tutti picks the rank's GPU
  Clock::time_point start = Clock::now();
  ncclResult_t result = ncclCommInitRank(&r.world, nranks_, ctx_.id, r.rank);
  if (result != ncclSuccess) {
    double seconds = secondsSince(start);
    std::string why = std::string(ncclGetErrorString(result)) + ": " + ncclGetLastError(nullptr);
    std::string commId = std::getenv("NCCL_COMM_ID") ? std::getenv("NCCL_COMM_ID") : "";
    if (why.find("(errno " + std::to_string(EADDRINUSE) + ")") != std::string::npos && !commId.empty())
      throw Error(ErrorCode::InvalidUsage,
                  "rank " + std::to_string(r.rank) + ": ncclCommInitRank: port " +
                      commId.substr(commId.rfind(':') + 1) + " of the bootstrap root (NCCL_COMM_ID=" + commId +
                      ") is in use by another process. Pick a free port "
                      "for every process with NCCL_COMM_ID=host:port (under torchrun the tool takes MASTER_PORT+1, as "
                      "MASTER_PORT is torchrun's store): " +
                      why);
    if (opt_.timeoutSeconds > 0 && seconds >= opt_.timeoutSeconds)
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(r.rank) + ": timed out in init after " +
                                          std::to_string(int(seconds)) + " s (-T " +
                                          std::to_string(opt_.timeoutSeconds) + "): ncclCommInitRank: " + why);
    check(result, r.rank, "ncclCommInitRank");
  }
  ctx_.watchdog.attach(r.localIndex, r.world, r.rank);
  r.comm = r.world;
  if (ctx_.split) splitWorld(r);
  check(ncclCommUserRank(r.comm, &r.groupRank), r.rank, "ncclCommUserRank");
  check(ncclCommCount(r.comm, &r.groupRanks), r.rank, "ncclCommCount");
}

// NCCL_TESTS_SPLIT_MASK, NCCL_TESTS_SPLIT: the sweep runs on the group's communicator, split from the world's with
// the world rank as key, so a group's ranks keep their world order (nccl-tests splits MPI_COMM_WORLD the same way,
// then gives each group a unique id of its own). The world's communicator stays for what nccl-tests does over
// MPI_COMM_WORLD: the barriers that start every group's measurement together, and the statistics over all ranks.
void ThreadRunner::splitWorld(Rank& r) {
  int colour = ctx_.colours[size_t(r.rank)];
  // A split into one group (a mask of 0, say) is the world itself: no second communicator.
  if (std::all_of(ctx_.colours.begin(), ctx_.colours.end(), [&](int c) { return c == colour; })) return;
  ctx_.watchdog.busy(r.localIndex, "init (ncclCommSplit)", opt_.timeoutSeconds + kInitGraceSeconds);
  ncclComm_t group = nullptr;
  check(ncclCommSplit(r.world, colour, r.rank, &group, nullptr), r.rank,
        "ncclCommSplit (" + ctx_.split->describe() + ", colour " + std::to_string(colour) + ")");
  r.comm = group;
  ctx_.watchdog.attach(r.localIndex, r.comm, r.rank);
}

// The "# Using devices" block and the fingerprint need every rank's description.
void ThreadRunner::describeRanks() {
  std::vector<RankRecord> mine(ranks_.size());
  int nodes = 0;
  for (size_t i = 0; i < ranks_.size(); i++) {
    const Rank& r = ranks_[i];
    RankRecord& m = mine[i];
    m.rank = r.rank;
    m.pid = int(getpid());
    m.localIndex = ctx_.world.localRank * ctx_.world.ranksPerProcess + r.localIndex;
    m.colour = ctx_.split ? ctx_.colours[size_t(r.rank)] : 0;
    std::snprintf(m.host, sizeof m.host, "%s", hostName().c_str());
    std::snprintf(m.affinity, sizeof m.affinity, "%s", cpuAffinity().c_str());
    m.gpuOrdinal = -1;
    if (backend_ == "cuda") {
      m.gpuOrdinal = r.gpu->ordinal();
      std::snprintf(m.gpu, sizeof m.gpu, "%s", r.gpu->name().c_str());
      std::snprintf(m.pciBusId, sizeof m.pciBusId, "%s", r.gpu->pciBusId().c_str());
    }
    // The transports are the group's, which the collectives use; the nodes are the world's.
    check(tuttiCommTransports(r.comm, m.transports, sizeof m.transports, &nodes), r.rank, "tuttiCommTransports");
    if (r.comm != r.world) {
      char worldTransports[sizeof m.transports];
      check(tuttiCommTransports(r.world, worldTransports, sizeof worldTransports, &nodes), r.rank,
            "tuttiCommTransports (world)");
    }
  }
  std::vector<std::vector<RankRecord>> all(ranks_.size(), std::vector<RankRecord>(size_t(nranks_)));
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t i = 0; i < ranks_.size(); i++) in.push_back(&mine[i]), out.push_back(all[i].data());
  exchange(in, sizeof(RankRecord), out, sizeof(RankRecord) * size_t(nranks_), "ncclAllGather (rank descriptions)",
           [](const Rank& r, const void* send, void* recv, cudaStream_t stream) {
             return ncclAllGather(send, recv, sizeof(RankRecord), ncclUint8, r.world, stream);
           });
  Fingerprint& f = report_.fingerprint;
  f.backend = backend_;
  f.tuttiVersion = tuttiVersionString();
  int version = 0;
  ncclGetVersion(&version);
  f.ncclVersion = std::to_string(version);
  f.launcher = ctx_.world.launcher;
  f.hostCpu = cpuModel() + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs";
  f.build = thisBuild();
  if (backend_ == "cuda") f.cudaDriver = cuda::versionText(ctx_.driver->version);
  if (printing()) f.nodes = describeNodes(nodes);
  addRankRecords(f, all.front(), nodes, ctx_.split);
  if (!printing()) return;
  int threads = ctx_.world.launcher == "local" ? opt_.localRanks / opt_.gpus : opt_.threads;
  std::printf(
      "%s",
      headerLines(f, {opt_, coll_, ctx_.split, ctx_.program, threads, version, flagNotes(opt_, backend_)}).c_str());
}

// Every node of the communicator's topology, as the library holds it (the same on every rank).
std::vector<NodeDescription> ThreadRunner::describeNodes(int nodes) {
  const Rank& r = ranks_.front();
  std::vector<NodeDescription> out(size_t(nodes > 0 ? nodes : 0));
  for (int n = 0; n < nodes; n++) {
    NodeDescription& d = out[size_t(n)];
    char host[256] = {}, nic[64] = {};
    int nics = 0;
    check(tuttiCommNodeTopology(r.world, n, host, sizeof host, &d.ranks, &d.numaNodes, &d.cpus, &d.gpus, &nics), r.rank,
          "tuttiCommNodeTopology");
    d.host = host;
    for (int i = 0; i < nics; i++) {
      int speed = 0;
      check(tuttiCommNodeNic(r.world, n, i, nic, sizeof nic, &speed), r.rank, "tuttiCommNodeNic");
      d.nics.emplace_back(nic, speed);
    }
  }
  return out;
}

void ThreadRunner::synchronize() {
  for (Rank& r : ranks_) r.memory->synchronize();
}

void ThreadRunner::exchange(const std::vector<const void*>& in, size_t inBytes, const std::vector<void*>& out,
                            size_t outBytes, const std::string& what, const ExchangeCall& call) {
  std::vector<RankMemory::Staged> staged;
  for (size_t i = 0; i < ranks_.size(); i++)
    staged.push_back(ranks_[i].memory->stage(in[i], inBytes, out[i], outBytes));
  grouped([&](Rank& r, size_t i) { check(call(r, staged[i].send, staged[i].recv, staged[i].stream), r.rank, what); });
  for (size_t i = 0; i < ranks_.size(); i++) ranks_[i].memory->unstage(out[i], outBytes);
}

// Over the world: with a split, every group starts each measurement at once, as nccl-tests' MPI barrier does.
void ThreadRunner::barrier() {
  int32_t one = 1;
  std::vector<int32_t> sums(ranks_.size());
  std::vector<const void*> in(ranks_.size(), &one);
  std::vector<void*> out;
  for (int32_t& s : sums) out.push_back(&s);
  exchange(in, sizeof one, out, sizeof one, "ncclAllReduce (barrier)",
           [](const Rank& r, const void* send, void* recv, cudaStream_t stream) {
             return ncclAllReduce(send, recv, 1, ncclInt32, ncclSum, r.world, stream);
           });
}

// A value over all ranks of the world (of every group, as nccl-tests reduces over MPI_COMM_WORLD), perRank[i] being
// the thread's i'th rank's: op is ncclSum, ncclMin or ncclMax; -1 means rank 0's value.
double ThreadRunner::combine(const std::vector<double>& perRank, int op) {
  std::vector<double> results(ranks_.size());
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t i = 0; i < ranks_.size(); i++) in.push_back(&perRank[i]), out.push_back(&results[i]);
  exchange(in, sizeof(double), out, sizeof(double),
           op < 0 ? "ncclBroadcast (rank 0's time)" : "ncclAllReduce (statistics)",
           [op](const Rank& r, const void* send, void* recv, cudaStream_t stream) {
             return op < 0 ? ncclBroadcast(send, recv, 1, ncclFloat64, 0, r.world, stream)
                           : ncclAllReduce(send, recv, 1, ncclFloat64, ncclRedOp_t(op), r.world, stream);
           });
  return results.front();
}

double ThreadRunner::combineTime(const std::vector<double>& perRankSeconds) {
  switch (opt_.average) {
    case 0: return combine(perRankSeconds, -1);
    case 2: return combine(perRankSeconds, ncclMin);
    case 3: return combine(perRankSeconds, ncclMax);
    default: return combine(perRankSeconds, ncclSum) / nranks_;
  }
}

// -I 1: every rank's iteration times to every rank; each iteration's time is its maximum over ranks, as nccl-tests
// takes the maximum over GPUs and then over processes (kept per process for the JSON report).
IterationStats ThreadRunner::iterationStatsOverRanks(const std::vector<double>& mySeconds) {
  size_t iters = mySeconds.size();
  std::vector<std::vector<double>> gathered(ranks_.size(), std::vector<double>(iters * size_t(nranks_)));
  std::vector<const void*> in(ranks_.size(), mySeconds.data());
  std::vector<void*> out;
  for (auto& g : gathered) out.push_back(g.data());
  exchange(in, iters * sizeof(double), out, iters * sizeof(double) * size_t(nranks_), "ncclAllGather (iteration times)",
           [iters](const Rank& r, const void* send, void* recv, cudaStream_t stream) {
             return ncclAllGather(send, recv, iters, ncclFloat64, r.world, stream);
           });
  const std::vector<double>& all = gathered.front();
  int processes = ctx_.world.processCount;
  std::vector<std::vector<double>> perProcess(size_t(processes), std::vector<double>(iters, 0.0));
  for (int r = 0; r < nranks_; r++)
    for (size_t i = 0; i < iters; i++) {
      double& slot = perProcess[size_t(r / ctx_.world.ranksPerProcess)][i];
      slot = std::max(slot, all[size_t(r) * iters + i] * 1e6);
    }
  std::vector<double> overRanks(iters, 0.0);
  for (const auto& row : perProcess)
    for (size_t i = 0; i < iters; i++) overRanks[i] = std::max(overRanks[i], row[i]);
  IterationStats stats = iterationStats(overRanks, opt_.perIterSkip);
  if (processes > 1) stats.perProcessMaxUs = std::move(perProcess);
  return stats;
}

void ThreadRunner::finish() {
  synchronize();
  report_.averageBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0;
  if (report_.outOfBounds) ctx_.fail(1);
  if (!printing()) return;
  std::printf("%s", tableFooter(report_.outOfBounds, report_.averageBusBw, ctx_.program).c_str());
  report_.program = ctx_.program;
  report_.collective = coll_.name;
  report_.arguments = ctx_.arguments;
  auto& c = report_.config;
  c["nthreads"] = std::to_string(opt_.threads), c["ngpus"] = std::to_string(opt_.gpus),
  c["nranks"] = std::to_string(nranks_);
  c["minimum_bytes"] = std::to_string(opt_.minBytes), c["maximum_bytes"] = std::to_string(opt_.maxBytes);
  c[opt_.stepFactor > 1 ? "step_factor" : "step_bytes"] =
      std::to_string(opt_.stepFactor > 1 ? opt_.stepFactor : opt_.stepBytes);
  c["warmup_iters"] = std::to_string(opt_.warmupIters), c["iterations"] = std::to_string(opt_.iters);
  c["aggregated_iterations"] = std::to_string(opt_.aggIters), c["validation"] = std::to_string(opt_.check);
  c["blocking_collectives"] = std::to_string(opt_.blocking), c["average"] = std::to_string(opt_.average);
  c["per_iter_timing"] = opt_.perIterTiming ? "true" : "false", c["per_iter_skip"] = std::to_string(opt_.perIterSkip);
  c["graph"] = std::to_string(opt_.cudaGraph);
  if (ctx_.baseline) {
    int slower = 0;
    std::printf("%s", compareLines(report_.rows, ctx_.baseline->times, opt_.compareThreshold, &slower).c_str());
  }
  writeFile(opt_.jsonFile, jsonReport(report_), "JSON");
  writeFile(opt_.csvFile, csvReport(report_), "CSV");
  std::fflush(stdout);
}

void ThreadRunner::writeFile(const std::string& path, const std::string& text, const char* kind) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorCode::System, std::string("writing the ") + kind + " report to " + path + " failed");
  std::printf("# Wrote %s report to %s\n", kind, path.c_str());
}

}  // namespace tutti::perf
