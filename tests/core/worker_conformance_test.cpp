// The worker conformance suite: the rules every worker loop keeps (kernels/README.md, "The
// worker's rules"), each case written once and run against both loops through a small adapter:
// the host executor's (runWorker on host threads, kernels/host/host_executor.h) and the device
// executor's (its kernel body, kernels/device/device_executor.h, on the emulated device's host
// threads, as a launch of the cuda backend over the emulated driver runs it). The device loop is
// built only with the CUDA parts (TUTTI_HAVE_CUDA); without them the cases run on the host loop.
// Case names carry the rule's number.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/bell.h"
#include "kernels/exec_fault.h"
#include "kernels/host/host_executor.h"
#include "kernels/plan_bounds.h"
#include "kernels/wait_hooks.h"
#include "kernels/wait_slot.h"
#include "tests/core/core_test_support.h"
#if TUTTI_HAVE_CUDA
#include "kernels/emulated/emulated_device.h"
#endif

namespace {

using namespace tutti_test::core;
using plan::Layout;
using plan::Op;
using tutti::Error;
using tutti::ErrorCode;
using Clock = std::chrono::steady_clock;

// Long enough that a loaded 2-core machine still makes progress well within it; short enough
// that a loop that ignores a rule fails the case within seconds instead of hanging ctest.
constexpr double kGenerous = 20;
constexpr double kShort = 0.3;  // for cases that expect a timeout

// Peers as the runtime names them in errors: every loop's errors must use these words.
std::string peerName(int peer) { return "rank " + std::to_string(peer) + " (host-b pid 4242)"; }
struct NamingHooks : kern::WaitHooks {
  std::string describePeer(int peer) const override { return peerName(peer); }
};
const NamingHooks kNamingHooks;

// One rank's launch of a case: worker 0, its queues side by side, each lane of a queue one
// operation's, run in order.
class RankLaunch {
 public:
  RankLaunch(int rank, int nranks) : rank(rank), nranks(nranks) {}
  const int rank, nranks;

  uint32_t addOp(const kern::OpWork& op) { return builder_.addOp(op); }
  void beginQueue() {
    if (!begun_) builder_.beginWorker();
    begun_ = true;
    builder_.beginQueue();
  }
  // A lane of `spec` for operation `op` over [begin, end), in the current queue.
  void addLane(plan::LaneSpec spec, uint32_t op, uint64_t chunkElems, uint64_t begin, uint64_t end,
               const LaneConns& conns) {
    plan::RankPlan p;
    p.algorithm = "conformance";
    p.lanes.push_back(std::move(spec));
    kern::checkPlanBounds(p, rank, nranks);
    plans_.push_back(std::make_unique<std::vector<uint64_t>>(plan::compilePlan(p)));
    kern::LaneWork lw{};
    lw.plan = &plan::flatPlanOf(*plans_.back());
    lw.begin = begin;
    lw.end = end;
    lw.chunkElems = chunkElems;
    lw.op = op;
    builder_.addLane(lw, conns.sends, conns.recvs);
  }
  // One operation with one lane in a queue of its own.
  void addQueue(const plan::LaneSpec& spec, const kern::OpWork& op, uint64_t chunkElems, const LaneConns& conns) {
    const uint32_t index = addOp(op);
    beginQueue();
    addLane(spec, index, chunkElems, 0, op.count, conns);
  }
  // The arena; a rank with no queue gets a worker with none, which ends at once.
  void build() {
    if (!begun_) builder_.beginWorker();
    begun_ = true;
    scratch_.resize(builder_.layOutScratch());
    arena_ = builder_.build();
    work().scratch = scratch_.empty() ? nullptr : scratch_.data();
  }
  kern::LaunchWork& work() { return kern::launchWorkOf(arena_); }
  const kern::OpWork* ops() { return work().ops(); }

