// WorkBuilder (kernels/work_builder.h): the launch arena's layout, indices and scratch, read back
// through LaunchWork's accessors as an executor reads them.
#include <catch2/catch.hpp>

#include <set>
#include <utility>

#include "tests/core/core_test_support.h"

namespace {

using namespace tutti_test::core;
using plan::Layout;
using plan::Op;

// A plan of three lanes with 2, 0 and 3 scratch chunks, and peer lists of different lengths.
plan::RankPlan threeLanes() {
  plan::RankPlan p;
  p.algorithm = "builder-test";
  p.lanes.push_back(lane(Layout::Whole, {1}, {2}, {step(Op::RecvReduceSend, scratch(1), none())}, 2));
  p.lanes.push_back(lane(Layout::Whole, {1, 2}, {}, {step(Op::Send, in(), none())}));
  p.lanes.push_back(lane(Layout::Whole, {}, {1, 2, 3}, {step(Op::Recv, none(), scratch(2))}, 3));
  return p;
}

kern::ConnEnd tagged(int peer) { return connEnd(nullptr, peer); }

}  // namespace

TEST_CASE("work builder: workers, queues, lanes, ops and connections land where the arena's header says") {
  const plan::RankPlan p = threeLanes();
  const std::vector<uint64_t> flat = plan::compilePlan(p);
  float a[4] = {}, b[4] = {};
  kern::WorkBuilder builder;
  const uint32_t op0 = builder.addOp(opWork(a, b, 4, ncclFloat32, 4, plan::Coll::AllReduce, 4, 7));
  const uint32_t op1 = builder.addOp(opWork(b, a, 2, ncclFloat64, 8, plan::Coll::Broadcast, 4, 8));
  CHECK(op0 == 0);
  CHECK(op1 == 1);
  auto laneWork = [&](uint32_t laneIndex, uint32_t op, int channel) {
    kern::LaneWork lw{};
    lw.plan = &plan::flatPlanOf(flat);
    lw.begin = 10 * laneIndex;
    lw.end = 10 * laneIndex + 5;
    lw.chunkElems = 16 + laneIndex;
    lw.lane = laneIndex;
    lw.op = op;
    lw.channel = channel;
    return lw;
  };
  // Worker 0: two queues (lanes 0 then 1 in the first, lane 2 in the second); worker 1: one queue.
  builder.beginWorker();
  builder.beginQueue();
  builder.addLane(laneWork(0, op0, 0), {tagged(101)}, {tagged(102)});
  builder.addLane(laneWork(1, op0, 0), {tagged(111), tagged(112)}, {});
  builder.beginQueue();
  builder.addLane(laneWork(2, op1, 1), {}, {tagged(121), tagged(122), tagged(123)});
  builder.beginWorker();
  builder.beginQueue();
  builder.addLane(laneWork(0, op1, 2), {tagged(201)}, {tagged(202)});
  CHECK(builder.workers() == 2);
  CHECK(builder.lanes() == 4);

  std::vector<uint64_t> arena = builder.build();
  kern::LaunchWork& w = kern::launchWorkOf(arena);
  CHECK(w.magic == kern::kLaunchWorkMagic);
  CHECK(w.bytes == arena.size() * 8);
  CHECK(w.nworkers == 2);
  CHECK(w.nqueues == 3);
  CHECK(w.nlanes == 4);
  CHECK(w.nops == 2);
  CHECK(w.nconns == 9);
  CHECK(w.nextents == 2 + 0 + 3 + 2);
  CHECK(w.scratch == nullptr);

  // Every array 8-byte aligned, inside the arena, apart from the header and from each other; the
  // state after every read-only array.
  struct Extent {
    uint32_t offset;
    size_t bytes;
  };
  const std::vector<Extent> arrays = {
      {w.workersOffset, 2 * sizeof(kern::WorkerWork)},     {w.queuesOffset, 3 * sizeof(kern::QueueWork)},
      {w.lanesOffset, 4 * sizeof(kern::LaneWork)},         {w.opsOffset, 2 * sizeof(kern::OpWork)},
      {w.connsOffset, 9 * sizeof(kern::ConnEnd)},          {w.laneStatesOffset, 4 * sizeof(kern::LaneState)},
      {w.queueStatesOffset, 3 * sizeof(kern::QueueState)}, {w.extentsOffset, 7 * sizeof(uint64_t)}};
  for (size_t i = 0; i < arrays.size(); i++) {
    INFO("array " << i);
    CHECK(arrays[i].offset % 8 == 0);
    CHECK(arrays[i].offset >= sizeof(kern::LaunchWork));
    CHECK(arrays[i].offset + arrays[i].bytes <= w.bytes);
    for (size_t j = 0; j < i; j++)
      CHECK((arrays[j].offset + arrays[j].bytes <= arrays[i].offset ||
             arrays[i].offset + arrays[i].bytes <= arrays[j].offset));
  }
  CHECK(w.stateOffset >= w.connsOffset + 9 * sizeof(kern::ConnEnd));
  CHECK(w.laneStatesOffset >= w.stateOffset);
  CHECK(w.queueStatesOffset >= w.stateOffset);
  CHECK(w.extentsOffset >= w.stateOffset);

  CHECK(w.workers()[0].firstQueue == 0);
  CHECK(w.workers()[0].nqueues == 2);
  CHECK(w.workers()[1].firstQueue == 2);
  CHECK(w.workers()[1].nqueues == 1);
  CHECK(w.queues()[0].firstLane == 0);
  CHECK(w.queues()[0].nlanes == 2);
  CHECK(w.queues()[1].firstLane == 2);
  CHECK(w.queues()[1].nlanes == 1);
  CHECK(w.queues()[2].firstLane == 3);
  CHECK(w.queues()[2].nlanes == 1);

  CHECK(w.ops()[0].seq == 7);
  CHECK(w.ops()[0].in == a);
  CHECK(w.ops()[1].seq == 8);
  CHECK(w.ops()[1].eltSize == 8);

  // Each lane's connections, in its peer order, by its sends / recvs index; its scratch extents
  // in order of the lanes, one per scratch chunk.
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> peersOf = {
      {{101}, {102}}, {{111, 112}, {}}, {{}, {121, 122, 123}}, {{201}, {202}}};
  const uint32_t extentsOf[] = {0, 2, 2, 5};
  for (uint32_t i = 0; i < 4; i++) {
    INFO("lane " << i);
    const kern::LaneWork& lw = w.lanes()[i];
    for (size_t c = 0; c < peersOf[i].first.size(); c++) CHECK(w.conns()[lw.sends + c].peer == peersOf[i].first[c]);
    for (size_t c = 0; c < peersOf[i].second.size(); c++) CHECK(w.conns()[lw.recvs + c].peer == peersOf[i].second[c]);
    CHECK(lw.extents == extentsOf[i]);
    CHECK(lw.chunkElems == 16 + (i == 3 ? 0 : i));
  }
  CHECK(w.lanes()[2].channel == 1);
  CHECK(w.lanes()[3].op == op1);

  // The state starts zeroed: a fresh arena needs no reset before its first run.
  const char* base = reinterpret_cast<const char*>(arena.data());
  for (size_t at = w.stateOffset; at < w.bytes; at++) REQUIRE(base[at] == 0);
}

