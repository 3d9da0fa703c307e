// The perf sweep driver: starts the ranks, times and checks each size, aggregates over ranks, prints and writes reports.
#include "perf/sweep/sweep.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "nccl.h"
#include "perf/sweep/build_info.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/datatypes.h"
#include "perf/sweep/error.h"
#include "perf/sweep/group_split.h"
#include "perf/sweep/launcher.h"
#include "perf/sweep/mpi_session.h"
#include "perf/sweep/options.h"
#include "perf/sweep/report.h"
#include "tutti/tutti.h"

namespace tutti::perf {
namespace {

using Clock = std::chrono::steady_clock;

// The exit code of a run that -T stopped, as nccl-tests' timeout; 2 is a usage error, 1 any other failure.
constexpr int kTimeoutExitCode = 3;
constexpr int kUsageExitCode = 2;
// Init's watchdog waits this much longer than -T: the bootstrap's own deadline (-T too) comes first and names the
// ranks that did not arrive; the watchdog catches what hangs after it.
constexpr int kInitGraceSeconds = 2;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void check(ncclResult_t result, int rank, const std::string& what) {
  if (result != ncclSuccess)
    throw Error(result == ncclRemoteError ? ErrorCode::Remote : ErrorCode::System,
                "rank " + std::to_string(rank) + ": " + what + ": " + ncclGetErrorString(result) + ": " + ncclGetLastError(nullptr));
}

// The CPUs the calling thread may run on, as ranges ("0-3,6").
std::string cpuAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "unknown";
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) last++;
    out += (out.empty() ? "" : ",") + std::to_string(cpu) + (last > cpu ? "-" + std::to_string(last) : "");
    cpu = last;
  }
  return out;
}

std::string hostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string nowString() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// A rank's self-description travels as a fixed-size record through one all-gather.
struct RankRecord {
  int32_t rank, pid, localIndex, colour;
  char host[64];
  char affinity[116];
  char transports[64];  // how this rank reaches the peers of its group (tuttiCommTransports)
};