 private:
  kern::WorkBuilder builder_;
  bool begun_ = false;
  std::vector<std::unique_ptr<std::vector<uint64_t>>> plans_;
  std::vector<uint64_t> arena_;
  std::vector<char> scratch_;
};

// How one rank's worker ended: nothing thrown or recorded, or the error it failed with.
struct Outcome {
  bool failed = false;
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  double seconds = 0;  // from start() to the worker's end
};

// What a loop adapter provides (each case is a template over it):
//   Loop(nranks)                     ranks' launches to fill (rank(r)), and what their
//                                    connections need (bell(r): the bell a peer rings, or null)
//   start(timeoutSeconds)            every rank's worker 0 at once, asynchronously
//   finish()                         waits for every worker; each one's Outcome
//   abort()                          what ncclCommAbort does to a running launch
//   waitingNow(r)                    what rank r's worker publishes as its wait while it waits
//   lastWait(r)                      the wait it left for the host to read once it stopped
//   kPublishesWhileWaiting           whether waitingNow says anything (policy P2)
// The destructor aborts what still runs and waits for it, so that a failed check never leaves
// a worker reading a case's freed buffers.
class LoopBase {
 public:
  explicit LoopBase(int nranks) {
    for (int r = 0; r < nranks; r++) ranks_.push_back(std::make_unique<RankLaunch>(r, nranks));
  }
  RankLaunch& rank(int r) { return *ranks_[size_t(r)]; }
  int nranks() const { return int(ranks_.size()); }

 protected:
  std::vector<std::unique_ptr<RankLaunch>> ranks_;
  std::vector<Outcome> outcomes_;
  Clock::time_point started_;
  double timeoutSeconds_ = 0;
};

class HostLoop : public LoopBase {
 public:
  static constexpr const char* kName = "host";
  static constexpr bool kPublishesWhileWaiting = true;
  explicit HostLoop(int nranks)
      : LoopBase(nranks), bells_(new kern::Bell[size_t(nranks)]), slots_(new kern::WaitSlot[size_t(nranks)]) {}
  ~HostLoop() {
    abort();
    join();
  }
  void* bell(int r) { return &bells_[size_t(r)]; }

  void start(double timeoutSeconds) {
    timeoutSeconds_ = timeoutSeconds;
    outcomes_.assign(ranks_.size(), Outcome{});
    started_ = Clock::now();
    for (int r = 0; r < nranks(); r++)
      threads_.emplace_back([this, r] {
        kern::ExecutionContext ctx;
        ctx.bell = &bells_[size_t(r)];
        ctx.abortFlag = &abort_;
        ctx.timeoutSeconds = timeoutSeconds_;
        ctx.spin = 20;
        ctx.yields = 5;
        ctx.rank = r;
        ctx.hooks = &kNamingHooks;
        ctx.waitSlot = &slots_[size_t(r)];
        Outcome& o = outcomes_[size_t(r)];
        try {
          kern::host::runWorker(rank(r).work(), rank(r).ops(), 0, ctx);
        } catch (const Error& e) {
          o.failed = true;
          o.code = e.code();
          o.message = e.what();
        }
        o.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
      });
  }
  std::vector<Outcome> finish() {
    join();
    return outcomes_;
  }
  // As the runtime aborts: the flag, then every worker's bell, so that a sleeping wait wakes.
  void abort() {
    abort_.store(true);
    for (int r = 0; r < nranks(); r++) kern::ringBell(&bells_[size_t(r)]);
  }
  kern::WaitRecord waitingNow(int r) const { return slots_[size_t(r)].read(); }
  // The wait kept for the diagnosis of a timeout (WaitSlot::timedOut); after another end, the
  // last one published (WaitSlot::readLast, the flight recorder's).
  kern::WaitRecord lastWait(int r) const {
    if (outcomes_[size_t(r)].code == ErrorCode::Timeout) return slots_[size_t(r)].timedOut();
    return slots_[size_t(r)].readLast();
  }

 private:
  void join() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  std::unique_ptr<kern::Bell[]> bells_;
  std::unique_ptr<kern::WaitSlot[]> slots_;
  std::atomic<bool> abort_{false};
  std::vector<std::thread> threads_;
};

#if TUTTI_HAVE_CUDA
// Each rank a launch of one block, all launches run at once by the emulated device (two host
// threads per block, so that the block's barriers and shared decisions are exercised), each with
// its own control words, as the cuda backend gives each communicator's launches.
class DeviceLoop : public LoopBase {
 public:
  static constexpr const char* kName = "device";
  static constexpr bool kPublishesWhileWaiting = false;
  explicit DeviceLoop(int nranks) : LoopBase(nranks), faults_(size_t(nranks)) {}
  ~DeviceLoop() {
    abort();
    if (thread_.joinable()) thread_.join();
  }
  void* bell(int) { return nullptr; }  // a device rings no bell: its peers poll

