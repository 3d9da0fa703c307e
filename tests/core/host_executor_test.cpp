// The host executor (kernels/host/host_executor.h): runWorker over hand-made launches whose FIFOs are
// plain host memory between two threads, its bounded waits (timeouts naming the peer, aborts,
// probes, network driving), checkPlanBounds' refusals, idlePoll and the worker pool.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/bell.h"
#include "kernels/host/host_executor.h"
#include "kernels/plan_bounds.h"
#include "kernels/wait_hooks.h"
#include "kernels/wait_slot.h"
#include "tests/core/core_test_support.h"

namespace {

using namespace tutti_test::core;
using kern::ExecutionContext;
using plan::Layout;
using plan::Op;
using tutti::Error;
using tutti::ErrorCode;

// Short waits: a bug fails the test within seconds instead of hanging ctest; a slow loaded
// machine still makes progress well within them.
constexpr double kGenerous = 20;
constexpr double kShort = 0.3;

// Hooks that name peers as the runtime's do, "rank N (host pid)": errors must use them.
struct NamingHooks : kern::WaitHooks {
  std::string describePeer(int peer) const override { return "rank " + std::to_string(peer) + " (host-b pid 4242)"; }
};
const NamingHooks kNamingHooks;

ExecutionContext contextOf(kern::Bell* bell, int rank, double timeoutSeconds) {
  ExecutionContext ctx;
  ctx.bell = bell;
  ctx.rank = rank;
  ctx.timeoutSeconds = timeoutSeconds;
  ctx.spin = 20;
  ctx.yields = 5;
  ctx.hooks = &kNamingHooks;
  return ctx;
}

plan::RankPlan planOf(plan::LaneSpec lane) {
  plan::RankPlan p;
  p.algorithm = "executor-test";
  p.lanes.push_back(std::move(lane));
  return p;
}

// Runs fn on a thread of its own; join() rethrows what it threw.
class Worker {
 public:
  template <class Fn>
  explicit Worker(Fn fn)
      : thread_([this, fn] {
          try {
            fn();
          } catch (...) {
            error_ = std::current_exception();
          }
        }) {}
  ~Worker() {
    if (thread_.joinable()) thread_.join();  // a failed check left it running: it ends by its own timeout
  }
  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
  std::thread thread_;
};

// Expects fn to throw tutti::Error with `code`; returns its message.
template <class Fn>
std::string errorOf(Fn fn, ErrorCode code) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(int(e.code()) == int(code));
    return e.what();
  }
  FAIL("no error was thrown");
  return "";
}

// A 1-element-per-slot receive from peer 1, who never sends: a lane that can only wait.
struct LoneReceiver {
  HostFifo fifo{2, 256};
  std::vector<float> received = std::vector<float>(16, 0.0f);
  std::unique_ptr<HandLaunch> launch;
  explicit LoneReceiver(kern::Bell* peerBell, uint64_t signature = 0) {
    kern::OpWork op = opWork(nullptr, received.data(), received.size(), ncclFloat32, 4, plan::Coll::Broadcast, 2, 12);
    op.signature = signature;
    launch = makeLaunch(planOf(lane(Layout::Whole, {}, {1}, {step(Op::Recv, none(), out())})), op, 64, 0,
                        received.size(), {LaneConns{{}, {connEnd(fifo.header(), 1, peerBell)}}});
  }
  void run(const ExecutionContext& ctx) { kern::host::runWorker(launch->work(), launch->ops(), 0, ctx); }
};

}  // namespace

