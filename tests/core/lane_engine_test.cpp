// The lane engine (kernels/lane_engine.h) driven phase by phase on one thread, as an executor
// drives it: tiling of each layout, FIFO flow control, joined runs, the checks on what arrives,
// direct (by address) and LL messages, and the small pure helpers. Results are compared with
// references computed here in float64.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/tiling.h"
#include "kernels/exec_fault.h"
#include "kernels/lane_engine.h"
#include "tests/core/core_test_support.h"

namespace {

using namespace tutti_test::core;
namespace engine = tutti::kern::engine;
using kern::ExecFault;
using kern::Fault;
using plan::Layout;
using plan::Op;

// The engine's sync policy for one thread: plain atomics, and a count of the bells it would ring.
struct CountingSync {
  mutable int notified = 0;
  uint64_t loadAcquire(const uint64_t* p) const { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void storeRelease(uint64_t* p, uint64_t v) const { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  uint64_t loadLL(const uint64_t* p) const { return loadAcquire(p); }
  void storeLL(uint64_t* p, uint64_t v) const { storeRelease(p, v); }
  void loadLLLine(const uint64_t* p, uint64_t& a, uint64_t& b) const {
    a = loadAcquire(p);
    b = loadAcquire(p + 1);
  }
  void storeLLLine(uint64_t* p, uint64_t a, uint64_t b) const {
    storeRelease(p, a);
    storeRelease(p + 1, b);
  }
  void notify(const kern::ConnEnd&) const { notified++; }
};

// A mover for float32 sums only, written apart from kernels/ (each sum in float64, rounded once).
struct FloatSumMover {
  void copy(char* dst, const char* src, uint64_t bytes) const { std::memcpy(dst, src, bytes); }
  void move(char* dst, const char* src, uint64_t bytes) const { std::memmove(dst, src, bytes); }
  void copy2(char* dst, char* dst2, const char* src, uint64_t bytes) const {
    std::memcpy(dst, src, bytes);
    std::memcpy(dst2, src, bytes);
  }
  void reduce(char* dst, char* dst2, const char* a, const char* b, uint64_t n, unsigned) const {
    for (uint64_t i = 0; i < n; i++) {
      float x = 0, y = 0;
      if (a != nullptr) std::memcpy(&x, a + 4 * i, 4);
      std::memcpy(&y, b + 4 * i, 4);
      const float r = float(double(x) + double(y));
      std::memcpy(dst + 4 * i, &r, 4);
      if (dst2 != nullptr) std::memcpy(dst2 + 4 * i, &r, 4);
    }
  }
};

enum class Outcome { Ran, Blocked, Faulted };

// One step (or joined run) of the lane, through the four phases, if the FIFOs allow it.
Outcome runStep(const engine::LaneRef& l, const CountingSync& sync, ExecFault& fault) {
  engine::Run run;
  if (!engine::tryBegin(l, run, sync)) return Outcome::Blocked;
  FloatSumMover mover;
  for (uint32_t j = 0; j < run.parts; j++) {
    engine::Part part;
    if (!engine::partGeometry(l, run, j, part, fault)) return Outcome::Faulted;
    engine::moveData(mover, *l.op, part);
    engine::endPart(run, j, part);
  }
  engine::finishRun(l, run, sync);
  return Outcome::Ran;
}

engine::LaneRef prepared(HandLaunch& launch, uint32_t lane = 0) {
  const engine::LaneRef l = engine::laneRef(launch.work(), lane, launch.ops());
  engine::prepareLane(l);
  return l;
}

std::vector<float> ramp(size_t n, float from, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = from + step * float(i % 997);
  return v;
}

plan::RankPlan planOf(std::vector<plan::LaneSpec> lanes) {
  plan::RankPlan p;
  p.algorithm = "engine-test";
  p.lanes = std::move(lanes);
  return p;
}

}  // namespace

TEST_CASE("lane engine: the tiles of every layout cover the lane's range once, and a local lane copies it") {
  constexpr uint64_t kBegin = 5, kEnd = 1005, kChunk = 64;
  constexpr int kRanks = 3;
  struct Case {
    Layout layout;
    int tileChunks;
    uint64_t expectedTiles;
  };
  // Split: a tile is tileChunks chunks (0: nranks); its chunks shrink in the last tile so each
  // gets a share. Whole: a tile is one chunk.
  for (const Case c : {Case{Layout::Split, 0, 6}, Case{Layout::Split, 2, 8}, Case{Layout::Whole, 0, 16}}) {
    const int chunks = c.layout == Layout::Whole ? 1 : c.tileChunks > 0 ? c.tileChunks : kRanks;
    INFO("layout " << int(c.layout) << ", tileChunks " << c.tileChunks);
    std::vector<plan::Step> steps;
    for (int k = 0; k < chunks; k++) steps.push_back(step(Op::Copy, in(k), out(k)));
    plan::LaneSpec spec = lane(c.layout, {}, {}, steps);
    spec.tileChunks = c.tileChunks;
    const std::vector<float> input = ramp(kEnd + 7, 1, 0.5f);
    std::vector<float> output(input.size(), -1.0f);
    auto launch = makeLaunch(
        planOf({spec}), opWork(input.data(), output.data(), kEnd + 7, ncclFloat32, 4, plan::Coll::AllReduce, kRanks),
        kChunk, kBegin, kEnd, {LaneConns{}});
    const engine::LaneRef l = prepared(*launch);
    CHECK(l.state->ntiles == c.expectedTiles);
    CHECK(l.state->tileChunks == uint32_t(c.layout == Layout::Split ? chunks : 1));

    // Every element of [begin, end) in exactly one chunk of one tile, none outside it.
    std::vector<int> covered(input.size(), 0);
    for (uint64_t t = 0; t < l.state->ntiles; t++) {
      l.state->tile = t;
      engine::startTile(l);
      for (int k = 0; k < chunks; k++) {
        const engine::Span s = engine::resolve(l, in(k));
        const uint64_t first = uint64_t(s.ptr - reinterpret_cast<const char*>(input.data())) / 4;
        for (uint64_t e = first; e < first + s.elems; e++) covered.at(e)++;
        // The last Split tile shares what is left among all its chunks, not the first ones only.
        if (c.layout == Layout::Split && t + 1 == l.state->ntiles) {
          const uint64_t rest = kEnd - (kBegin + t * uint64_t(chunks) * kChunk);
          const uint64_t share = (rest + uint64_t(chunks) - 1) / uint64_t(chunks);
          INFO("chunk " << k << " of the last tile");
          CHECK(s.elems > 0);
          CHECK(s.elems <= share);
        }
      }
    }
    for (size_t e = 0; e < covered.size(); e++) {
      INFO("element " << e);
      REQUIRE(covered[e] == (e >= kBegin && e < kEnd ? 1 : 0));
    }

    // Run: the steps advance tile by tile and the lane ends after the last.
    engine::prepareLane(l);
    CountingSync sync;
    ExecFault fault{};
    int runs = 0;
    while (!engine::laneDone(l)) {
      REQUIRE(runStep(l, sync, fault) == Outcome::Ran);
      runs++;
    }
    CHECK(runs == int(c.expectedTiles) * chunks);
    CHECK(sync.notified == 0);  // a local lane moves no FIFO
    for (size_t e = 0; e < output.size(); e++) {
      INFO("element " << e);
      REQUIRE(output[e] == (e >= kBegin && e < kEnd ? input[e] : -1.0f));
    }
  }
}

TEST_CASE("lane engine: Blocks puts chunk b of a tile in block b, and -1 in the single block") {
  constexpr uint64_t kCount = 50, kChunk = 16;
  constexpr int kRanks = 3;
  std::vector<float> input(kCount), output(kCount * kRanks, 0.0f);
  auto launch = makeLaunch(planOf({lane(Layout::Blocks, {}, {}, {step(Op::Copy, in(-1), out(2))})}),
                           opWork(input.data(), output.data(), kCount, ncclFloat32, 4, plan::Coll::AllGather, kRanks),
                           kChunk, 0, kCount, {LaneConns{}});
  const engine::LaneRef l = prepared(*launch);
  CHECK(l.state->ntiles == 4);
  l.state->tile = 3;  // the last tile: elements 48 and 49
  const engine::Span src = engine::resolve(l, in(-1)), dst = engine::resolve(l, out(2));
  CHECK(src.ptr == reinterpret_cast<char*>(input.data() + 48));
  CHECK(src.elems == 2);
  CHECK(dst.ptr == reinterpret_cast<char*>(output.data() + 2 * kCount + 48));
  CHECK(dst.elems == 2);
  CHECK(engine::resolve(l, out(1)).ptr == reinterpret_cast<char*>(output.data() + kCount + 48));
}

TEST_CASE("lane engine: a receive waits for a message, a send for a free slot, and the sums arrive in order") {
  constexpr uint64_t kCount = 300, kChunk = 64;  // 5 tiles, the last of 44 elements
  HostFifo fifo(2, kChunk * 4);
  const std::vector<float> a = ramp(kCount, -3, 0.25f), b = ramp(kCount, 100, -0.5f);
  std::vector<float> sum(kCount, 0.0f);
  // Rank 0 sends its input; rank 1 adds its own and writes the result.
  auto sender = makeLaunch(planOf({lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())})}),
                           opWork(a.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::Reduce, 2), kChunk, 0, kCount,
                           {LaneConns{{connEnd(fifo.header(), 1)}, {}}});
  auto receiver = makeLaunch(planOf({lane(Layout::Whole, {}, {0}, {step(Op::RecvReduceCopy, in(), out())})}),
                             opWork(b.data(), sum.data(), kCount, ncclFloat32, 4, plan::Coll::Reduce, 2), kChunk, 0,
                             kCount, {LaneConns{{}, {connEnd(fifo.header(), 0)}}});
  const engine::LaneRef s = prepared(*sender), r = prepared(*receiver);
  CountingSync sync;
  ExecFault fault{};

  CHECK(runStep(r, sync, fault) == Outcome::Blocked);  // nothing arrived yet
  engine::blockedOn(r, fault, sync);
  CHECK(fault.fault == uint32_t(Fault::Timeout));
  CHECK(fault.waitingForData == 1);
  CHECK(fault.peer == 0);
  CHECK(runStep(s, sync, fault) == Outcome::Ran);
  CHECK(runStep(s, sync, fault) == Outcome::Ran);
  CHECK(runStep(s, sync, fault) == Outcome::Blocked);  // both slots full
  engine::blockedOn(s, fault, sync);
  CHECK(fault.waitingForData == 0);
  CHECK(fault.peer == 1);
  CHECK(fifo.header()->head == 2);
  CHECK(fifo.header()->sizes[0] == kChunk * 4);

  while (!engine::laneDone(s) || !engine::laneDone(r)) {
    const Outcome rs = engine::laneDone(r) ? Outcome::Blocked : runStep(r, sync, fault);
    const Outcome ss = engine::laneDone(s) ? Outcome::Blocked : runStep(s, sync, fault);
    REQUIRE(rs != Outcome::Faulted);
    REQUIRE(ss != Outcome::Faulted);
    REQUIRE((rs == Outcome::Ran || ss == Outcome::Ran));  // one of them can always move
  }
  CHECK(fifo.header()->head == 5);
  CHECK(fifo.header()->tail == 5);
  CHECK(fifo.header()->sizes[4 % 2] == 44 * 4);
  CHECK(sync.notified == 10);  // each message: the sender's publish and the receiver's free
  for (size_t i = 0; i < kCount; i++) {
    INFO("element " << i);
    REQUIRE(double(sum[i]) == double(a[i]) + double(b[i]));  // exact: quarters of small integers
  }
}