TEST_CASE("work builder: lanes of one queue share its scratch, queues get parts of their own, 64-byte aligned") {
  const plan::RankPlan p = threeLanes();
  const std::vector<uint64_t> flat = plan::compilePlan(p);
  kern::WorkBuilder builder;
  const uint32_t f32 = builder.addOp(opWork(nullptr, nullptr, 0, ncclFloat32, 4, plan::Coll::AllReduce, 4));
  const uint32_t f64 = builder.addOp(opWork(nullptr, nullptr, 0, ncclFloat64, 8, plan::Coll::AllReduce, 4));
  auto laneWork = [&](uint32_t laneIndex, uint32_t op, uint64_t chunkElems) {
    kern::LaneWork lw{};
    lw.plan = &plan::flatPlanOf(flat);
    lw.chunkElems = chunkElems;
    lw.lane = laneIndex;
    lw.op = op;
    return lw;
  };
  builder.beginWorker();
  builder.beginQueue();
  builder.addLane(laneWork(0, f32, 100), {tagged(1)}, {tagged(2)});              // 2 chunks x 100 x 4 = 800 bytes
  builder.addLane(laneWork(2, f64, 10), {}, {tagged(1), tagged(2), tagged(3)});  // 3 x 10 x 8 = 240
  builder.beginQueue();
  builder.addLane(laneWork(1, f32, 1000), {tagged(1), tagged(2)}, {});  // no scratch
  builder.beginWorker();
  builder.beginQueue();
  builder.addLane(laneWork(2, f32, 5), {}, {tagged(1), tagged(2), tagged(3)});  // 3 x 5 x 4 = 60
  const size_t total = builder.layOutScratch();
  // The first queue needs its largest lane (800 rounds to 832), the second nothing, the third 64.
  CHECK(total == 832 + 0 + 64);
  std::vector<uint64_t> arena = builder.build();
  kern::LaunchWork& w = kern::launchWorkOf(arena);
  CHECK(w.lanes()[0].scratch == 0);
  CHECK(w.lanes()[1].scratch == 0);  // runs after lane 0 in its queue: the same bytes
  CHECK(w.lanes()[2].scratch == 832);
  CHECK(w.lanes()[3].scratch == 832);  // the second queue used none
  for (uint32_t i = 0; i < 4; i++) CHECK(w.lanes()[i].scratch % 64 == 0);
}

TEST_CASE("work builder: an empty launch is a header alone") {
  kern::WorkBuilder builder;
  CHECK(builder.layOutScratch() == 0);
  std::vector<uint64_t> arena = builder.build();
  const kern::LaunchWork& w = kern::launchWorkOf(arena);
  CHECK(w.magic == kern::kLaunchWorkMagic);
  CHECK(w.nworkers == 0);
  CHECK(w.nlanes == 0);
  CHECK(w.nconns == 0);
  CHECK(w.bytes == arena.size() * 8);
  CHECK(w.bytes == sizeof(kern::LaunchWork));
}
