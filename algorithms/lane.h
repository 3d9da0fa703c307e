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
  int tileChunks = 0;          // Split: chunks per tile (0: one per rank)
  int scratchChunks = 0;       // chunks of scratch per tile
  std::vector<Step> steps;     // run in order for every tile

  int sendPeer() const { return sendPeers.empty() ? -1 : sendPeers[0]; }
  int recvPeer() const { return recvPeers.empty() ? -1 : recvPeers[0]; }
};

// Everything one rank runs for one operation.
struct RankPlan {
  std::string algorithm;  // "ring", "direct", ... (a registry name, see registry.h)
  std::vector<LaneSpec> lanes;
};

// Human-readable form, for TRACE logs and test failure messages.
std::string describe(const RankPlan& plan);

}  // namespace tutti::plan