TEST_CASE("host executor: two ranks on two threads all-reduce through host-memory FIFOs, exactly") {
  // A hand-made 2-rank ring: send my chunk; receive the other's chunk, add mine, keep and send the
  // sum; receive my chunk's sum. An odd count over 2-slot FIFOs: many tiles, a short last one,
  // and senders that wait for room.
  constexpr uint64_t kCount = 1003, kChunk = 64;
  const bool inPlace = GENERATE(false, true);
  HostFifo toRank[2] = {HostFifo(2, kChunk * 4), HostFifo(2, kChunk * 4)};  // toRank[r]: FIFO that r receives on
  kern::Bell bells[2];
  std::vector<float> input[2], output[2];
  for (int r = 0; r < 2; r++) {
    input[r].resize(kCount);
    for (uint64_t i = 0; i < kCount; i++) input[r][i] = float(int(i % 101) - 50) * 0.25f + float(r * 3);
    output[r] = inPlace ? input[r] : std::vector<float>(kCount, 0.0f);
  }
  std::vector<double> reference(kCount);
  for (uint64_t i = 0; i < kCount; i++) reference[i] = double(input[0][i]) + double(input[1][i]);
  std::unique_ptr<HandLaunch> launches[2];
  for (int r = 0; r < 2; r++) {
    const int o = 1 - r;
    plan::LaneSpec ring = lane(
        Layout::Split, {o}, {o},
        {step(Op::Send, in(r), none()), step(Op::RecvReduceCopySend, in(o), out(o)), step(Op::Recv, none(), out(r))});
    const void* src = inPlace ? output[r].data() : input[r].data();
    launches[r] = makeLaunch(
        planOf(ring), opWork(src, output[r].data(), kCount, ncclFloat32, 4, plan::Coll::AllReduce, 2), kChunk, 0,
        kCount, {LaneConns{{connEnd(toRank[o].header(), o, &bells[o])}, {connEnd(toRank[r].header(), o, &bells[o])}}});
    kern::checkPlanBounds(planOf(ring), r, 2);
  }
  std::vector<std::unique_ptr<Worker>> ranks;
  for (int r = 0; r < 2; r++) {
    ranks.push_back(std::make_unique<Worker>([&, r] {
      const ExecutionContext ctx = contextOf(&bells[r], r, kGenerous);
      kern::host::runWorker(launches[r]->work(), launches[r]->ops(), 0, ctx);
    }));
  }
  for (auto& w : ranks) REQUIRE_NOTHROW(w->join());
  for (int r = 0; r < 2; r++)
    for (uint64_t i = 0; i < kCount; i++) {
      INFO("rank " << r << ", element " << i);
      REQUIRE(double(output[r][i]) == reference[i]);
    }
  // Every message consumed: nothing left behind for the next operation on these FIFOs.
  for (auto& f : toRank) CHECK(f.header()->head == f.header()->tail);

  // The same launch runs again (its state is reset per run), as a cached launch does.
  if (!inPlace) {
    for (int r = 0; r < 2; r++) std::fill(output[r].begin(), output[r].end(), 0.0f);
    ranks.clear();
    for (int r = 0; r < 2; r++)
      ranks.push_back(std::make_unique<Worker>([&, r] {
        kern::host::runWorker(launches[r]->work(), launches[r]->ops(), 0, contextOf(&bells[r], r, kGenerous));
      }));
    for (auto& w : ranks) REQUIRE_NOTHROW(w->join());
    for (uint64_t i = 0; i < kCount; i++) REQUIRE(double(output[1][i]) == reference[i]);
  }
}

