// The pairwise-exchange algorithm: its plans and its analytic cost (registry entry "pairwise").
//
// Pairwise-exchange all-to-all: n - 1 steps, each sending one block to one peer and receiving
// one from another.
//
// Cost with m bytes per block: (n-1)(alpha + m beta). Every byte moves once, so it is the
// bandwidth-optimal all-to-all for large blocks; with a power-of-two n, step k pairs r with
// r ^ k, so every step is a perfect matching and both directions of a link are used at once.
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

RankPlan pairwiseAlltoAll(int r, int n) {
  // A lane indexes its peers with 8 bits: beyond 255 steps, continue in a new lane (they run
  // concurrently, which costs only the schedule's ordering, not correctness).
  constexpr int kStepsPerLane = 255;
  RankPlan plan{"pairwise", {directLane(Layout::Blocks)}};
  copy(plan.lanes[0], in(r), out(r));
  bool pow2 = (n & (n - 1)) == 0;
  for (int k = 1; k < n; k++) {
    if ((k - 1) % kStepsPerLane == 0 && k > 1) plan.lanes.push_back(directLane(Layout::Blocks));
    int to = pow2 ? r ^ k : mod(r + k, n), from = pow2 ? r ^ k : mod(r - k, n);
    send(plan.lanes.back(), to, in(to));
    recv(plan.lanes.back(), from, out(from));
  }
  return plan;
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct PairwiseModel : sim::CostModel {
  // The same when the ranks spread out over the tile's pairs: only the first waits for the
  // other ranks' transfers (for half of them, on average); the tile's port floor (portFloor)
  // covers the bandwidth.
  double streamPairs(double c, long long count, bool local, double flows) const {
    if (count <= 0) return 0;
    return pairStep(c, local, (flows + 1) / 2) + double(count - 1) * pairStep(c, local, 1);
  }

  // Pairwise all-to-all (pairwise.cpp): a local copy, then n - 1 send/receive pairs, one per
  // peer; a rank has g - 1 peers on its node and n - g across.
  std::optional<double> estimate() const {
    if (coll != Coll::AlltoAll) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
    // the smallest node's ranks have the most peers across nodes
    long long g = multiNode() ? n - (f.nodes - 1) * perNode() : n;
    if (g <= 0) g = perNode();
    auto perTile = [&](double c, bool first) {
      double local = streamPairs(c, g - 1, true, flowsOf(true, 0));
      double net = streamPairs(c, n - g, false, flowsOf(false, double(perNode())));
      double steps = o + copy(c) + local + net + (first ? stagger(c, true) : 0);
      return std::max(steps, portFloor(c, double(g - 1), double(perNode() * (n - perNode()))));
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> pairwiseCost(const sim::CostModel& model) { return PairwiseModel{model}.estimate(); }

}  // namespace tutti::plan
