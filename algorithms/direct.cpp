// Direct exchanges: all-to-all, gather, scatter, send and receive, one lane per peer and way.
//
// Cost with m bytes per block: all-to-all sends n-1 blocks at once, alpha + (n-1) m beta when the
// links do not contend (every peer's lane runs concurrently); gather and scatter are bound by the
// root's link, alpha + (n-1) m beta; send/receive alpha + m beta.
#include "algorithms/builtin.h"

namespace tutti::plan {
namespace {

// `spread`: the peer's distance from this rank (the receiver counts it the same way), so that
// both ends of a connection put it on the same channel; -1 for a point-to-point send.
LaneSpec sendLane(int peer, BufRef src, int spread = -1) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.spread = spread;
  lane.sendPeers = {peer};
  lane.layout = Layout::Blocks;
  lane.steps.push_back({Op::Send, 0, src, BufRef{}});
  return lane;
}

LaneSpec recvLane(int peer, BufRef dst, int spread = -1) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.spread = spread;
  lane.recvPeers = {peer};
  lane.layout = Layout::Blocks;
  lane.steps.push_back({Op::Recv, 0, BufRef{}, dst});
  return lane;
}

LaneSpec copyLane(BufRef src, BufRef dst, int spread = -1) {
  LaneSpec lane;
  lane.layout = Layout::Blocks;
  lane.spread = spread;
  lane.steps.push_back({Op::Copy, 0, src, dst});
  return lane;
}

}  // namespace

// The exchanges with many peers spread their lanes over the channels by the peer's distance
// (LaneSpec::spread): the own block's copy at 0, the sends to rank + i and the receives from
// rank - i at i.
RankPlan directAlltoAll(int rank, int nranks) {
  RankPlan plan{"direct", {copyLane({Buf::In, rank}, {Buf::Out, rank}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int to = (rank + i) % nranks, from = (rank - i + nranks) % nranks;
    plan.lanes.push_back(sendLane(to, {Buf::In, to}, i));
    plan.lanes.push_back(recvLane(from, {Buf::Out, from}, i));
  }
  return plan;
}

RankPlan directGather(int rank, int nranks, int root) {
  if (rank != root) return RankPlan{"direct", {sendLane(root, {Buf::In, -1}, (rank - root + nranks) % nranks)}};
  RankPlan plan{"direct", {copyLane({Buf::In, -1}, {Buf::Out, rank}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int from = (rank + i) % nranks;
    plan.lanes.push_back(recvLane(from, {Buf::Out, from}, i));
  }
  return plan;
}

RankPlan directScatter(int rank, int nranks, int root) {
  if (rank != root) return RankPlan{"direct", {recvLane(root, {Buf::Out, -1}, (rank - root + nranks) % nranks)}};
  RankPlan plan{"direct", {copyLane({Buf::In, rank}, {Buf::Out, -1}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int to = (rank + i) % nranks;
    plan.lanes.push_back(sendLane(to, {Buf::In, to}, i));
  }
  return plan;
}

RankPlan directSend(int rank, int peer) {
  // A self send is paired with its receive by the runtime, which binds the receive's buffer
  // as this send's output.
  if (peer == rank) return RankPlan{"direct", {copyLane({Buf::In, -1}, {Buf::Out, -1})}};
  return RankPlan{"direct", {sendLane(peer, {Buf::In, -1})}};
}

RankPlan directRecv(int rank, int peer) {
  if (peer == rank) return RankPlan{"direct", {}};  // done by the paired self send
  return RankPlan{"direct", {recvLane(peer, {Buf::Out, -1})}};
}

}  // namespace tutti::plan
