// Hand-made launches for the core's unit tests: FIFOs in plain host memory, a rank's plan written
// step by step and compiled, and a launch arena of it built with WorkBuilder, so that a test drives
// the lane engine or the host executor directly, without a communicator, transports or a selector.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "algorithms/flat_plan.h"
#include "algorithms/lane.h"
#include "kernels/fifo.h"
#include "kernels/work.h"
#include "kernels/work_builder.h"
#include "nccl.h"

namespace tutti_test::core {

namespace kern = tutti::kern;
namespace plan = tutti::plan;

// One direction of a connection: the FIFO its receiver owns, in host memory (zeroed first, so
// that stale slot words cannot pass for a message).
class HostFifo {
 public:
  HostFifo(uint32_t nsteps, size_t slotBytes, size_t llDataBytes = 0) {
    const size_t bytes = kern::fifoBytes(nsteps, slotBytes, llDataBytes);
    const size_t rounded = (bytes + kern::kFifoSlotAlign - 1) / kern::kFifoSlotAlign * kern::kFifoSlotAlign;
    memory_.reset(static_cast<char*>(std::aligned_alloc(kern::kFifoSlotAlign, rounded)));
    std::memset(memory_.get(), 0, rounded);
    kern::fifoInit(header(), nsteps, slotBytes, llDataBytes);
  }
  kern::FifoHeader* header() { return reinterpret_cast<kern::FifoHeader*>(memory_.get()); }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> memory_;
};

inline plan::BufRef in(int chunk = -1) { return {plan::Buf::In, chunk}; }
inline plan::BufRef out(int chunk = -1) { return {plan::Buf::Out, chunk}; }
inline plan::BufRef scratch(int chunk) { return {plan::Buf::Scratch, chunk}; }
inline plan::BufRef none() { return {}; }

inline plan::Step step(plan::Op op, plan::BufRef src, plan::BufRef dst, uint8_t flags = 0, uint8_t sendConn = 0,
                       uint8_t recvConn = 0) {
  plan::Step s{};
  s.op = op;
  s.flags = flags;
  s.src = src;
  s.dst = dst;
  s.sendConn = sendConn;
  s.recvConn = recvConn;
  return s;
}

inline plan::LaneSpec lane(plan::Layout layout, std::vector<int> sendPeers, std::vector<int> recvPeers,
                           std::vector<plan::Step> steps, int scratchChunks = 0) {
  plan::LaneSpec l;
  l.kind = sendPeers.empty() && recvPeers.empty() ? plan::ConnKind::None : plan::ConnKind::Direct;
  l.layout = layout;
  l.sendPeers = std::move(sendPeers);
  l.recvPeers = std::move(recvPeers);
  l.steps = std::move(steps);
  l.scratchChunks = scratchChunks;
  return l;
}

// An operation's arguments as a launch binds them (no signature, no direct reads unless set).
inline kern::OpWork opWork(const void* in, void* out, uint64_t count, ncclDataType_t type, size_t eltSize,
                           plan::Coll coll, int nranks, uint64_t seq = 1) {
  kern::OpWork op{};
  op.in = in;
  op.out = out;
  op.count = count;
  op.seq = seq;
  op.nranks = nranks;
  op.dtype = uint8_t(type);
  op.eltSize = uint8_t(eltSize);
  op.coll = uint8_t(coll);
  return op;
}

// A connection end: `fifo` in this process, the peer's bell to ring (null: none).
inline kern::ConnEnd connEnd(kern::FifoHeader* fifo, int peer, void* bell = nullptr,
                             uint16_t direct = kern::kDirectNone) {
  kern::ConnEnd e{};
  e.fifo = fifo;
  e.peer = peer;
  e.bell = bell;
  e.direct = direct;
  return e;
}

struct LaneConns {
  std::vector<kern::ConnEnd> sends, recvs;
};

// One rank's launch of one operation: its compiled plan, the arena and the scratch. Every lane of
// the plan runs over [begin, end) in a queue of its own, on worker 0.
struct HandLaunch {
  std::vector<uint64_t> flat;
  std::vector<uint64_t> arena;
  std::vector<char> scratch;
  kern::OpWork op;
  kern::LaunchWork& work() { return kern::launchWorkOf(arena); }
  const kern::OpWork* ops() { return work().ops(); }
};

inline std::unique_ptr<HandLaunch> makeLaunch(const plan::RankPlan& rankPlan, const kern::OpWork& op,
                                              uint64_t chunkElems, uint64_t begin, uint64_t end,
                                              const std::vector<LaneConns>& conns) {
  auto launch = std::make_unique<HandLaunch>();
  launch->flat = plan::compilePlan(rankPlan);
  launch->op = op;
  kern::WorkBuilder builder;
  const uint32_t opIndex = builder.addOp(op);
  builder.beginWorker();
  for (uint32_t i = 0; i < rankPlan.lanes.size(); i++) {
    builder.beginQueue();
    kern::LaneWork lw{};
    lw.plan = &plan::flatPlanOf(launch->flat);
    lw.begin = begin;
    lw.end = end;
    lw.chunkElems = chunkElems;
    lw.lane = i;
    lw.op = opIndex;
    builder.addLane(lw, conns[i].sends, conns[i].recvs);
  }
  launch->scratch.resize(builder.layOutScratch());
  launch->arena = builder.build();
  launch->work().scratch = launch->scratch.empty() ? nullptr : launch->scratch.data();
  return launch;
}

}  // namespace tutti_test::core