TEST_CASE("host executor: a wait for data or for room times out naming the peer, and says so in its wait slot") {
  kern::Bell bell, peerBell;
  kern::WaitSlot slot;
  ExecutionContext ctx = contextOf(&bell, 0, kShort);
  ctx.waitSlot = &slot;
  SECTION("data that never comes") {
    LoneReceiver receiver(&peerBell);
    const std::string message = errorOf([&] { receiver.run(ctx); }, ErrorCode::Timeout);
    CHECK_THAT(message, Catch::Contains("data from rank 1 (host-b pid 4242)") && Catch::Contains("TUTTI_TIMEOUT") &&
                            Catch::Contains("Broadcast #12"));
    CHECK(slot.timedOut().what == kern::WaitFor::Data);
    CHECK(slot.timedOut().peer == 1);
  }
  SECTION("a slot the receiver never frees") {
    HostFifo fifo(1, 256);
    fifo.header()->head = 1;  // one message already waits there, unread
    std::vector<float> data(8, 1.0f);
    auto launch = makeLaunch(planOf(lane(Layout::Whole, {3}, {}, {step(Op::Send, in(), none())})),
                             opWork(data.data(), nullptr, data.size(), ncclFloat32, 4, plan::Coll::Broadcast, 4), 64, 0,
                             data.size(), {LaneConns{{connEnd(fifo.header(), 3, &peerBell)}, {}}});
    const std::string message =
        errorOf([&] { kern::host::runWorker(launch->work(), launch->ops(), 0, ctx); }, ErrorCode::Timeout);
    CHECK_THAT(message, Catch::Contains("free FIFO space at rank 3 (host-b pid 4242)"));
    CHECK(slot.timedOut().what == kern::WaitFor::Space);
    CHECK(slot.timedOut().peer == 3);
    CHECK(fifo.header()->head == 1);  // nothing was overwritten
  }
  CHECK(slot.read().what == kern::WaitFor::Nothing);  // cleared once the worker stopped
}

TEST_CASE("host executor: an abort ends a wait that is asleep") {
  kern::Bell bell, peerBell;
  kern::WaitSlot slot;
  std::atomic<bool> abort{false};
  ExecutionContext ctx = contextOf(&bell, 0, kGenerous);  // far longer than the test takes
  ctx.abortFlag = &abort;
  ctx.waitSlot = &slot;
  LoneReceiver receiver(&peerBell);
  Worker worker([&] { receiver.run(ctx); });
  // The worker publishes what it waits for just before it sleeps; abort only then, so that it is
  // the sleeping wait that must notice.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGenerous);
  while (slot.read().what == kern::WaitFor::Nothing && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  CHECK(slot.read().what == kern::WaitFor::Data);
  abort.store(true);
  kern::ringBell(&bell);
  const std::string message = errorOf([&] { worker.join(); }, ErrorCode::Aborted);
  CHECK_THAT(message, Catch::Contains("rank 0") && Catch::Contains("aborted"));
}

TEST_CASE("host executor: a message of another size fails the receiver with both sizes and the sender named") {
  HostFifo fifo(2, 64 * 4);
  kern::Bell bell;
  std::vector<float> a(64, 2.0f), b(64, 0.0f);
  auto sender = makeLaunch(planOf(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())})),
                           opWork(a.data(), nullptr, 64, ncclFloat32, 4, plan::Coll::Broadcast, 2), 64, 0, 64,
                           {LaneConns{{connEnd(fifo.header(), 1, &bell)}, {}}});
  auto receiver = makeLaunch(planOf(lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())})),
                             opWork(nullptr, b.data(), 32, ncclFloat32, 4, plan::Coll::Broadcast, 2), 64, 0, 32,
                             {LaneConns{{}, {connEnd(fifo.header(), 0, &bell)}}});
  // The send fits the FIFO, so the sender finishes alone; then the receiver meets its message.
  kern::host::runWorker(sender->work(), sender->ops(), 0, contextOf(&bell, 0, kShort));
  const std::string message =
      errorOf([&] { kern::host::runWorker(receiver->work(), receiver->ops(), 0, contextOf(&bell, 1, kShort)); },
              ErrorCode::InvalidUsage);
  CHECK_THAT(message, Catch::Contains("rank 1 received 256 bytes from rank 0 (host-b pid 4242) where it expected 128"));
  CHECK(b == std::vector<float>(64, 0.0f));
}