  void start(double timeoutSeconds) {
    timeoutSeconds_ = timeoutSeconds;
    outcomes_.assign(ranks_.size(), Outcome{});
    for (int r = 0; r < nranks(); r++)
      launches_.push_back(kern::dev::EmulatedLaunch{
          &rank(r).work(), rank(r).ops(),
          kern::dev::ExecControl{&abortWord_, &faults_[size_t(r)], uint64_t(timeoutSeconds * 1e9), &directReads_}, 1});
    started_ = Clock::now();
    thread_ = std::thread([this] {
      kern::dev::runEmulatedLaunches(launches_, 2);
      ended_ = std::chrono::duration<double>(Clock::now() - started_).count();
    });
  }
  // Each launch's fault record in words, as the cuda backend reports a launch that ended.
  std::vector<Outcome> finish() {
    thread_.join();
    for (int r = 0; r < nranks(); r++) {
      const kern::ExecFault& f = faults_[size_t(r)];
      Outcome& o = outcomes_[size_t(r)];
      o.seconds = ended_;
      if (f.fault == uint32_t(kern::Fault::None)) continue;
      o.failed = true;
      o.code = kern::faultCode(f);
      o.message = kern::describeFault(f, r, peerName, timeoutSeconds_);
    }
    return outcomes_;
  }
  void abort() { __atomic_store_n(&abortWord_, 1u, __ATOMIC_SEQ_CST); }
  kern::WaitRecord waitingNow(int) const { return {}; }
  kern::WaitRecord lastWait(int r) const {
    const kern::ExecFault& f = faults_[size_t(r)];
    if (f.fault != uint32_t(kern::Fault::Timeout) && f.fault != uint32_t(kern::Fault::Aborted)) return {};
    return kern::waitRecordOf(f);
  }

