// Small helpers the plan generators share: buffer references, modular ranks, and lanes that
// talk to several peers.
#pragma once

#include "algorithms/lane.h"

namespace tutti::plan::steps {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

inline BufRef in(int chunk = -1) { return BufRef{Buf::In, chunk}; }
inline BufRef out(int chunk = -1) { return BufRef{Buf::Out, chunk}; }
inline BufRef scratch(int chunk) { return BufRef{Buf::Scratch, chunk}; }
inline BufRef none() { return BufRef{}; }

inline uint8_t peerIndex(std::vector<int>& peers, int peer) {
  for (size_t i = 0; i < peers.size(); i++)
    if (peers[i] == peer) return uint8_t(i);
  peers.push_back(peer);
  return uint8_t(peers.size() - 1);
}

// Appends a step on a lane whose peers are collected as the steps name them.
inline void send(LaneSpec& lane, int to, BufRef src, uint8_t flags = 0) {
  lane.steps.push_back({Op::Send, flags, src, none(), peerIndex(lane.sendPeers, to), 0});
}
inline void recv(LaneSpec& lane, int from, BufRef dst) {
  lane.steps.push_back({Op::Recv, 0, none(), dst, 0, peerIndex(lane.recvPeers, from)});
}
inline void recvSend(LaneSpec& lane, int from, int to, BufRef dst, uint8_t flags = 0) {
  lane.steps.push_back(
      {Op::RecvSend, flags, none(), dst, peerIndex(lane.sendPeers, to), peerIndex(lane.recvPeers, from)});
}
inline void recvReduceCopy(LaneSpec& lane, int from, BufRef src, BufRef dst, uint8_t flags = 0) {
  lane.steps.push_back({Op::RecvReduceCopy, flags, src, dst, 0, peerIndex(lane.recvPeers, from)});
}
inline void recvReduceSend(LaneSpec& lane, int from, int to, BufRef src, uint8_t flags = 0) {
  lane.steps.push_back(
      {Op::RecvReduceSend, flags, src, none(), peerIndex(lane.sendPeers, to), peerIndex(lane.recvPeers, from)});
}
inline void recvReduceCopySend(LaneSpec& lane, int from, int to, BufRef src, BufRef dst, uint8_t flags = 0) {
  lane.steps.push_back(
      {Op::RecvReduceCopySend, flags, src, dst, peerIndex(lane.sendPeers, to), peerIndex(lane.recvPeers, from)});
}
inline void copy(LaneSpec& lane, BufRef src, BufRef dst, uint8_t flags = 0) {
  lane.steps.push_back({Op::Copy, flags, src, dst, 0, 0});
}

// Makes the steps appended since `first` one message (kJoin on all but the last; plan.h). They
// must share op and connection.
inline void joinSince(LaneSpec& lane, size_t first) {
  for (size_t s = first; s + 1 < lane.steps.size(); s++) lane.steps[s].flags |= kJoin;
}

inline LaneSpec directLane(Layout layout, int tileChunks = 0, int tag = 0) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.layout = layout;
  lane.tileChunks = tileChunks;
  lane.tag = tag;
  return lane;
}

// A one-rank plan: a local copy that also applies the reduction's pre- and post-operations.
inline RankPlan localCopy(const char* algorithm, Layout layout, BufRef src, BufRef dst, uint8_t flags) {
  LaneSpec lane;
  lane.layout = layout;
  lane.tileChunks = layout == Layout::Split ? 1 : 0;
  copy(lane, src, dst, flags);
  return RankPlan{algorithm, {lane}};
}

inline int highestBit(int v) {
  int b = -1;
  while (v) {
    v >>= 1;
    b++;
  }
  return b;
}
inline int lowestBit(int v) {
  int b = 0;
  while (!(v & 1)) {
    v >>= 1;
    b++;
  }
  return b;
}
inline int floorPow2(int n) { return 1 << highestBit(n); }

}  // namespace tutti::plan::steps