TEST_CASE("lane engine: a step that receives and sends waits for data first, then for room, naming each peer") {
  constexpr uint64_t kCount = 16;
  HostFifo fromPrev(1, kCount * 4), toNext(1, kCount * 4);
  std::vector<float> a = ramp(kCount, 4, 0.5f), got(kCount, 0.0f);
  // Rank 1 of a chain 0 -> 1 -> 2 forwards what it receives and keeps a copy.
  auto forwarder = makeLaunch(planOf({lane(Layout::Whole, {2}, {0}, {step(Op::RecvSend, none(), out())})}),
                              opWork(nullptr, got.data(), kCount, ncclFloat32, 4, plan::Coll::Broadcast, 3), 64, 0,
                              kCount, {LaneConns{{connEnd(toNext.header(), 2)}, {connEnd(fromPrev.header(), 0)}}});
  const engine::LaneRef f = prepared(*forwarder);
  CountingSync sync;
  ExecFault fault{};
  toNext.header()->head = 1;  // rank 2 has not read the last message yet: no room either
  CHECK(runStep(f, sync, fault) == Outcome::Blocked);
  engine::blockedOn(f, fault, sync);
  CHECK(fault.waitingForData == 1);
  CHECK(fault.peer == 0);
  // The data arrives; the step still cannot run, now for want of room at rank 2.
  std::memcpy(kern::fifoSlot(fromPrev.header(), 0), a.data(), kCount * 4);
  fromPrev.header()->sizes[0] = kCount * 4;
  fromPrev.header()->head = 1;
  CHECK(runStep(f, sync, fault) == Outcome::Blocked);
  engine::blockedOn(f, fault, sync);
  CHECK(fault.waitingForData == 0);
  CHECK(fault.peer == 2);
  toNext.header()->tail = 1;  // rank 2 read it
  REQUIRE(runStep(f, sync, fault) == Outcome::Ran);
  CHECK(got == a);
  CHECK(std::memcmp(kern::fifoSlot(toNext.header(), 1), a.data(), kCount * 4) == 0);
}

