// A lane specification: the host-side, owning form of one lane of a plan, as algorithms build
// it and the runtime binds it to channels and connections.
#pragma once

#include <string>
#include <vector>

#include "algorithms/plan.h"

namespace tutti::plan {

struct LaneSpec {
  ConnKind kind = ConnKind::None;
  int tag = 0;                 // separates connection sets of one kind (see ConnKind)
  std::vector<int> sendPeers;  // Step::sendConn indexes this; empty: the lane sends nothing
  std::vector<int> recvPeers;  // Step::recvConn indexes this; empty: the lane receives nothing
  Layout layout = Layout::Whole;
  int tileChunks = 0;     // Split: chunks per tile (0: one per rank)
  int scratchChunks = 0;  // chunks of scratch per tile
  // -1: the lane runs on every channel, over that channel's part of the buffer. >= 0, when the
  // plan spreads (spreadsOverChannels): the lane runs on channel `spread` mod nchannels only, over
  // the whole buffer, so that a channel's worker takes a share of a direct exchange's peers
  // rather than a step for every peer. Both ends of a connection must give the same value.
  int spread = -1;
  std::vector<Step> steps;  // run in order for every tile

  int sendPeer() const { return sendPeers.empty() ? -1 : sendPeers[0]; }
  int recvPeer() const { return recvPeers.empty() ? -1 : recvPeers[0]; }
};

// Whether the lanes with a spread index run whole on one channel each: only with at least as
// many peers as channels, so that every channel still has peers to serve.
inline bool spreadsOverChannels(int nranks, int nchannels) { return nchannels > 1 && nranks - 1 >= nchannels; }

// Whether `lane` runs on `channel`, and if so whether over the whole buffer (*whole) or the
// channel's part of it.
inline bool laneRunsOn(const LaneSpec& lane, int channel, int nchannels, int nranks, bool* whole) {
  *whole = lane.spread >= 0 && spreadsOverChannels(nranks, nchannels);
  return !*whole || lane.spread % nchannels == channel;
}

// Everything one rank runs for one operation.
struct RankPlan {
  std::string algorithm;  // "ring", "direct", ... (a registry name, see registry.h)
  std::vector<LaneSpec> lanes;
};

// Joined runs (plan.h). The steps of the run that starts at steps[first]: 1 for a lone step.
size_t joinedRunLength(const std::vector<Step>& steps, size_t first);
// The most steps of any joined run of the plan (1 with none, 0 with no steps): a lane's chunk is
// cut so that this many fit one FIFO slot (joinedChunkBytes), and the peers' chunks must agree,
// so every rank of a plan must have the same width (the verifier checks it).
size_t joinWidth(const RankPlan& plan);
// Why the lane's joined runs are malformed ("" if they are not): a run must keep one op and its
// connection(s), join only steps that talk to a peer, and end within the lane. *step is set to
// the offending step.
std::string joinProblem(const LaneSpec& lane, size_t* step);

// Human-readable form, for TRACE logs and test failure messages.
std::string describe(const RankPlan& plan);

}  // namespace tutti::plan
