// Ring algorithms: all-reduce, all-gather, reduce-scatter, and chains for broadcast and reduce.
//
// Cost with m bytes (all-gather, reduce-scatter: m bytes per block) cut into tiles of n chunks of
// c bytes: all-reduce 2(n-1) steps per tile, 2(n-1)(alpha) + 2(n-1)/n m beta (+ (n-1)/n m gamma)
// once the pipeline is full; all-gather and reduce-scatter (n-1) alpha + (n-1) m beta; broadcast
// and reduce are chains, (n-1)(alpha + c beta) + (m/c - 1)(alpha + c beta): bandwidth-optimal,
// latency linear in n.
//
// Every generator walks a RingOrder: "next" is the rank after this one in the order, and chunk
// and block indices that depend on the rank's place use its position in the order (a Split
// chunk is only a piece of the tile, so any agreed numbering works; a block belongs to a rank).
#include "algorithms/builtin.h"
#include "algorithms/ring_order.h"

namespace tutti::plan {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

BufRef in(int chunk = -1) { return BufRef{Buf::In, chunk}; }
BufRef out(int chunk = -1) { return BufRef{Buf::Out, chunk}; }
BufRef none() { return BufRef{}; }

LaneSpec ringLane(int rank, const RingOrder& ring, Layout layout) {
  LaneSpec lane;
  lane.kind = ConnKind::Ring;
  lane.sendPeers = {ring.step(rank, 1)};
  lane.recvPeers = {ring.step(rank, -1)};
  lane.layout = layout;
  return lane;
}

RankPlan single(const char* algorithm, Layout layout, Step step) {
  LaneSpec lane;
  lane.layout = layout;
  lane.steps.push_back(step);
  return RankPlan{algorithm, {lane}};
}

}  // namespace

// Chunk k of every tile goes round the ring twice: the first lap reduces it (ending at position
// k - 1), the second carries the finished sum to everyone.
RankPlan ringAllReduce(int r, const RingOrder& ring) {
  const int n = ring.size(), p = ring.positionOf(r);
  if (n == 1) return single("ring", Layout::Split, {Op::Copy, kPre | kPost, in(0), out(0)});
  LaneSpec lane = ringLane(r, ring, Layout::Split);
  auto& s = lane.steps;
  s.push_back({Op::Send, kPre, in(p), none()});
  for (int k = 1; k < n - 1; k++) s.push_back({Op::RecvReduceSend, kPre, in(mod(p - k, n)), none()});
  int done = mod(p + 1, n);
  s.push_back({Op::RecvReduceCopySend, kPre | kPost, in(done), out(done)});
  for (int j = 1; j < n - 1; j++) s.push_back({Op::RecvSend, 0, none(), out(mod(p + 1 - j, n))});
  s.push_back({Op::Recv, 0, none(), out(mod(p + 2 - n, n))});
  return RankPlan{"ring", {lane}};
}

RankPlan ringAllGather(int r, const RingOrder& ring) {
  const int n = ring.size();
  LaneSpec lane = ringLane(r, ring, Layout::Blocks);
  auto& s = lane.steps;
  s.push_back({Op::Copy, 0, in(-1), out(r)});  // skipped by the executor when in place
  if (n == 1) {
    lane.kind = ConnKind::None;
    lane.sendPeers.clear();
    lane.recvPeers.clear();
    return RankPlan{"ring", {lane}};
  }
  s.push_back({Op::Send, 0, in(-1), none()});
  for (int j = 1; j < n - 1; j++) s.push_back({Op::RecvSend, 0, none(), out(ring.step(r, -j))});
  s.push_back({Op::Recv, 0, none(), out(ring.step(r, 1))});
  return RankPlan{"ring", {lane}};
}

// The partial sum of rank b's block starts at the rank after b and finishes at b.
RankPlan ringReduceScatter(int r, const RingOrder& ring) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Blocks, {Op::Copy, kPre | kPost, in(0), out(-1)});
  LaneSpec lane = ringLane(r, ring, Layout::Blocks);
  auto& s = lane.steps;
  s.push_back({Op::Send, kPre, in(ring.step(r, -1)), none()});
  for (int k = 1; k < n - 1; k++) s.push_back({Op::RecvReduceSend, kPre, in(ring.step(r, -1 - k)), none()});
  s.push_back({Op::RecvReduceCopy, kPre | kPost, in(r), out(-1)});
  return RankPlan{"ring", {lane}};
}

RankPlan ringBroadcast(int r, const RingOrder& ring, int root) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Whole, {Op::Copy, 0, in(), out()});
  LaneSpec lane = ringLane(r, ring, Layout::Whole);
  int position = mod(ring.positionOf(r) - ring.positionOf(root), n);
  if (position == 0) {
    lane.recvPeers.clear();
    lane.steps.push_back({Op::Copy, 0, in(), out()});  // skipped when in place
    lane.steps.push_back({Op::Send, 0, in(), none()});
  } else if (position < n - 1) {
    lane.steps.push_back({Op::RecvSend, 0, none(), out()});
  } else {
    lane.sendPeers.clear();
    lane.steps.push_back({Op::Recv, 0, none(), out()});
  }
  return RankPlan{"ring", {lane}};
}

RankPlan ringReduce(int r, const RingOrder& ring, int root) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Whole, {Op::Copy, kPre | kPost, in(), out()});
  LaneSpec lane = ringLane(r, ring, Layout::Whole);
  int position = mod(ring.positionOf(r) - ring.positionOf(root) - 1, n);
  if (position == 0) {
    lane.recvPeers.clear();
    lane.steps.push_back({Op::Send, kPre, in(), none()});
  } else if (position < n - 1) {
    lane.steps.push_back({Op::RecvReduceSend, kPre, in(), none()});
  } else {
    lane.sendPeers.clear();
    lane.steps.push_back({Op::RecvReduceCopy, kPre | kPost, in(), out()});
  }
  return RankPlan{"ring", {lane}};
}

RankPlan ringAllReduce(int r, int n) { return ringAllReduce(r, RingOrder(n, {})); }
RankPlan ringAllGather(int r, int n) { return ringAllGather(r, RingOrder(n, {})); }
RankPlan ringReduceScatter(int r, int n) { return ringReduceScatter(r, RingOrder(n, {})); }
RankPlan ringBroadcast(int r, int n, int root) { return ringBroadcast(r, RingOrder(n, {}), root); }
RankPlan ringReduce(int r, int n, int root) { return ringReduce(r, RingOrder(n, {}), root); }

}  // namespace tutti::plan