TEST_CASE("host executor: direct messages are read in place, counted, and their sender waits for the reads") {
  constexpr uint64_t kCount = 200, kChunk = 64;  // 4 messages
  HostFifo fifo(8, kChunk * 4);
  kern::Bell bells[2];
  std::vector<float> a(kCount), got(kCount, 0.0f);
  for (uint64_t i = 0; i < kCount; i++) a[i] = float(i) * 0.5f;
  kern::OpWork sent = opWork(a.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  sent.direct = kern::kDirectIn;
  auto sender =
      makeLaunch(planOf(lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none(), plan::kDirect)})), sent, kChunk, 0,
                 kCount, {LaneConns{{connEnd(fifo.header(), 1, &bells[1], kern::kDirectShared)}, {}}});
  auto receiver = makeLaunch(planOf(lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())})),
                             opWork(nullptr, got.data(), kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2), kChunk, 0,
                             kCount, {LaneConns{{}, {connEnd(fifo.header(), 0, &bells[0], kern::kDirectShared)}}});
  SECTION("a receiver that never reads: the sender times out naming it") {
    kern::WaitSlot slot;
    ExecutionContext ctx = contextOf(&bells[0], 0, kShort);
    ctx.waitSlot = &slot;
    const std::string message =
        errorOf([&] { kern::host::runWorker(sender->work(), sender->ops(), 0, ctx); }, ErrorCode::Timeout);
    CHECK_THAT(message, Catch::Contains("rank 1 (host-b pid 4242) to read the buffer this rank sent it directly"));
    CHECK(slot.timedOut().what == kern::WaitFor::DirectRead);
    CHECK(fifo.header()->head == 4);  // every message was published by address
  }
  SECTION("a receiver that reads: both finish, and the receiver counts its reads") {
    std::atomic<uint64_t> reads{0};
    Worker s([&] { kern::host::runWorker(sender->work(), sender->ops(), 0, contextOf(&bells[0], 0, kGenerous)); });
    Worker r([&] {
      ExecutionContext ctx = contextOf(&bells[1], 1, kGenerous);
      ctx.directReads = &reads;
      kern::host::runWorker(receiver->work(), receiver->ops(), 0, ctx);
    });
    REQUIRE_NOTHROW(r.join());
    REQUIRE_NOTHROW(s.join());
    CHECK(got == a);
    CHECK(reads.load() == 4);
    CHECK(fifo.header()->tail == 4);
  }
}

TEST_CASE("host executor: a stalled wait asks whether the peer's call differs, and fails with the answer") {
  kern::Bell bell, peerBell;
  struct Asked {
    std::mutex mutex;
    int peer = -1;
    uint64_t signature = 0, count = 0;
  } asked;
  const uint64_t signature = kern::callSignature(3, uint32_t(plan::Coll::Broadcast), uint32_t(ncclFloat32), 0, 0);
  LoneReceiver receiver(&peerBell, signature);
  struct ProbeHooks : NamingHooks {
    Asked* asked = nullptr;
    std::string probeCall(int peer, uint64_t sig, uint64_t count) const override {
      std::lock_guard<std::mutex> lock(asked->mutex);
      asked->peer = peer;
      asked->signature = sig;
      asked->count = count;
      return "rank 1 called AllGather where rank 0 called Broadcast";
    }
  } hooks;
  hooks.asked = &asked;
  ExecutionContext ctx = contextOf(&bell, 0, kGenerous);
  ctx.hooks = &hooks;
  const std::string message = errorOf([&] { receiver.run(ctx); }, ErrorCode::InvalidUsage);
  CHECK(message == "rank 1 called AllGather where rank 0 called Broadcast");
  CHECK(asked.peer == 1);
  CHECK(asked.signature == signature);
  CHECK(asked.count == 16);
}