 private:
  std::vector<kern::ExecFault> faults_;
  uint32_t abortWord_ = 0;
  uint64_t directReads_ = 0;
  std::vector<kern::dev::EmulatedLaunch> launches_;
  std::thread thread_;
  double ended_ = 0;
};
// The loops every case runs on (a macro: TEMPLATE_TEST_CASE names each case after its type).
#define TUTTI_WORKER_LOOPS HostLoop, DeviceLoop
#else
#define TUTTI_WORKER_LOOPS HostLoop
#endif

// A receive of 16 floats from peer 1, who never sends (rank 1 of the case runs nothing): a
// worker that can only wait.
template <class Loop>
struct LoneReceiver {
  HostFifo fifo{2, 256};
  std::vector<float> received = std::vector<float>(16, 0.0f);
  explicit LoneReceiver(Loop& loop) {
    kern::OpWork op = opWork(nullptr, received.data(), 16, ncclFloat32, 4, plan::Coll::Broadcast, 2, 12);
    loop.rank(0).addQueue(lane(Layout::Whole, {}, {1}, {step(Op::Recv, none(), out())}), op, 64,
                          LaneConns{{}, {connEnd(fifo.header(), 1, loop.bell(1))}});
    loop.rank(0).build();
    loop.rank(1).build();  // nothing: its worker has no queue and ends at once
  }
};

// Waits (at most kGenerous) until rank r is inside its wait: where the loop publishes it, until
// it says so; where it does not (it spins from its first poll), a moment.
template <class Loop>
void waitUntilWaiting(const Loop& loop, int r) {
  if (!Loop::kPublishesWhileWaiting) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return;
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(kGenerous);
  while (loop.waitingNow(r).what == kern::WaitFor::Nothing && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(loop.waitingNow(r).what == kern::WaitFor::Data);
  CHECK(loop.waitingNow(r).peer == 1);
}

}  // namespace

// Rule 1 (progress): every lane that can move moves, through FIFOs that fill and drain, to the
// bytes a float64 reference gives.
TEMPLATE_TEST_CASE("worker rule 1: two ranks all-reduce through 2-slot FIFOs to the float64 reference",
                   "[core][conformance]", TUTTI_WORKER_LOOPS) {
  constexpr uint64_t kCount = 1003, kChunk = 64;  // many tiles, a short last one, senders waiting for room
  HostFifo toRank[2] = {HostFifo(2, kChunk * 4), HostFifo(2, kChunk * 4)};
  std::vector<float> input[2], output[2];
  for (int r = 0; r < 2; r++) {
    input[r].resize(kCount);
    for (uint64_t i = 0; i < kCount; i++) input[r][i] = float(int(i % 101) - 50) * 0.25f + float(r * 3);
    output[r].assign(kCount, 0.0f);
  }
  std::vector<double> reference(kCount);
  for (uint64_t i = 0; i < kCount; i++) reference[i] = double(input[0][i]) + double(input[1][i]);
  TestType loop(2);
  for (int r = 0; r < 2; r++) {
    const int o = 1 - r;
    // Send my chunk; receive the other's, add mine, keep and send the sum; receive my chunk's sum.
    plan::LaneSpec ring = lane(
        Layout::Split, {o}, {o},
        {step(Op::Send, in(r), none()), step(Op::RecvReduceCopySend, in(o), out(o)), step(Op::Recv, none(), out(r))});
    loop.rank(r).addQueue(
        ring, opWork(input[r].data(), output[r].data(), kCount, ncclFloat32, 4, plan::Coll::AllReduce, 2), kChunk,
        LaneConns{{connEnd(toRank[o].header(), o, loop.bell(o))}, {connEnd(toRank[r].header(), o, loop.bell(o))}});
    loop.rank(r).build();
  }
  loop.start(kGenerous);
  const std::vector<Outcome> outcomes = loop.finish();
  for (int r = 0; r < 2; r++) {
    INFO(TestType::kName << " loop, rank " << r << ": " << outcomes[size_t(r)].message);
    REQUIRE_FALSE(outcomes[size_t(r)].failed);
    for (uint64_t i = 0; i < kCount; i++)
      if (double(output[r][i]) != reference[i]) FAIL("element " << i << ": " << output[r][i] << " vs " << reference[i]);
  }
  for (auto& f : toRank) CHECK(f.header()->head == f.header()->tail);  // every message consumed
}

// Rule 2 (progress between queues): rank 0's first queue waits for data that rank 1 sends only
// after rank 0's second queue has drained a stream of messages through a 2-slot FIFO; a loop that
// stopped at the blocked queue would never finish.
TEMPLATE_TEST_CASE("worker rule 2: a queue blocked on one lane does not stop another queue", "[core][conformance]",
                   TUTTI_WORKER_LOOPS) {
  constexpr uint64_t kLate = 16, kStream = 640, kChunk = 32;  // the stream: 20 messages
  HostFifo lateFifo(2, kChunk * 4), streamFifo(2, kChunk * 4);
  std::vector<float> late(kLate), stream(kStream), gotLate(kLate, 0.0f), gotStream(kStream, 0.0f);
  for (uint64_t i = 0; i < kLate; i++) late[i] = float(i) + 0.5f;
  for (uint64_t i = 0; i < kStream; i++) stream[i] = float(i) * 0.25f - 7;
  TestType loop(2);
  RankLaunch& r0 = loop.rank(0);
  r0.addQueue(lane(Layout::Whole, {}, {1}, {step(Op::Recv, none(), out())}),
              opWork(nullptr, gotLate.data(), kLate, ncclFloat32, 4, plan::Coll::Recv, 2, 1), kChunk,
              LaneConns{{}, {connEnd(lateFifo.header(), 1, loop.bell(1))}});
  r0.addQueue(lane(Layout::Whole, {}, {1}, {step(Op::Recv, none(), out())}),
              opWork(nullptr, gotStream.data(), kStream, ncclFloat32, 4, plan::Coll::Recv, 2, 2), kChunk,
              LaneConns{{}, {connEnd(streamFifo.header(), 1, loop.bell(1))}});
  r0.build();
  // Rank 1: one queue, its lanes in order: the stream first, then the late message.
  RankLaunch& r1 = loop.rank(1);
  const uint32_t streamOp = r1.addOp(opWork(stream.data(), nullptr, kStream, ncclFloat32, 4, plan::Coll::Send, 2, 2));
  const uint32_t lateOp = r1.addOp(opWork(late.data(), nullptr, kLate, ncclFloat32, 4, plan::Coll::Send, 2, 1));
  r1.beginQueue();
  r1.addLane(lane(Layout::Whole, {0}, {}, {step(Op::Send, in(), none())}), streamOp, kChunk, 0, kStream,
             LaneConns{{connEnd(streamFifo.header(), 0, loop.bell(0))}, {}});
  r1.addLane(lane(Layout::Whole, {0}, {}, {step(Op::Send, in(), none())}), lateOp, kChunk, 0, kLate,
             LaneConns{{connEnd(lateFifo.header(), 0, loop.bell(0))}, {}});
  r1.build();
  loop.start(kGenerous);
  const std::vector<Outcome> outcomes = loop.finish();
  for (const Outcome& o : outcomes) {
    INFO(TestType::kName << " loop: " << o.message);
    REQUIRE_FALSE(o.failed);
  }
  CHECK(gotStream == stream);
  CHECK(gotLate == late);
}

// Rule 3 (fairness): queue 0 copies 200 chunks and can always move; queue 1 sends one message,
// the chunk that queue 0 copies in its 101st step, and can move from the start. A loop that lets
// queue 0 run more than kQueueBurst (64) steps in a row while queue 1 waits sends the copied
// values; a fair one sends the chunk before it was written (zeros). No peer, no timing: one
// worker's order of decisions, read from what it sent.
TEMPLATE_TEST_CASE("worker rule 3: a queue that can move is not passed over while another runs on",
                   "[core][conformance]", TUTTI_WORKER_LOOPS) {
  constexpr uint64_t kChunk = 16, kTiles = 200, kSentTile = 100;
  std::vector<float> src(kChunk * kTiles), dst(kChunk * kTiles, 0.0f);
  for (size_t i = 0; i < src.size(); i++) src[i] = float(i) + 1;
  HostFifo fifo(2, kChunk * 4);
  TestType loop(2);
  RankLaunch& r0 = loop.rank(0);
  r0.addQueue(lane(Layout::Whole, {}, {}, {step(Op::Copy, in(), out())}),
              opWork(src.data(), dst.data(), src.size(), ncclFloat32, 4, plan::Coll::AllGather, 2, 1), kChunk,
              LaneConns{});
  r0.addQueue(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())}),
              opWork(dst.data() + kSentTile * kChunk, nullptr, kChunk, ncclFloat32, 4, plan::Coll::Send, 2, 2), kChunk,
              LaneConns{{connEnd(fifo.header(), 1, loop.bell(1))}, {}});
  r0.build();
  loop.rank(1).build();
  loop.start(kGenerous);
  const std::vector<Outcome> outcomes = loop.finish();
  INFO(TestType::kName << " loop: " << outcomes[0].message);
  REQUIRE_FALSE(outcomes[0].failed);
  CHECK(dst == src);  // the copy itself is whole
  REQUIRE(fifo.header()->head == 1);
  REQUIRE(fifo.header()->sizes[0] == kChunk * 4);
  std::vector<float> sent(kChunk);
  std::memcpy(sent.data(), kern::fifoSlot(fifo.header(), 0), kChunk * 4);
  CHECK(sent == std::vector<float>(kChunk, 0.0f));
}

