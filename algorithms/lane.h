// A lane specification: the host-side, owning form of one lane of a plan, as algorithms build
// it and the runtime binds it to channels and connections.
#pragma once

#include <string>
#include <vector>

#include "algorithms/plan.h"

namespace tutti::plan {

struct LaneSpec {
  ConnKind kind = ConnKind::None;
  int sendPeer = -1;   // -1: this lane sends nothing
  int recvPeer = -1;   // -1: this lane receives nothing
  Layout layout = Layout::Whole;
  std::vector<Step> steps;  // run in order for every tile
};

// Everything one rank runs for one operation.
struct RankPlan {
  std::string algorithm;  // "ring", "direct", ...
  std::vector<LaneSpec> lanes;
};

// Human-readable form, for TRACE logs and test failure messages.
std::string describe(const RankPlan& plan);

}  // namespace tutti::plan