TEST_CASE(
    "lane engine: a joined run travels as one message with its table, and a receiver that joins otherwise refuses it") {
  constexpr uint64_t kCount = 40, kChunk = 8;  // per block; 5 tiles
  HostFifo fifo(8, plan::joinTableBytes(2) + 2 * kChunk * 4);
  std::vector<float> input = ramp(2 * kCount, 7, 1.25f), output(2 * kCount, 0.0f);
  auto sender = makeLaunch(planOf({lane(Layout::Blocks, {1}, {},
                                        {step(Op::Send, in(0), none(), plan::kJoin), step(Op::Send, in(1), none())})}),
                           opWork(input.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::AlltoAll, 2), kChunk, 0,
                           kCount, {LaneConns{{connEnd(fifo.header(), 1)}, {}}});
  const engine::LaneRef s = prepared(*sender);
  CountingSync sync;
  ExecFault fault{};
  REQUIRE(runStep(s, sync, fault) == Outcome::Ran);
  CHECK(s.state->tile == 1);  // both steps of the tile in one run
  CHECK(fifo.header()->head == 1);
  char* slot = kern::fifoSlot(fifo.header(), 0);
  CHECK(kern::fifoJoinParts(slot) == 2);
  CHECK(kern::fifoJoinSizes(slot)[0] == kChunk * 4);
  CHECK(kern::fifoJoinSizes(slot)[1] == kChunk * 4);
  CHECK(fifo.header()->sizes[0] == plan::joinTableBytes(2) + 2 * kChunk * 4);
  CHECK(std::memcmp(slot + plan::joinTableBytes(2) + kChunk * 4, input.data() + kCount, kChunk * 4) == 0);
  while (!engine::laneDone(s)) REQUIRE(runStep(s, sync, fault) == Outcome::Ran);
  CHECK(fifo.header()->head == 5);

  SECTION("a receiver joining alike takes each part where its plan puts it") {
    auto receiver =
        makeLaunch(planOf({lane(Layout::Blocks, {}, {0},
                                {step(Op::Recv, none(), out(0), plan::kJoin), step(Op::Recv, none(), out(1))})}),
                   opWork(nullptr, output.data(), kCount, ncclFloat32, 4, plan::Coll::AlltoAll, 2), kChunk, 0, kCount,
                   {LaneConns{{}, {connEnd(fifo.header(), 0)}}});
    const engine::LaneRef r = prepared(*receiver);
    while (!engine::laneDone(r)) REQUIRE(runStep(r, sync, fault) == Outcome::Ran);
    CHECK(fifo.header()->tail == 5);
    CHECK(output == input);
  }
  SECTION("a receiver joining three parts, or none, fails naming the sender") {
    const bool three = GENERATE(true, false);
    std::vector<plan::Step> steps;
    if (three)
      steps = {step(Op::Recv, none(), out(0), plan::kJoin), step(Op::Recv, none(), out(1), plan::kJoin),
               step(Op::Recv, none(), out(0))};
    else
      steps = {step(Op::Recv, none(), out(0)), step(Op::Recv, none(), out(1))};
    auto receiver = makeLaunch(planOf({lane(Layout::Blocks, {}, {0}, steps)}),
                               opWork(nullptr, output.data(), kCount, ncclFloat32, 4, plan::Coll::AlltoAll, 2), kChunk,
                               0, kCount, {LaneConns{{}, {connEnd(fifo.header(), 0)}}});
    const engine::LaneRef r = prepared(*receiver);
    REQUIRE(runStep(r, sync, fault) == Outcome::Faulted);
    CHECK(fault.peer == 0);
    if (three) {
      CHECK(fault.fault == uint32_t(Fault::PartsMismatch));
      CHECK(fault.got == 2);
      CHECK(fault.expected == 3);
    } else {
      // A lone receive takes the whole joined message as its chunk: too many bytes.
      CHECK(fault.fault == uint32_t(Fault::SizeMismatch));
      CHECK(fault.got == plan::joinTableBytes(2) + 2 * kChunk * 4);
      CHECK(fault.expected == kChunk * 4);
    }
    CHECK(fifo.header()->tail == 0);  // a refused message is not consumed
    const std::string words = kern::describeFault(
        fault, 1, [](int peer) { return "rank " + std::to_string(peer) + " (peer-host)"; }, 1);
    CHECK_THAT(words, Catch::Contains("rank 0 (peer-host)"));
  }
}