// Rule 4 (timeout): a wait with no progress for timeoutSeconds fails the operation, naming the
// peer and what it waited for; and (rule 6) the stopped wait is left where the host reads it.
TEMPLATE_TEST_CASE("worker rules 4 and 6: a wait for data, room or a read times out naming the peer",
                   "[core][conformance]", TUTTI_WORKER_LOOPS) {
  TestType loop(2);
  SECTION("data that never comes") {
    LoneReceiver<TestType> receiver(loop);
    loop.start(kShort);
    const Outcome o = loop.finish()[0];
    REQUIRE(o.failed);
    CHECK(int(o.code) == int(ErrorCode::Timeout));
    CHECK_THAT(o.message, Catch::Contains("Broadcast #12") && Catch::Contains("on rank 0") &&
                              Catch::Contains("is waiting for data from rank 1 (host-b pid 4242)") &&
                              Catch::Contains("TUTTI_TIMEOUT"));
    CHECK(loop.lastWait(0).what == kern::WaitFor::Data);
    CHECK(loop.lastWait(0).peer == 1);
    CHECK(loop.waitingNow(0).what == kern::WaitFor::Nothing);  // nothing left published as current
    CHECK(receiver.received == std::vector<float>(16, 0.0f));
  }
  SECTION("a slot the receiver never frees") {
    HostFifo fifo(1, 256);
    fifo.header()->head = 1;  // one message already waits there, unread
    std::vector<float> data(8, 1.0f);
    loop.rank(0).addQueue(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())}),
                          opWork(data.data(), nullptr, data.size(), ncclFloat32, 4, plan::Coll::Broadcast, 2, 7), 64,
                          LaneConns{{connEnd(fifo.header(), 1, loop.bell(1))}, {}});
    loop.rank(0).build();
    loop.rank(1).build();
    loop.start(kShort);
    const Outcome o = loop.finish()[0];
    REQUIRE(o.failed);
    CHECK(int(o.code) == int(ErrorCode::Timeout));
    CHECK_THAT(o.message,
               Catch::Contains("Broadcast #7") && Catch::Contains("free FIFO space at rank 1 (host-b pid 4242)"));
    CHECK(loop.lastWait(0).what == kern::WaitFor::Space);
    CHECK(loop.lastWait(0).peer == 1);
    CHECK(fifo.header()->head == 1);  // nothing was overwritten
  }
  SECTION("a receiver that never reads what was sent to it by address") {
    constexpr uint64_t kCount = 200, kChunk = 64;  // 4 messages
    HostFifo fifo(8, kChunk * 4);
    std::vector<float> a(kCount, 1.5f);
    kern::OpWork sent = opWork(a.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2, 5);
    sent.direct = kern::kDirectIn;
    loop.rank(0).addQueue(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none(), plan::kDirect)}), sent, kChunk,
                          LaneConns{{connEnd(fifo.header(), 1, loop.bell(1), kern::kDirectShared)}, {}});
    loop.rank(0).build();
    loop.rank(1).build();
    loop.start(kShort);
    const Outcome o = loop.finish()[0];
    REQUIRE(o.failed);
    CHECK(int(o.code) == int(ErrorCode::Timeout));
    CHECK_THAT(o.message, Catch::Contains("rank 1 (host-b pid 4242) to read the buffer this rank sent it directly"));
    CHECK(loop.lastWait(0).what == kern::WaitFor::DirectRead);
    CHECK(loop.lastWait(0).peer == 1);
    CHECK(fifo.header()->head == 4);  // every message was published by address
  }
}

