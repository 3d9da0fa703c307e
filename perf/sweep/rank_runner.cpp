// A rank's lifecycle (rank_runner.h): init and split under the watchdog, the fingerprint, perf's own exchanges over
// the world (barriers, statistics), the reports, and teardown on every path.
#include "perf/sweep/rank_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "perf/sweep/build_info.h"
#include "perf/sweep/fingerprint.h"
#include "perf/sweep/machine.h"
#include "tutti/tutti.h"

namespace tutti::perf {

DeviceBuffer::DeviceBuffer(size_t bytes, int rank) {
  check(ncclMemAlloc(&pointer_, bytes), rank, "ncclMemAlloc(" + std::to_string(bytes) + " bytes)");
}
DeviceBuffer::~DeviceBuffer() { ncclMemFree(pointer_); }

RankRunner::RankRunner(SweepContext& context, int localIndex)
    : ctx_(context), opt_(context.options), coll_(context.collective), localIndex_(localIndex),
      rank_(context.world.firstRank() + localIndex), nranks_(context.world.nranks()) {}

RankRunner::~RankRunner() {
  ctx_.watchdog.detach(localIndex_);
  if (stream_) tuttiStreamDestroy(stream_);
  for (void* handle : registrations_) ncclCommDeregister(comm_, handle);
  registrations_.clear();
  sendBuffer_.reset();
  recvBuffer_.reset();
  if (comm_ && comm_ != world_) (failed_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
  if (world_) (failed_ ? ncclCommAbort(world_) : ncclCommDestroy(world_));
}

void RankRunner::run() {
  try {
    runAll();
  } catch (const std::exception& error) {
    failed_ = true;
    if (ctx_.watchdog.firing()) return;  // it reports the timeout and ends the process
    auto* perfError = dynamic_cast<const Error*>(&error);
    bool timedOut = perfError && perfError->code() == ErrorCode::Timeout;
    // One timeout report per process: the other ranks of a process time out the same way.
    if (!timedOut || !ctx_.timeoutReported.exchange(true)) std::fprintf(stderr, "%s: %s\n", ctx_.program.c_str(), error.what());
    ctx_.fail(timedOut ? kTimeoutExitCode : 1);
  }
}

void RankRunner::runAll() {
  init();
  if (!opt_.streamNull) check(tuttiStreamCreate(&stream_), rank_, "tuttiStreamCreate");
  ctx_.watchdog.busy(localIndex_, "the first all-gather after init (rank descriptions)");
  describeRanks();
  ctx_.watchdog.idle(localIndex_);
  size_t bytes = opt_.maxBytes + 8 * size_t(opt_.unalign) + 64;
  sendBuffer_ = std::make_unique<DeviceBuffer>(bytes, rank_);
  recvBuffer_ = std::make_unique<DeviceBuffer>(bytes, rank_);
  if (opt_.localRegister)
    for (char* buffer : {sendBuffer_->bytes(), recvBuffer_->bytes()}) {
      void* handle = nullptr;
      check(ncclCommRegister(comm_, buffer, bytes, &handle), rank_, "ncclCommRegister");
      registrations_.push_back(handle);
    }
  if (printing()) std::printf("%s", tableHeader(opt_.reportCpuTime, opt_.reportTimestamps, opt_.perIterTiming).c_str());
  std::vector<RedOpInfo> ops = coll_.usesOp ? selectRedOps(opt_.op) : std::vector<RedOpInfo>{{ncclSum, "none"}};
  int firstRoot = coll_.usesRoot ? (opt_.root == -1 ? 0 : opt_.root) : -1;
  int lastRoot = coll_.usesRoot ? (opt_.root == -1 ? groupRanks_ - 1 : opt_.root) : -1;
  for (const DataTypeInfo& type : selectDataTypes(opt_.datatype))
    for (const RedOpInfo& op : ops)
      for (int root = firstRoot; root <= lastRoot; root++) runTest(type, op, root);
  finish();
}

// ncclCommInitRank under -T: the bootstrap's deadline is -T (runSweep sets it), so a rank that did not come makes
// init fail at -T with the bootstrap's list of missing ranks; the watchdog bounds whatever hangs past it.
void RankRunner::init() {
  ctx_.watchdog.busy(localIndex_, "init (ncclCommInitRank)", opt_.timeoutSeconds + kInitGraceSeconds);
  Clock::time_point start = Clock::now();
  ncclResult_t result = ncclCommInitRank(&world_, nranks_, ctx_.id, rank_);
  if (result != ncclSuccess) {
    double seconds = secondsSince(start);
    std::string why = std::string(ncclGetErrorString(result)) + ": " + ncclGetLastError(nullptr);
    std::string commId = std::getenv("NCCL_COMM_ID") ? std::getenv("NCCL_COMM_ID") : "";
    if (why.find("(errno " + std::to_string(EADDRINUSE) + ")") != std::string::npos && !commId.empty())
      throw Error(ErrorCode::InvalidUsage,
                  "rank " + std::to_string(rank_) + ": ncclCommInitRank: port " + commId.substr(commId.rfind(':') + 1) +
                      " of the bootstrap root (NCCL_COMM_ID=" + commId + ") is in use by another process. Pick a free port "
                      "for every process with NCCL_COMM_ID=host:port (under torchrun the tool takes MASTER_PORT+1, as "
                      "MASTER_PORT is torchrun's store): " + why);
    if (opt_.timeoutSeconds > 0 && seconds >= opt_.timeoutSeconds)
      throw Error(ErrorCode::Timeout, "rank " + std::to_string(rank_) + ": timed out in init after " + std::to_string(int(seconds)) +
                                          " s (-T " + std::to_string(opt_.timeoutSeconds) + "): ncclCommInitRank: " + why);
    check(result, rank_, "ncclCommInitRank");
  }
  ctx_.watchdog.attach(localIndex_, world_, rank_);
  comm_ = world_;
  if (ctx_.split) splitWorld();
  check(ncclCommUserRank(comm_, &groupRank_), rank_, "ncclCommUserRank");
  check(ncclCommCount(comm_, &groupRanks_), rank_, "ncclCommCount");
  ctx_.watchdog.idle(localIndex_);
}

// NCCL_TESTS_SPLIT_MASK, NCCL_TESTS_SPLIT: the sweep runs on the group's communicator, split from the world's with
// the world rank as key, so a group's ranks keep their world order (nccl-tests splits MPI_COMM_WORLD the same way,
// then gives each group a unique id of its own). The world's communicator stays for what nccl-tests does over
// MPI_COMM_WORLD: the barriers that start every group's measurement together, and the statistics over all ranks.
void RankRunner::splitWorld() {
  int colour = ctx_.colours[size_t(rank_)];
  // A split into one group (a mask of 0, say) is the world itself: no second communicator.
  if (std::all_of(ctx_.colours.begin(), ctx_.colours.end(), [&](int c) { return c == colour; })) return;
  ctx_.watchdog.busy(localIndex_, "init (ncclCommSplit)", opt_.timeoutSeconds + kInitGraceSeconds);
  ncclComm_t group = nullptr;
  check(ncclCommSplit(world_, colour, rank_, &group, nullptr), rank_,
        "ncclCommSplit (" + ctx_.split->describe() + ", colour " + std::to_string(colour) + ")");
  comm_ = group;
  ctx_.watchdog.attach(localIndex_, comm_, rank_);
}

// The "# Using devices" block and the fingerprint need every rank's description.
void RankRunner::describeRanks() {
  RankRecord mine{};
  mine.rank = rank_;
  mine.pid = int(getpid());
  mine.localIndex = ctx_.world.localRank * ctx_.world.ranksPerProcess + localIndex_;
  mine.colour = ctx_.split ? ctx_.colours[size_t(rank_)] : 0;
  std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
  std::snprintf(mine.affinity, sizeof mine.affinity, "%s", cpuAffinity().c_str());
  // The transports are the group's, which the collectives use; the nodes are the world's.
  int nodes = 0;
  check(tuttiCommTransports(comm_, mine.transports, sizeof mine.transports, &nodes), rank_, "tuttiCommTransports");
  if (comm_ != world_) {
    char worldTransports[sizeof mine.transports];
    check(tuttiCommTransports(world_, worldTransports, sizeof worldTransports, &nodes), rank_, "tuttiCommTransports (world)");
  }
  std::vector<RankRecord> all(static_cast<size_t>(nranks_));
  check(ncclAllGather(&mine, all.data(), sizeof mine, ncclUint8, world_, nullptr), rank_, "ncclAllGather (rank descriptions)");
  const char* backend = "unknown";
  check(tuttiCommDeviceBackend(comm_, &backend), rank_, "tuttiCommDeviceBackend");
  Fingerprint& f = report_.fingerprint;
  f.backend = backend;
  f.tuttiVersion = tuttiVersionString();
  int version = 0;
  ncclGetVersion(&version);
  f.ncclVersion = std::to_string(version);
  f.launcher = ctx_.world.launcher;
  f.hostCpu = cpuModel() + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs";
  f.build = thisBuild();
  if (printing()) f.nodes = describeNodes(nodes);
  addRankRecords(f, all, nodes, ctx_.split);
  if (!printing()) return;
  int threads = ctx_.world.launcher == "local" ? opt_.localRanks : opt_.threads;
  std::printf("%s", headerLines(f, {opt_, coll_, ctx_.split, ctx_.program, threads, version}).c_str());
}

// Every node of the communicator's topology, as the library holds it (the same on every rank).
std::vector<NodeDescription> RankRunner::describeNodes(int nodes) {
  std::vector<NodeDescription> out(size_t(nodes > 0 ? nodes : 0));
  for (int n = 0; n < nodes; n++) {
    NodeDescription& d = out[size_t(n)];
    char host[256] = {}, nic[64] = {};
    int nics = 0;
    check(tuttiCommNodeTopology(world_, n, host, sizeof host, &d.ranks, &d.numaNodes, &d.cpus, &d.gpus, &nics), rank_, "tuttiCommNodeTopology");
    d.host = host;
    for (int i = 0; i < nics; i++) {
      int speed = 0;
      check(tuttiCommNodeNic(world_, n, i, nic, sizeof nic, &speed), rank_, "tuttiCommNodeNic");
      d.nics.emplace_back(nic, speed);
    }
  }
  return out;
}

// Over the world: with a split, every group starts each measurement at once, as nccl-tests' MPI barrier does.
void RankRunner::barrier() {
  int32_t one = 1, sum = 0;
  check(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, world_, nullptr), rank_, "ncclAllReduce (barrier)");
}

void RankRunner::synchronize() {
  if (stream_) check(tuttiStreamSynchronize(stream_), rank_, "tuttiStreamSynchronize");
}

// A value over all ranks of the world (of every group, as nccl-tests reduces over MPI_COMM_WORLD): op is ncclSum,
// ncclMin or ncclMax; -1 means rank 0's value.
double RankRunner::combine(double value, int op) {
  double out = 0;
  if (op < 0) check(ncclBroadcast(&value, &out, 1, ncclFloat64, 0, world_, nullptr), rank_, "ncclBroadcast (rank 0's time)");
  else check(ncclAllReduce(&value, &out, 1, ncclFloat64, ncclRedOp_t(op), world_, nullptr), rank_, "ncclAllReduce (statistics)");
  return out;
}

double RankRunner::combineTime(double seconds) {
  switch (opt_.average) {
    case 0: return combine(seconds, -1);
    case 2: return combine(seconds, ncclMin);
    case 3: return combine(seconds, ncclMax);
    default: return combine(seconds, ncclSum) / nranks_;
  }
}

// -I 1: every rank's iteration times to every rank; each iteration's time is its maximum over ranks, as nccl-tests
// takes the maximum over GPUs and then over processes (kept per process for the JSON report).
IterationStats RankRunner::iterationStatsOverRanks(const std::vector<double>& mySeconds) {
  size_t iters = mySeconds.size();
  std::vector<double> all(iters * size_t(nranks_));
  check(ncclAllGather(mySeconds.data(), all.data(), iters, ncclFloat64, world_, nullptr), rank_, "ncclAllGather (iteration times)");
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

void RankRunner::finish() {
  synchronize();
  report_.averageBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0;
  if (report_.outOfBounds) ctx_.fail(1);
  if (!printing()) return;
  std::printf("%s", tableFooter(report_.outOfBounds, report_.averageBusBw, ctx_.program).c_str());
  report_.program = ctx_.program;
  report_.collective = coll_.name;
  report_.arguments = ctx_.arguments;
  auto& c = report_.config;
  c["nthreads"] = std::to_string(opt_.threads), c["ngpus"] = std::to_string(opt_.gpus), c["nranks"] = std::to_string(nranks_);
  c["minimum_bytes"] = std::to_string(opt_.minBytes), c["maximum_bytes"] = std::to_string(opt_.maxBytes);
  c[opt_.stepFactor > 1 ? "step_factor" : "step_bytes"] = std::to_string(opt_.stepFactor > 1 ? opt_.stepFactor : opt_.stepBytes);
  c["warmup_iters"] = std::to_string(opt_.warmupIters), c["iterations"] = std::to_string(opt_.iters);
  c["aggregated_iterations"] = std::to_string(opt_.aggIters), c["validation"] = std::to_string(opt_.check);
  c["blocking_collectives"] = std::to_string(opt_.blocking), c["average"] = std::to_string(opt_.average);
  c["per_iter_timing"] = opt_.perIterTiming ? "true" : "false", c["per_iter_skip"] = std::to_string(opt_.perIterSkip);
  if (ctx_.baseline) {
    int slower = 0;
    std::printf("%s", compareLines(report_.rows, ctx_.baseline->times, opt_.compareThreshold, &slower).c_str());
  }
  writeFile(opt_.jsonFile, jsonReport(report_), "JSON");
  writeFile(opt_.csvFile, csvReport(report_), "CSV");
  std::fflush(stdout);
}

void RankRunner::writeFile(const std::string& path, const std::string& text, const char* kind) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorCode::System, std::string("writing the ") + kind + " report to " + path + " failed");
  std::printf("# Wrote %s report to %s\n", kind, path.c_str());
}

}  // namespace tutti::perf