TEST_CASE("lane engine: a message of another size or of another call is refused, naming the peer") {
  HostFifo fifo(4, 64 * 4);
  std::vector<float> a = ramp(64, 1, 1), out64(64, 0.0f);
  const bool otherCall = GENERATE(false, true);
  kern::OpWork sent = opWork(a.data(), nullptr, 64, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  kern::OpWork received = opWork(nullptr, out64.data(), otherCall ? 64 : 32, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  if (otherCall) {
    sent.signature = kern::callSignature(4, uint32_t(plan::Coll::Broadcast), uint32_t(ncclFloat32), 0, 0);
    received.signature = kern::callSignature(5, uint32_t(plan::Coll::Broadcast), uint32_t(ncclFloat32), 0, 0);
  }
  auto sender = makeLaunch(planOf({lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())})}), sent, 64, 0,
                           sent.count, {LaneConns{{connEnd(fifo.header(), 1)}, {}}});
  auto receiver = makeLaunch(planOf({lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())})}), received, 64, 0,
                             received.count, {LaneConns{{}, {connEnd(fifo.header(), 0)}}});
  const engine::LaneRef s = prepared(*sender), r = prepared(*receiver);
  CountingSync sync;
  ExecFault fault{};
  REQUIRE(runStep(s, sync, fault) == Outcome::Ran);
  REQUIRE(runStep(r, sync, fault) == Outcome::Faulted);
  CHECK(fault.peer == 0);
  CHECK(fault.opSeq == received.seq);
  if (otherCall) {
    CHECK(fault.fault == uint32_t(Fault::CallMismatch));
    CHECK(fault.got == sent.signature);
    CHECK(fault.expected == received.signature);
  } else {
    CHECK(fault.fault == uint32_t(Fault::SizeMismatch));
    CHECK(fault.got == 64 * 4);
    CHECK(fault.expected == 32 * 4);
  }
  CHECK(out64 == std::vector<float>(64, 0.0f));  // nothing was written
}