// Rule 5 (abort): the abort flag ends a wait within a bounded time, before its own timeout,
// whether it was raised before the wait began or during it (the host loop then sleeps on its bell,
// the device loop spins).
TEMPLATE_TEST_CASE("worker rule 5: an abort ends a wait long before its timeout", "[core][conformance]",
                   TUTTI_WORKER_LOOPS) {
  TestType loop(2);
  LoneReceiver<TestType> receiver(loop);
  const bool during = GENERATE(false, true);
  INFO(TestType::kName << " loop, abort " << (during ? "during the wait" : "before the worker starts"));
  if (!during) loop.abort();
  loop.start(kGenerous);
  if (during) {
    waitUntilWaiting(loop, 0);
    loop.abort();
  }
  const Outcome o = loop.finish()[0];
  REQUIRE(o.failed);
  CHECK(int(o.code) == int(ErrorCode::Aborted));
  CHECK_THAT(o.message, Catch::Contains("rank 0") && Catch::Contains("aborted"));
  CHECK(o.seconds < kGenerous);  // ended by the abort, not by its timeout
  if (during) {
    // What it waited for when it stopped is still there to read (rule 6).
    CHECK(loop.lastWait(0).what == kern::WaitFor::Data);
    CHECK(loop.lastWait(0).peer == 1);
  }
}