TEST_CASE("host executor: a worker that drives the network polls it while waiting and never sleeps holding it") {
  kern::Bell bell, peerBell;
  struct Network {
    std::vector<kern::WaitHooks::Drive> drives;
    int polls = 0;
    kern::FifoHeader* deliverTo = nullptr;  // null: nothing ever arrives
    bool sendsWaiting = true;
    kern::WaitSlot slot;
    // Whether the wait had already timed out when the worker stopped driving: it must stop before
    // it first sleeps, not when it gives up.
    bool stoppedAfterTimeout = false;
  } net;
  LoneReceiver receiver(&peerBell);
  ExecutionContext ctx = contextOf(&bell, 0, kShort);
  ctx.waitSlot = &net.slot;
  struct NetworkHooks : NamingHooks {
    Network* n = nullptr;
    bool drivesNetwork() const override { return true; }
    void driveNetwork(Drive change) const override {
      n->drives.push_back(change);
      if (change == Drive::Stop && n->slot.timedOut().what != kern::WaitFor::Nothing) n->stoppedAfterTimeout = true;
    }
    bool networkSendsWaiting() const override { return n->sendsWaiting; }
    // A poll is the proxy's pass: the third one receives the peer's message into the FIFO.
    bool pollNetwork() const override {
      if (++n->polls != 3 || n->deliverTo == nullptr) return false;
      std::vector<float> data(16);
      for (size_t i = 0; i < data.size(); i++) data[i] = float(i) + 0.5f;
      std::memcpy(kern::fifoSlot(n->deliverTo, 0), data.data(), 64);
      n->deliverTo->sizes[0] = 64;
      kern::fifoStoreRelease(&n->deliverTo->head, 1);
      return true;
    }
  } hooks;
  hooks.n = &net;
  ctx.hooks = &hooks;
  using Drive = kern::WaitHooks::Drive;
  SECTION("the message arrives through a poll: the worker finishes and releases the network") {
    net.deliverTo = receiver.fifo.header();
    REQUIRE_NOTHROW(receiver.run(ctx));
    for (size_t i = 0; i < 16; i++) CHECK(receiver.received[i] == float(i) + 0.5f);
    CHECK(net.drives == std::vector<Drive>{Drive::Start, Drive::Release});
    CHECK(net.polls >= 4);  // one more pass after the progress, and one for the sends waiting
  }
  SECTION("nothing arrives: the network is handed back before the first sleep, then the wait times out") {
    errorOf([&] { receiver.run(ctx); }, ErrorCode::Timeout);
    REQUIRE_FALSE(net.drives.empty());
    CHECK(net.drives.front() == Drive::Start);
    CHECK(net.drives.back() == Drive::Stop);
    CHECK_FALSE(net.stoppedAfterTimeout);
    for (size_t i = 1; i < net.drives.size(); i++) CHECK(net.drives[i] != net.drives[i - 1]);  // balanced
    CHECK(net.polls <= ctx.spin + ctx.yields);  // only busy polls, none once asleep
  }
}

