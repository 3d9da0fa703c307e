// The compiled (flat) plan: one rank's plan as plain data in one arena, a header then arrays
// reached by byte offsets, never pointers, so that it can be copied as bytes to wherever an
// executor runs (host memory, device memory) and read there unchanged. Built once per
// communicator and plan (compilePlan), read by the host and device executors. Read by both
// compilers: no heavy includes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "algorithms/plan.h"

#if defined(__CUDACC__)
#define TUTTI_FLAT_HD __host__ __device__ inline
#else
#define TUTTI_FLAT_HD inline
#endif

namespace tutti::plan {

// Fixed limits of a flat plan. A step names its connections by an 8-bit index.
constexpr uint32_t kMaxLanePeers = 256;  // per direction and lane
constexpr uint32_t kMaxPlanLanes = 1u << 20;
constexpr uint32_t kMaxPlanSteps = 1u << 24;
constexpr size_t kAlgorithmNameBytes = 32;
constexpr uint32_t kFlatPlanMagic = 0x666c6174u;  // "flat"

static_assert(std::is_trivially_copyable_v<Step> && std::is_standard_layout_v<Step>, "a Step is copied as bytes");
static_assert(sizeof(Step) == 24 && alignof(Step) == 4, "the Step layout is shared by host and device code");
static_assert(kMaxLanePeers - 1 <= UINT8_MAX, "Step::sendConn and recvConn are 8 bits");

// One lane: its fields as in LaneSpec (lane.h), its steps and peers as ranges of the plan's arrays.
struct FlatLane {
  ConnKind kind;
  Layout layout;
  uint8_t pad[2];
  int32_t tag;
  int32_t tileChunks;     // Split: chunks per tile (0: one per rank)
  int32_t scratchChunks;  // chunks of scratch per tile
  int32_t spread;         // -1, or the channel index it spreads to (LaneSpec::spread)
  uint32_t firstStep, nsteps;
  uint32_t firstSendPeer, nsendPeers;
  uint32_t firstRecvPeer, nrecvPeers;
};
static_assert(std::is_trivially_copyable_v<FlatLane> && sizeof(FlatLane) == 44, "FlatLane layout");

// The arena's header. The arena is `bytes` long: this header, then `nlanes` FlatLanes, `nsteps`
// Steps and `npeers` int32 peers, each array at its offset from the header (8-byte aligned).
struct FlatPlan {
  uint32_t magic;
  uint32_t bytes;
  uint32_t nlanes, nsteps, npeers;
  uint32_t lanesOffset, stepsOffset, peersOffset;
  uint32_t joinWidth;  // the most steps of any joined run (lane.h, joinWidth)
  uint32_t pad;
  char algorithm[kAlgorithmNameBytes];  // NUL-terminated, cut if longer

  TUTTI_FLAT_HD const FlatLane* lanes() const {
    return reinterpret_cast<const FlatLane*>(reinterpret_cast<const char*>(this) + lanesOffset);
  }
  TUTTI_FLAT_HD const Step* steps() const {
    return reinterpret_cast<const Step*>(reinterpret_cast<const char*>(this) + stepsOffset);
  }
  TUTTI_FLAT_HD const int32_t* peers() const {
    return reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(this) + peersOffset);
  }
  TUTTI_FLAT_HD const FlatLane& lane(uint32_t i) const { return lanes()[i]; }
  TUTTI_FLAT_HD const Step& step(const FlatLane& l, uint32_t i) const { return steps()[l.firstStep + i]; }
  TUTTI_FLAT_HD int32_t sendPeer(const FlatLane& l, uint32_t conn) const { return peers()[l.firstSendPeer + conn]; }
  TUTTI_FLAT_HD int32_t recvPeer(const FlatLane& l, uint32_t conn) const { return peers()[l.firstRecvPeer + conn]; }
};
static_assert(std::is_trivially_copyable_v<FlatPlan> && sizeof(FlatPlan) == 72, "FlatPlan layout");

// The steps of the joined run that starts at step `first` of a lane: 1 for a lone step (plan.h,
// "Joined steps").
TUTTI_FLAT_HD uint32_t joinedRunLength(const FlatPlan& plan, const FlatLane& lane, uint32_t first) {
  uint32_t last = first;
  while (last + 1 < lane.nsteps && (plan.step(lane, last).flags & kJoin)) last++;
  return last - first + 1;
}

// Whether a step of this kind takes a slot from its receive FIFO / fills one of its send FIFO.
TUTTI_FLAT_HD bool stepReceives(Op op) { return op != Op::Send && op != Op::Copy && op != Op::Reduce; }
TUTTI_FLAT_HD bool stepSends(Op op) {
  return op == Op::Send || op == Op::RecvSend || op == Op::RecvReduceSend || op == Op::RecvReduceCopySend;
}

}  // namespace tutti::plan

#if !defined(__CUDACC__)
#include <vector>

namespace tutti::plan {

struct RankPlan;

// Compiles a rank's plan into its flat form: the arena's bytes (8-byte aligned storage). Throws
// tutti::Error (InvalidUsage) naming the algorithm and lane when the plan exceeds a fixed limit
// (kMaxLanePeers, kMaxPlanLanes, kMaxPlanSteps).
std::vector<uint64_t> compilePlan(const RankPlan& plan);
inline const FlatPlan& flatPlanOf(const std::vector<uint64_t>& arena) {
  return *reinterpret_cast<const FlatPlan*>(arena.data());
}

}  // namespace tutti::plan
#endif