TEST_CASE(
    "lane engine: a direct send carries its span's address, and its worker is undrained until the receiver read it") {
  constexpr uint64_t kCount = 100, kChunk = 64;
  HostFifo fifo(4, kChunk * 4);
  const std::vector<float> a = ramp(kCount, 2, 0.5f);
  std::vector<float> got(kCount, 0.0f);
  const bool registered = GENERATE(true, false);
  kern::OpWork op = opWork(a.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  op.direct = registered ? kern::kDirectIn : 0;  // only a registered input may be read in place
  auto sender =
      makeLaunch(planOf({lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none(), plan::kDirect)})}), op, kChunk, 0,
                 kCount, {LaneConns{{connEnd(fifo.header(), 1, nullptr, kern::kDirectShared)}, {}}});
  auto receiver = makeLaunch(planOf({lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())})}),
                             opWork(nullptr, got.data(), kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2), kChunk, 0,
                             kCount, {LaneConns{{}, {connEnd(fifo.header(), 0, nullptr, kern::kDirectShared)}}});
  const engine::LaneRef s = prepared(*sender), r = prepared(*receiver);
  CountingSync sync;
  ExecFault fault{};
  const kern::WorkerWork worker = sender->work().workers()[0];
  CHECK(engine::firstUndrained(sender->work(), sender->ops(), worker, sync) == nullptr);
  REQUIRE(runStep(s, sync, fault) == Outcome::Ran);
  REQUIRE(runStep(s, sync, fault) == Outcome::Ran);
  CHECK(engine::laneDone(s));
  const char* slot0 = kern::fifoSlot(fifo.header(), 0);
  if (registered) {
    CHECK(fifo.header()->addrs[0] == reinterpret_cast<uintptr_t>(a.data()));
    CHECK(fifo.header()->addrs[1] == reinterpret_cast<uintptr_t>(a.data() + kChunk));
    CHECK(std::all_of(slot0, slot0 + kChunk * 4, [](char c) { return c == 0; }));  // no bytes copied
    const kern::ConnEnd* undrained = engine::firstUndrained(sender->work(), sender->ops(), worker, sync);
    REQUIRE(undrained != nullptr);
    CHECK(undrained->peer == 1);
    engine::undrainedFault(sender->work(), sender->ops(), worker, *undrained, fault);
    CHECK(fault.peer == 1);
    CHECK(fault.waitingForData == 2);
  } else {
    CHECK(fifo.header()->addrs[0] == 0);
    CHECK(std::memcmp(slot0, a.data(), kChunk * 4) == 0);
    CHECK(engine::firstUndrained(sender->work(), sender->ops(), worker, sync) == nullptr);  // nothing lent
  }
  CHECK(fifo.header()->sizes[1] == (kCount - kChunk) * 4);
  while (!engine::laneDone(r)) REQUIRE(runStep(r, sync, fault) == Outcome::Ran);
  CHECK(got == a);
  CHECK(engine::firstUndrained(sender->work(), sender->ops(), worker, sync) == nullptr);
}