// -T: watches the ranks of this process, from init to the last size; one that stays inside a step too long ends the
// process with kTimeoutExitCode.
class Watchdog {
 public:
  Watchdog(int ranks, int timeoutSeconds) : slots_(size_t(ranks)), timeoutSeconds_(timeoutSeconds) {
    if (timeoutSeconds_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // A communicator of the rank's (the world's, then its group's with a split) to abort on a timeout.
  void attach(int index, ncclComm_t comm, int rank) {
    std::lock_guard lock(mutex_);
    slots_[size_t(index)].comms.push_back(comm);
    slots_[size_t(index)].rank = rank;
  }
  // The comms must not be used by the watchdog any more (they are being destroyed).
  void detach(int index) {
    std::lock_guard lock(mutex_);
    slots_[size_t(index)].comms.clear();
  }
  // The rank enters a step that must end within limitSeconds (default -T).
  void busy(int index, std::string what, int limitSeconds = 0) {
    std::lock_guard lock(mutex_);
    slots_[size_t(index)].since = Clock::now();
    slots_[size_t(index)].limitSeconds = limitSeconds > 0 ? limitSeconds : timeoutSeconds_;
    slots_[size_t(index)].what = std::move(what);
  }
  void idle(int index) {
    std::lock_guard lock(mutex_);
    slots_[size_t(index)].what.clear();
  }
  // Set once the watchdog has reported a timeout and is ending the process: what fails after it (the aborted
  // communicators) is its consequence, not news.
  bool firing() const { return firing_; }

 private:
  struct Slot {
    std::vector<ncclComm_t> comms;
    int rank = -1;
    Clock::time_point since;
    int limitSeconds = 0;
    std::string what;
  };

  // What the comm's workers wait for, one "#     waiting: " line each, so that the report names the peer that held the
  // rank up and not only the rank; "" when none of its workers sleeps in a wait.
  static std::string waitingLines(ncclComm_t comm) {
    if (comm == nullptr) return "";
    std::string text(16384, '\0');
    if (tuttiCommDescribeWait(comm, text.data(), text.size()) != ncclSuccess) return "";
    text.resize(std::strlen(text.c_str()));
    std::string lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines += "#     waiting: " + line + "\n";
    return lines;
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      std::string late;
      for (const Slot& s : slots_)
        if (!s.what.empty() && secondsSince(s.since) > s.limitSeconds) {
          late += "#   rank " + std::to_string(s.rank) + " did not finish " + s.what + " within " + std::to_string(s.limitSeconds) + " s\n";
          for (ncclComm_t comm : s.comms) late += waitingLines(comm);
        }
      if (late.empty()) continue;
      firing_ = true;
      std::printf("# Test timeout (-T %d s) in process %d; aborting its communicators:\n%s", timeoutSeconds_, int(getpid()), late.c_str());
      std::fflush(stdout);
      for (Slot& s : slots_)
        for (ncclComm_t comm : s.comms) ncclCommAbort(comm);
      // The rank threads may still hold the aborted communicators: leave without unwinding them.
      std::fflush(stderr);
      std::_Exit(kTimeoutExitCode);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Slot> slots_;
  int timeoutSeconds_;
  std::atomic<bool> firing_{false};
  bool stopping_ = false;
  std::thread thread_;
};

// What all ranks of this process share.
struct SweepContext {
  const Collective& collective;
  Options options;
  World world;
  ncclUniqueId id;
  std::string program;
  std::vector<std::string> arguments;
  std::optional<Baseline> baseline;  // --compare's, read before the sweep
  std::optional<GroupSplit> split;   // NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT
  std::vector<int> colours;          // with a split, every world rank's colour
  Watchdog watchdog;
  std::atomic<int> exitCode{0};
  std::atomic<bool> timeoutReported{false};
  std::mutex outputMutex;

  // The worst code wins: a timeout over a failure, a failure over success.
  void fail(int code) {
    for (int now = exitCode; now < code && !exitCode.compare_exchange_weak(now, code);) {}
  }
};

// A buffer from ncclMemAlloc, freed on every path.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int rank) {
    check(ncclMemAlloc(&pointer_, bytes), rank, "ncclMemAlloc(" + std::to_string(bytes) + " bytes)");
  }
  ~DeviceBuffer() { ncclMemFree(pointer_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* bytes() const { return static_cast<char*>(pointer_); }

 private:
  void* pointer_ = nullptr;
};

// One rank's run of the whole sweep.
class RankRunner {
 public:
  RankRunner(SweepContext& context, int localIndex)
      : ctx_(context), opt_(context.options), coll_(context.collective), localIndex_(localIndex),
        rank_(context.world.firstRank() + localIndex), nranks_(context.world.nranks()) {}

  ~RankRunner() {
    ctx_.watchdog.detach(localIndex_);
    if (stream_) tuttiStreamDestroy(stream_);
    for (void* handle : registrations_) ncclCommDeregister(comm_, handle);
    registrations_.clear();
    sendBuffer_.reset();
    recvBuffer_.reset();
    if (comm_ && comm_ != world_) (failed_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
    if (world_) (failed_ ? ncclCommAbort(world_) : ncclCommDestroy(world_));
  }

  void run() {
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

 private:
  bool printing() const { return rank_ == 0; }

  void runAll() {
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
  void init() {
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
  void splitWorld() {
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
  void describeRanks() {
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
    std::vector<int> pids;
    std::vector<std::string> transports;  // every rank's, each name once
    for (const RankRecord& r : all) {
      f.ranks.push_back({r.rank, r.pid, r.localIndex, std::string(r.host, strnlen(r.host, sizeof r.host)),
                         std::string(r.affinity, strnlen(r.affinity, sizeof r.affinity)), r.colour});
      if (std::find(pids.begin(), pids.end(), r.pid) == pids.end()) pids.push_back(r.pid);
      std::string names(r.transports, strnlen(r.transports, sizeof r.transports));
      for (size_t start = 0; start <= names.size();) {
        size_t end = std::min(names.find('+', start), names.size());
        std::string name = names.substr(start, end - start);
        if (!name.empty() && name != "none" && std::find(transports.begin(), transports.end(), name) == transports.end())
          transports.push_back(name);
        start = end + 1;
      }
    }
    // As the library decided them for each pair of ranks: "local" within a process, "shm" between
    // processes of one node, "net/<backend>" between nodes.
    std::sort(transports.begin(), transports.end());
    f.transports.clear();
    for (const std::string& t : transports) f.transports += (f.transports.empty() ? "" : ", ") + t;
    if (f.transports.empty()) f.transports = "none (one rank)";
    f.topology = std::to_string(nranks_) + " ranks in " + std::to_string(pids.size()) + " processes on " + std::to_string(nodes) + " nodes";
    if (ctx_.split) {
      // The colours as the ranks had them, so the report shows the groups ncclCommSplit made.
      f.split = ctx_.split->describe();
      std::map<int, std::vector<int>> groups;
      for (const RankRecord& r : all) groups[r.colour].push_back(r.rank);
      for (auto& [colour, ranks] : groups) f.groups.push_back({colour, std::move(ranks)});
    }
    if (!printing()) return;
    std::printf("# nccl-tests version 2.19.6 (tutti perf, %s) nccl-headers=%d nccl-library=%d\n", f.tuttiVersion.c_str(), NCCL_VERSION_CODE, version);
    std::printf("# Collective test starting: %s\n", ctx_.program.c_str());
    std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
                ctx_.world.launcher == "local" ? opt_.localRanks : opt_.threads, opt_.gpus, opt_.minBytes, opt_.maxBytes,
                opt_.stepFactor > 1 ? opt_.stepFactor : opt_.stepBytes, opt_.stepFactor > 1 ? "factor" : "bytes", opt_.warmupIters, opt_.iters,
                opt_.aggIters, opt_.check, opt_.cudaGraph, opt_.unalign);
    if (opt_.blocking == 1) std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
    if (opt_.blocking == 2) std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
    if (opt_.blocking == 3) std::printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
    if (opt_.perIterTiming)
      std::printf("# Per-Iteration Report: host clock timing, each iteration waits for its stream; i_* uses max over ranks%s \n",
                  opt_.perIterSkip ? ("; summary skips first " + std::to_string(opt_.perIterSkip) + " iterations").c_str() : "");
    if (opt_.parallelInit) std::printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
    std::printf("# tutti: device backend %s, launcher %s, transports %s, %s\n", backend, f.launcher.c_str(), f.transports.c_str(), f.topology.c_str());
    std::printf("%s%s%s", buildLine(f).c_str(), topologyLines(f).c_str(), groupLines(f).c_str());
    if (ctx_.split && !ctx_.split->ignored.empty())
      std::printf("# tutti: %s is ignored: NCCL_TESTS_SPLIT_MASK is set too and wins, as in nccl-tests\n", ctx_.split->ignored.c_str());
    if (!coll_.runsInPlace) std::printf("# tutti: an in-place %s is not supported by tutti yet; the in-place columns read 0 and N/A\n", coll_.name);
    for (const std::string& note : opt_.notes) std::printf("# tutti: %s\n", note.c_str());
    std::printf("#\n# Using devices\n");
    for (const RankDescription& d : f.ranks) std::printf("%s", deviceLine(d, backend).c_str());
  }

  // Every node of the communicator's topology, as the library holds it (the same on every rank).
  std::vector<NodeDescription> describeNodes(int nodes) {
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
  void barrier() {
    int32_t one = 1, sum = 0;
    check(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, world_, nullptr), rank_, "ncclAllReduce (barrier)");
  }

  void synchronize() {
    if (stream_) check(tuttiStreamSynchronize(stream_), rank_, "tuttiStreamSynchronize");
  }

  // A value over all ranks of the world (of every group, as nccl-tests reduces over MPI_COMM_WORLD): op is ncclSum,
  // ncclMin or ncclMax; -1 means rank 0's value.
  double combine(double value, int op) {
    double out = 0;
    if (op < 0) check(ncclBroadcast(&value, &out, 1, ncclFloat64, 0, world_, nullptr), rank_, "ncclBroadcast (rank 0's time)");
    else check(ncclAllReduce(&value, &out, 1, ncclFloat64, ncclRedOp_t(op), world_, nullptr), rank_, "ncclAllReduce (statistics)");
    return out;
  }
  double combineTime(double seconds) {
    switch (opt_.average) {
      case 0: return combine(seconds, -1);
      case 2: return combine(seconds, ncclMin);
      case 3: return combine(seconds, ncclMax);
      default: return combine(seconds, ncclSum) / nranks_;
    }
  }

  // The op a test runs with: mulsum is a PreMulSum by 2 made for this communicator and type.
  struct ActiveOp {
    ncclRedOp_t op;
    bool custom;
  };

  void launch(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts) {
    char* recv = recvBuffer_->bytes() + size_t(opt_.unalign) * type.size;
    char* send = sendBuffer_->bytes() + size_t(opt_.unalign) * type.size;
    const void* sendPointer = inPlace ? recv + counts.sendInPlaceOffset * size_t(groupRank_) * type.size : send;
    void* recvPointer = inPlace ? recv + counts.recvInPlaceOffset * size_t(groupRank_) * type.size : recv;
    check(coll_.run(sendPointer, recvPointer, counts.param, type.type, op, root, comm_, stream_), rank_, std::string("nccl ") + coll_.name);
  }

  // One placement's timing: the time per operation over ranks (as -a and -C ask) and, with -I 1, this rank's iterations.
  struct Timing {
    double seconds = 0;
    std::vector<double> iterationSeconds;
  };

  Timing timePlacement(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts) {
    barrier();
    Timing timing;
    double collectiveOnly = 0;
    Clock::time_point start = Clock::now();
    for (int iter = 0; iter < opt_.iters; iter++) {
      Clock::time_point iterStart = Clock::now();
      if (opt_.aggIters > 1) check(ncclGroupStart(), rank_, "ncclGroupStart");
      for (int a = 0; a < opt_.aggIters; a++) launch(type, op, root, inPlace, counts);
      if (opt_.aggIters > 1) check(ncclGroupEnd(), rank_, "ncclGroupEnd");
      // Host mode has no stream events: an iteration is timed on the host clock until its stream is done.
      if (opt_.blocking || opt_.perIterTiming) synchronize();
      if (opt_.perIterTiming) timing.iterationSeconds.push_back(secondsSince(iterStart) / opt_.aggIters);
      if (opt_.blocking == 3) collectiveOnly += secondsSince(iterStart);
      if (opt_.blocking == 1 || opt_.blocking == 3) barrier();
    }
    double cpuSeconds = secondsSince(start);
    synchronize();
    double seconds = opt_.blocking == 3 ? collectiveOnly : secondsSince(start);
    double perOp = (opt_.reportCpuTime ? cpuSeconds : seconds) / (opt_.iters * opt_.aggIters);
    timing.seconds = combineTime(perOp);
    return timing;
  }

  // -I 1: every rank's iteration times to every rank; each iteration's time is its maximum over ranks, as nccl-tests
  // takes the maximum over GPUs and then over processes (kept per process for the JSON report).
  IterationStats iterationStatsOverRanks(const std::vector<double>& mySeconds) {
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

  double inputValue(int rank, size_t index, const RedOpInfo& op) const {
    // Small integers: exact in every type, so sums over a few ranks are exact even in fp8; prod stays in {1, 2}.
    size_t range = op.op == ncclProd ? 2 : 4;
    return double(1 + (size_t(rank) * 7 + index * 3 + size_t(repetition_)) % range);
  }

  double reference(size_t index, const RedOpInfo& op, const DataTypeInfo& type) const {
    double acc = inputValue(0, index, op) * (op.op == ncclNumOps ? 2 : 1);
    for (int k = 1; k < groupRanks_; k++) {
      double x = inputValue(k, index, op);
      switch (op.op) {
        case ncclProd: acc *= x; break;
        case ncclMax: acc = std::max(acc, x); break;
        case ncclMin: acc = std::min(acc, x); break;
        case ncclNumOps: acc += 2 * x; break;
        default: acc += x; break;
      }
    }
    if (op.op == ncclAvg) acc = type.isInteger ? std::trunc(acc / groupRanks_) : acc / groupRanks_;
    return acc;
  }

  // One checking pass: fresh inputs, one operation, every output element against the reference.
  int64_t checkPlacement(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, bool inPlace,
                         const BufferCounts& counts, size_t bytes) {
    repetition_++;
    char* recv = recvBuffer_->bytes() + size_t(opt_.unalign) * type.size;
    char* send = inPlace ? recv + counts.sendInPlaceOffset * size_t(groupRank_) * type.size : sendBuffer_->bytes() + size_t(opt_.unalign) * type.size;
    std::memset(recv, 0xff, std::max(counts.recv, counts.send) * type.size);  // -1 or NaN: never a right answer
    for (size_t i = 0; i < counts.send; i++) writeElement(type.type, send, i, inputValue(groupRank_, i, opInfo));
    launch(type, op, root, inPlace, counts);
    synchronize();
    char* output = recv + (inPlace ? counts.recvInPlaceOffset * size_t(groupRank_) * type.size : 0);
    size_t checked = coll_.checkedCount(counts, groupRank_, root);
    injectCorruption(output, checked, type);
    InputValue input = [&](int rank, size_t index) { return inputValue(rank, index, opInfo); };
    ReducedValue reduced = [&](size_t index) { return reference(index, opInfo, type); };
    int64_t wrong = 0;
    size_t firstBad = 0;
    double firstExpected = 0, firstGot = 0;
    for (size_t i = 0; i < checked; i++) {
      double want = coll_.expected(i, groupRank_, groupRanks_, root, counts.param, input, reduced);
      unsigned char rounded[8];
      writeElement(type.type, rounded, 0, want);
      want = readElement(type.type, rounded, 0);
      double got = readElement(type.type, output, i);
      double tolerance = type.isInteger ? 0 : 2.0 * groupRanks_ * type.epsilon * std::fabs(want);
      if (!(std::fabs(got - want) <= tolerance)) {
        if (wrong == 0) firstBad = i, firstExpected = want, firstGot = got;
        wrong++;
      }
    }
    if (wrong) {
      std::lock_guard lock(ctx_.outputMutex);
      std::fprintf(stderr, "%s: rank %d: %s %zu B %s %s root %d %s: %lld wrong elements, first at element %zu (expected %g, got %g)\n",
                   ctx_.program.c_str(), rank_, coll_.name, bytes, type.name, opInfo.name, root, inPlace ? "in-place" : "out-of-place",
                   static_cast<long long>(wrong), firstBad, firstExpected, firstGot);
    }
    return wrong;
  }

  // TUTTI_PERF_CORRUPT=rank:offset (tests only): flips element offset of rank's output before the check.
  void injectCorruption(char* output, size_t checked, const DataTypeInfo& type) const {
    const char* hook = std::getenv("TUTTI_PERF_CORRUPT");
    if (!hook) return;
    int rank = -1;
    unsigned long long offset = 0;
    if (std::sscanf(hook, "%d:%llu", &rank, &offset) != 2 || rank != rank_ || offset >= checked) return;
    output[offset * type.size] = char(~output[offset * type.size]);
  }

  void runTest(const DataTypeInfo& type, const RedOpInfo& opInfo, int root) {
    ActiveOp active{opInfo.op, false};
    if (opInfo.op == ncclNumOps && coll_.usesOp && std::string(coll_.name) != "sendrecv") {
      unsigned char scalar[8];
      writeElement(type.type, scalar, 0, 2.0);
      check(ncclRedOpCreatePreMulSum(&active.op, scalar, type.type, ncclScalarHostImmediate, comm_), rank_, "ncclRedOpCreatePreMulSum");
      active.custom = true;
    } else if (opInfo.op == ncclNumOps) {
      active.op = ncclSum;
    }
    try {
      runSizes(type, opInfo, active.op, root);
    } catch (...) {
      if (active.custom) ncclRedOpDestroy(active.op, comm_);
      throw;
    }
    if (active.custom) check(ncclRedOpDestroy(active.op, comm_), rank_, "ncclRedOpDestroy");
  }

  BufferCounts countsFor(size_t bytes, const DataTypeInfo& type) const {
    return coll_.counts(bytes / type.size, type.size, groupRanks_);
  }

  void runSizes(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root) {
    ctx_.watchdog.busy(localIndex_, std::string("the barrier before the warm-up of ") + coll_.name + " " + type.name);
    barrier();
    // Warm-up over all sizes, doubling, as nccl-tests does.
    for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes; bytes = bytes ? bytes * 2 : 1) {
      ctx_.watchdog.busy(localIndex_, std::string("the warm-up of ") + coll_.name + " " + std::to_string(bytes) + " B " + type.name);
      BufferCounts counts = countsFor(bytes, type);
      for (int i = 0; i < opt_.warmupIters; i++) launch(type, op, root, false, counts);
      synchronize();
    }
    ctx_.watchdog.idle(localIndex_);
    for (long cycle = 0; opt_.runCycles == 0 || cycle < opt_.runCycles; cycle++) {
      for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
        runSize(type, opInfo, op, root, bytes);
        size_t next = opt_.stepFactor > 1 ? bytes * opt_.stepFactor : bytes + opt_.stepBytes;
        if (next <= bytes) next = bytes ? bytes * 2 : 1;  // -b 0 with -f, or -i 0 with -b == -e
        if (bytes == opt_.maxBytes) break;
        bytes = next;
      }
    }
  }

  // What tutti's selector runs for this call, "algorithm/protocol/channels" (for example
  // "ring/Simple/2ch"); the collective table's name if the library cannot say.
  std::string algorithmFor(size_t count, ncclDataType_t type) const {
    std::string collective;
    for (const char* c = coll_.name; *c; c++)
      if (*c != '_') collective += *c;
    if (collective == "sendrecv" || collective == "hypercube") collective = "send";
    char name[64] = {};
    int channels = 0;
    if (tuttiCommAlgorithm(comm_, collective.c_str(), count, type, name, sizeof name, &channels) != ncclSuccess)
      return coll_.algorithm;
    return std::string(name) + "/Simple/" + std::to_string(channels) + "ch";
  }

  void runSize(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, size_t bytes) {
    BufferCounts counts = countsFor(bytes, type);
    ResultRow row;
    row.bytes = std::max(counts.send, counts.recv) * type.size;
    row.count = counts.param;
    row.type = type.name;
    row.redop = coll_.usesOp ? opInfo.name : "none";
    row.root = root;
    row.algorithm = algorithmFor(counts.param, type.type);
    for (bool inPlace : {false, true}) {
      if (inPlace && !coll_.runsInPlace) continue;  // the row keeps zeros and N/A there
      ctx_.watchdog.busy(localIndex_, std::string(coll_.name) + " " + std::to_string(row.bytes) + " B " + type.name + (inPlace ? " in-place" : " out-of-place"));
      Timing timing = timePlacement(type, op, root, inPlace, counts);
      double seconds = timing.seconds;
      Measurement& m = inPlace ? row.inPlace : row.outOfPlace;
      m.timeUs = seconds * 1e6;
      coll_.bandwidth(counts.param, type.size, seconds, groupRanks_, &m.algBw, &m.busBw);
      if (opt_.check > 0) {
        int64_t wrong = 0;
        for (int pass = 0; pass < opt_.check && wrong == 0; pass++) {
          int64_t mine = checkPlacement(type, opInfo, op, root, inPlace, counts, row.bytes);
          // Sum of wrong elements, and how many ranks saw any (nccl-tests' out-of-bounds count).
          wrong = int64_t(combine(double(mine), ncclSum));
          int ranksWrong = int(combine(mine ? 1.0 : 0.0, ncclSum));
          if (wrong) report_.outOfBounds += ranksWrong;
        }
        m.wrong = wrong;
      }
      if (opt_.perIterTiming) m.perIteration = iterationStatsOverRanks(timing.iterationSeconds);
      ctx_.watchdog.idle(localIndex_);
      busBwSum_ += m.busBw;
      busBwCount_++;
    }
    if (opt_.reportTimestamps) row.timestamp = nowString();
    if (printing()) std::printf("%s", tableRow(row).c_str()), std::fflush(stdout);
    report_.rows.push_back(row);
  }

  void finish() {
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

  void writeFile(const std::string& path, const std::string& text, const char* kind) {
    if (path.empty()) return;
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) throw Error(ErrorCode::System, std::string("writing the ") + kind + " report to " + path + " failed");
    std::printf("# Wrote %s report to %s\n", kind, path.c_str());
  }

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

std::string baseName(const char* path) {
  std::string text = path ? path : "perf";
  size_t slash = text.rfind('/');
  return slash == std::string::npos ? text : text.substr(slash + 1);
}

// Options that only the world's size can judge; refused before any rank starts, like the parser's errors. With a
// split (colours: every world rank's) they are judged for each group, which runs the collective on its own.
void checkOptionsForWorld(const Options& options, const Collective& coll, int nranks, const std::optional<GroupSplit>& split,
                          const std::vector<int>& colours) {
  if (!split) {
    if (auto why = coll.unsupported(nranks)) throw Error(ErrorCode::InvalidUsage, *why);
    if (options.root >= nranks)
      throw Error(ErrorCode::InvalidArgument, "option -r " + std::to_string(options.root) + ": only " + std::to_string(nranks) + " ranks");
    return;
  }
  std::map<int, int> groupRanks;  // colour -> ranks
  for (int colour : colours) groupRanks[colour]++;
  std::string where = " (" + split->describe() + ")";
  for (auto [colour, ranks] : groupRanks) {
    if (auto why = coll.unsupported(ranks)) throw Error(ErrorCode::InvalidUsage, "group " + std::to_string(colour) + where + ": " + *why);
    if (options.root >= ranks)
      throw Error(ErrorCode::InvalidArgument, "option -r " + std::to_string(options.root) + ": only " + std::to_string(ranks) +
                                                  " ranks in group " + std::to_string(colour) + where);
  }
  // Every root in turn is a different number of rows in groups of different sizes, and the groups keep in step.
  auto [smallest, largest] = std::minmax_element(groupRanks.begin(), groupRanks.end(),
                                                 [](auto& a, auto& b) { return a.second < b.second; });
  if (coll.usesRoot && options.root == -1 && smallest->second != largest->second)
    throw Error(ErrorCode::InvalidUsage, "option -r -1 (every root) needs groups of one size; " + split->describe() + " makes group " +
                                             std::to_string(smallest->first) + " of " + std::to_string(smallest->second) + " ranks and group " +
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
Baseline readCompareBaseline(const Options& options, const Collective& coll, int nranks, const std::optional<GroupSplit>& split) {
  const std::string& path = options.compareFile;
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": cannot read it: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  Baseline baseline = readBaseline(text.str(), "--compare " + path);
  if (!baseline.collective.empty() && baseline.collective != coll.name)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline measured " + baseline.collective + ", this run " +
                                                coll.name + "; compare a sweep with one of the same collective");
  if (baseline.nranks != 0 && baseline.nranks != nranks)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline ran on " + std::to_string(baseline.nranks) +
                                                " ranks, this run has " + std::to_string(nranks) + "; compare runs of the same size");
  std::string mine = split ? split->describe() : "";
  if (baseline.split != mine)
    throw Error(ErrorCode::InvalidArgument, "--compare " + path + ": the baseline ran " +
                                                (baseline.split.empty() ? "unsplit" : "with " + baseline.split) + ", this run " +
                                                (mine.empty() ? "unsplit" : "with " + mine) + "; compare runs split into the same groups");
  return baseline;
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

}  // namespace

int runSweep(const char* collective, int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows line by line, as nccl-tests does
  std::string program = baseName(argc > 0 ? argv[0] : nullptr);
  Options options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
    return kUsageExitCode;
  }
  for (const std::string& warning : options.warnings) std::fprintf(stderr, "%s\n", warning.c_str());
  if (options.help) {
    std::printf("%s", usageText(program).c_str());
    return 0;
  }
  // The CUDA device backend does not exist yet: the sweep runs on host buffers.
  setenv("TUTTI_DEVICE", "host", 0);
  const int bootstrapSeconds = boundBootstrap(options.timeoutSeconds);
  std::optional<MpiSession> mpi;
  World world;
  try {
    const Collective& coll = findCollective(collective);
    auto env = processEnvironment();
    world = detectWorld(options, env);
    if (world.launcher == "mpi") {
      mpi.emplace(&argc, &argv);
      world = joinMpiWorld(world, env, mpi->rank(), mpi->size());
    }
    // Usage errors that need the world: every process finds the same ones, so each stops at once; process 0 says why.
    std::optional<Baseline> baseline;
    std::optional<GroupSplit> split;
    std::vector<int> colours;
    int usage = 0;
    try {
      split = groupSplitFromEnvironment(env);
      if (split) colours = groupColours(*split, world);
      checkOptionsForWorld(options, coll, world.nranks(), split, colours);
      if (world.processRank == 0) {
        requireWritable(options.jsonFile, "--json");
        requireWritable(options.csvFile, "--csv");
        if (!options.compareFile.empty()) baseline = readCompareBaseline(options, coll, world.nranks(), split);
      }
    } catch (const Error& error) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
      usage = kUsageExitCode;
    }
    if (mpi) usage = mpi->agreeExitCode(usage);  // the report checks are process 0's alone
    if (usage) return usage;
    ncclUniqueId id = mpi ? mpi->broadcastUniqueId() : shareUniqueId(world, options, env, bootstrapSeconds);
    SweepContext context{coll,
                         options,
                         world,
                         id,
                         program,
                         std::vector<std::string>(argv + 1, argv + argc),
                         std::move(baseline),
                         std::move(split),
                         std::move(colours),
                         Watchdog(world.ranksPerProcess, options.timeoutSeconds),
                         0,
                         false,
                         {}};
    std::vector<std::thread> threads;
    for (int i = 0; i < world.ranksPerProcess; i++)
      threads.emplace_back([&context, i] { RankRunner(context, i).run(); });
    for (std::thread& t : threads) t.join();
    // Every rank has its communicator (or gave up): the id file has served, and must not mislead the next run.
    std::string idFile = uniqueIdFile(world, options, env);
    if (world.processRank == 0 && !idFile.empty()) std::remove(idFile.c_str());
    return mpi ? mpi->agreeExitCode(context.exitCode) : int(context.exitCode);
  } catch (const std::exception& error) {
    auto* perfError = dynamic_cast<const Error*>(&error);
    bool timedOut = perfError && perfError->code() == ErrorCode::Timeout;
    std::fprintf(stderr, "%s: %s%s\n", program.c_str(), timedOut ? "timed out in init: " : "", error.what());
    int code = timedOut ? kTimeoutExitCode : 1;
    if (mpi) mpi->abort(code);
    return code;
  }
}

}  // namespace tutti::perf