// Rule 6 (wait publication): what a waiting worker waits for is readable by the host: while it
// waits where the loop publishes (the host loop's WaitSlot), and once it stopped on every loop
// (the rule 4 and 5 cases). Here: the record while it waits, cleared once the worker moved on.
TEMPLATE_TEST_CASE("worker rule 6: a waiting worker publishes what it waits for, and clears it once it moves on",
                   "[core][conformance]", TUTTI_WORKER_LOOPS) {
  TestType loop(2);
  LoneReceiver<TestType> receiver(loop);
  loop.start(kGenerous);
  waitUntilWaiting(loop, 0);
  // The peer's message arrives now: the worker moves on and finishes.
  std::vector<float> data(16);
  for (size_t i = 0; i < data.size(); i++) data[i] = float(i) - 3.5f;
  kern::FifoHeader* f = receiver.fifo.header();
  std::memcpy(kern::fifoSlot(f, 0), data.data(), 64);
  f->sizes[0] = 64;
  kern::fifoStoreRelease(&f->head, 1);
  if (void* bell = loop.bell(0)) kern::ringBell(static_cast<kern::Bell*>(bell));
  const Outcome o = loop.finish()[0];
  INFO(TestType::kName << " loop: " << o.message);
  REQUIRE_FALSE(o.failed);
  CHECK(receiver.received == data);
  CHECK(loop.waitingNow(0).what == kern::WaitFor::Nothing);
  if (TestType::kPublishesWhileWaiting) CHECK(loop.lastWait(0).what == kern::WaitFor::Data);
}

// Rule 7 (mismatch): a message whose size or call signature disagrees with the receiver's plan
// fails the receiver at once, naming the sender, and nothing of it is written.
TEMPLATE_TEST_CASE("worker rule 7: a size or signature mismatch fails the receiver naming the sender",
                   "[core][conformance]", TUTTI_WORKER_LOOPS) {
  HostFifo fifo(2, 64 * 4);
  std::vector<float> a(64, 2.0f), b(64, 0.0f);
  kern::OpWork sent = opWork(a.data(), nullptr, 64, ncclFloat32, 4, plan::Coll::Broadcast, 2, 3);
  kern::OpWork received = opWork(nullptr, b.data(), 64, ncclFloat32, 4, plan::Coll::Broadcast, 2, 3);
  std::string expected;
  SECTION("size") {
    received.count = 32;
    expected = "rank 1 received 256 bytes from rank 0 (host-b pid 4242) where it expected 128";
  }
  SECTION("signature") {
    sent.signature = kern::callSignature(3, uint32_t(plan::Coll::Broadcast), uint32_t(ncclFloat32), 0, 0);
    received.signature = kern::callSignature(3, uint32_t(plan::Coll::AllGather), uint32_t(ncclFloat32), 0, 0);
    expected =
        "rank 0 (host-b pid 4242) called Broadcast(count 64, float32, root 0) as collective #3 where rank 1 "
        "called AllGather(count 64, float32) as collective #3";
  }
  TestType loop(2);
  // The send fits the FIFO, so the sender finishes whatever the receiver does.
  loop.rank(0).addQueue(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())}), sent, 64,
                        LaneConns{{connEnd(fifo.header(), 1, loop.bell(1))}, {}});
  loop.rank(1).addQueue(lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())}), received, 64,
                        LaneConns{{}, {connEnd(fifo.header(), 0, loop.bell(0))}});
  loop.rank(0).build();
  loop.rank(1).build();
  loop.start(kGenerous);
  const std::vector<Outcome> outcomes = loop.finish();
  INFO(TestType::kName << " loop");
  CHECK_FALSE(outcomes[0].failed);
  REQUIRE(outcomes[1].failed);
  CHECK(int(outcomes[1].code) == int(ErrorCode::InvalidUsage));
  CHECK_THAT(outcomes[1].message, Catch::Contains(expected));
  CHECK(outcomes[1].seconds < kGenerous);  // at once, not at the timeout
  CHECK(b == std::vector<float>(64, 0.0f));
  CHECK(fifo.header()->tail == 0);  // the message was not consumed
}