TEST_CASE("lane engine: an LL message packs into flagged lines and unpacks to the same bytes and call") {
  constexpr uint64_t kCount = 11;  // 44 bytes: 5 whole lines and a lone last half
  HostFifo fifo(1, 4096, 64);      // one slot: the next message reuses its lines
  const std::vector<float> a = ramp(kCount, -1, 0.75f);
  std::vector<float> got(kCount, 0.0f);
  kern::OpWork sent = opWork(a.data(), nullptr, kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  kern::OpWork received = opWork(nullptr, got.data(), kCount, ncclFloat32, 4, plan::Coll::Broadcast, 2);
  sent.signature = received.signature =
      kern::callSignature(9, uint32_t(plan::Coll::Broadcast), uint32_t(ncclFloat32), 0, 0);
  kern::ConnEnd sendEnd = connEnd(fifo.header(), 1), recvEnd = connEnd(fifo.header(), 0);
  sendEnd.ll = recvEnd.ll = 1;
  auto sender = makeLaunch(planOf({lane(Layout::Whole, {1}, {}, {step(Op::Send, in(), none())})}), sent, 64, 0, kCount,
                           {LaneConns{{sendEnd}, {}}});
  auto receiver = makeLaunch(planOf({lane(Layout::Whole, {}, {0}, {step(Op::Recv, none(), out())})}), received, 64, 0,
                             kCount, {LaneConns{{}, {recvEnd}}});
  const engine::LaneRef s = prepared(*sender), r = prepared(*receiver);
  CountingSync sync;
  FloatSumMover mover;
  ExecFault fault{};
  engine::Run run;
  engine::Part part;
  REQUIRE_FALSE(engine::tryBegin(r, run, sync));  // line 0's flag not there yet

  // The sender stages the message apart from the FIFO (as a device's block does on chip), then
  // packs it into the lines.
  std::vector<char> stageOut(256, 0), stageIn(256, 0);
  REQUIRE(engine::tryBegin(s, run, sync));
  REQUIRE(run.sll);
  run.sslot = stageOut.data();
  REQUIRE(engine::partGeometry(s, run, 0, part, fault));
  engine::moveData(mover, *s.op, part);
  engine::endPart(run, 0, part);
  engine::llPack(run, 0, 1, sync);
  engine::finishRun(s, run, sync);
  const uint64_t* line0 = kern::fifoLLSlot(fifo.header(), 0);
  CHECK(line0[0] == kern::llHalf(kCount * 4, kern::llFlag(0)));

  REQUIRE(engine::tryBegin(r, run, sync));
  REQUIRE(run.rll);
  CHECK(run.got == kCount * 4);
  CHECK(run.theirSig == sent.signature);
  CHECK(run.theirCount == kCount);
  run.rslot = stageIn.data();
  engine::llUnpack(run, 0, 1, sync);
  REQUIRE(engine::partGeometry(r, run, 0, part, fault));
  engine::moveData(mover, *r.op, part);
  engine::endPart(run, 0, part);
  engine::finishRun(r, run, sync);
  CHECK(got == a);
  CHECK(fifo.header()->tail == 1);

  // The next message in that slot (sequence 1) has another flag: the old lines do not pass for it.
  REQUIRE_FALSE(engine::tryBegin(r, run, sync));
}

TEST_CASE("lane engine: mappedAddress translates only a span wholly inside a range its peer maps") {
  std::vector<char> storage(kern::mappedBufferTableBytes(2), 0);
  auto* table = reinterpret_cast<kern::MappedBufferTable*>(storage.data());
  table->count = 2;
  table->entries[0] = kern::MappedBuffer{1000, 2000, 5000, 3, 0};
  table->entries[1] = kern::MappedBuffer{1000, 2000, -500, 4, 0};
  CHECK(engine::mappedAddress(table, 3, 1000, 1000) == 6000);
  CHECK(engine::mappedAddress(table, 3, 1500, 100) == 6500);
  CHECK(engine::mappedAddress(table, 4, 1500, 100) == 1000);
  CHECK(engine::mappedAddress(table, 3, 1999, 2) == 0);  // runs past the range
  CHECK(engine::mappedAddress(table, 3, 999, 1) == 0);
  CHECK(engine::mappedAddress(table, 5, 1500, 1) == 0);  // another peer maps nothing
  CHECK(engine::mappedAddress(nullptr, 3, 1500, 1) == 0);
}

TEST_CASE("lane engine: signatureCount, reduceFlagsOf and a PreMulSum scalar read from memory") {
  kern::OpWork op = opWork(nullptr, nullptr, 10, ncclFloat64, 8, plan::Coll::Send, 2);
  CHECK(engine::signatureCount(op) == 80);  // bytes: a send and a receive may differ in type
  op.coll = uint8_t(plan::Coll::AllReduce);
  CHECK(engine::signatureCount(op) == 10);
  CHECK(engine::reduceFlagsOf(step(Op::Copy, in(), out(), plan::kPre | plan::kPost)) == (kern::kPreOnB | kern::kPost));
  CHECK(engine::reduceFlagsOf(step(Op::Copy, in(), out(), plan::kJoin | plan::kDirect)) == 0);

  op.redop.kind = kern::RedKind::PreMulSum;
  op.redop.floatScalar = 9;
  CHECK(engine::resolvedRedOp(op).floatScalar == 9);  // no scalar in memory: the op's own
  const double d = -2.375;
  op.scalar = &d;
  CHECK(engine::resolvedRedOp(op).floatScalar == d);
  const float f = 0.3f;
  op.dtype = uint8_t(ncclFloat32);
  op.eltSize = 4;
  op.scalar = &f;
  CHECK(engine::resolvedRedOp(op).floatScalar == double(f));
  const int32_t i = -7;
  op.dtype = uint8_t(ncclInt32);
  op.scalar = &i;
  CHECK(engine::resolvedRedOp(op).intScalar == uint32_t(i));  // its bits, zero-extended
  op.redop.kind = kern::RedKind::Sum;
  CHECK(engine::resolvedRedOp(op).intScalar == 1);  // read only for PreMulSum
}