TEST_CASE("host executor: checkPlanBounds refuses each kind of bad index, naming the algorithm, lane and step") {
  auto good = [] {
    plan::RankPlan p;
    p.algorithm = "handmade";
    p.lanes.push_back(lane(Layout::Split, {1}, {2}, {step(Op::Send, in(0), none())}));
    p.lanes.push_back(lane(Layout::Split, {1}, {2},
                           {step(Op::Send, in(0), none()), step(Op::RecvReduceCopySend, scratch(1), out(3), 0, 0, 0),
                            step(Op::Copy, in(2), out(2))},
                           2));
    return p;
  };
  REQUIRE_NOTHROW(kern::checkPlanBounds(good(), 0, 4));
  struct Case {
    const char* what;
    std::function<void(plan::RankPlan&)> spoil;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"receive connection", [](plan::RankPlan& p) { p.lanes[1].steps[1].recvConn = 1; },
       "lane 1, step 1: recv-reduce-copy-send uses receive connection 1 of 1"},
      {"send connection", [](plan::RankPlan& p) { p.lanes[1].steps[0].sendConn = 2; },
       "lane 1, step 0: send uses send connection 2 of 1"},
      {"scratch chunk", [](plan::RankPlan& p) { p.lanes[1].steps[1].src = scratch(2); },
       "lane 1, step 1: source chunk 2 is out of range"},
      {"split chunk", [](plan::RankPlan& p) { p.lanes[1].steps[2].dst = out(4); },
       "lane 1, step 2: destination chunk 4 is out of range"},
      {"split chunk of tileChunks",
       [](plan::RankPlan& p) {
         p.lanes[1].tileChunks = 2;
         p.lanes[1].steps[1].dst = out(1);
       },
       "lane 1, step 2: source chunk 2 is out of range"},
      {"block",
       [](plan::RankPlan& p) {
         p.lanes[0].layout = Layout::Blocks;
         p.lanes[0].steps[0].src = in(-2);
       },
       "lane 0, step 0: source chunk -2 is out of range"},
      {"no source", [](plan::RankPlan& p) { p.lanes[1].steps[2].src = none(); }, "lane 1, step 2: copy has no source"},
      {"no destination", [](plan::RankPlan& p) { p.lanes[1].steps[1].dst = none(); },
       "lane 1, step 1: recv-reduce-copy-send has no destination"},
      {"self", [](plan::RankPlan& p) { p.lanes[0].recvPeers = {0}; }, "lane 0: peer 0 is not another rank"},
      {"beyond", [](plan::RankPlan& p) { p.lanes[1].sendPeers = {4}; }, "lane 1: peer 4 is not another rank"},
      {"negative scratch", [](plan::RankPlan& p) { p.lanes[0].scratchChunks = -1; },
       "lane 0: negative tileChunks or scratchChunks"},
      {"kind None with peers", [](plan::RankPlan& p) { p.lanes[0].kind = plan::ConnKind::None; },
       "lane 0: a lane of kind None has peers"},
      {"join of two ops", [](plan::RankPlan& p) { p.lanes[1].steps[0].flags = plan::kJoin; },
       "lane 1, step 0: joins a send with a recv-reduce-copy-send (a joined run keeps one op)"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    plan::RankPlan p = good();
    c.spoil(p);
    const std::string message = errorOf([&] { kern::checkPlanBounds(p, 0, 4); }, ErrorCode::InvalidUsage);
    CHECK_THAT(message, Catch::StartsWith("algorithm \"handmade\", rank 0 of 4, ") && Catch::Contains(c.expected));
  }
}

TEST_CASE("host executor: idlePoll spins, then yields, then tells the wait to sleep") {
  ExecutionContext ctx;
  ctx.spin = 3;
  ctx.yields = 2;
  for (int idle = 0; idle < 5; idle++) CHECK(kern::idlePoll(idle, ctx));
  CHECK_FALSE(kern::idlePoll(5, ctx));
  CHECK_FALSE(kern::idlePoll(6, ctx));
}

TEST_CASE("host executor: the worker pool runs each job on its thread and rethrows a failure once") {
  kern::host::HostWorkerPool pool(3);
  CHECK(pool.size() == 3);
  std::atomic<int> ran{0};
  std::mutex mutex;
  std::vector<std::thread::id> ids(3);
  for (int i = 0; i < 3; i++)
    pool.start(i, [&, i] {
      std::lock_guard<std::mutex> lock(mutex);
      ids[size_t(i)] = std::this_thread::get_id();
      ran++;
    });
  pool.wait();
  CHECK(ran.load() == 3);
  CHECK(ids[0] != ids[1]);
  CHECK(ids[1] != ids[2]);
  CHECK(ids[0] != std::this_thread::get_id());

  pool.start(0, [&] { ran++; });
  pool.start(2, [] { throw Error(ErrorCode::Timeout, "worker 2 waited too long"); });
  CHECK_THROWS_WITH(pool.wait(), "worker 2 waited too long");
  CHECK(ran.load() == 4);  // the other job still ran to its end
  // The failure is reported once; the pool keeps working.
  pool.start(1, [&] { ran++; });
  REQUIRE_NOTHROW(pool.wait());
  CHECK(ran.load() == 5);
}
