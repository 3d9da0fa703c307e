// The hierarchical algorithm: its plans and its analytic cost (registry entry "hierarchical").
//
// Hierarchical all-reduce: reduce-scatter inside each node, all-reduce across nodes among the
// ranks that hold the same slice, all-gather inside each node.
//
// Cost with g ranks per node, N = n/g nodes and m bytes (alpha_l, beta_l inside a node,
// alpha_w, beta_w between nodes): 2(g-1)N chunk steps inside, (g-1)/g m beta_l each way, and a
// ring all-reduce of m/g bytes across nodes: 2(N-1)(alpha_w) + 2(N-1)/N (m/g) beta_w. Only
// 1/g of the message crosses the slow network per rank, which is the point. A tile is cut into
// n chunks (g slices of N), so every phase is a ring over chunks of c/n elements.
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

namespace {

struct Geometry {
  int g, nodes, node, local;
  int chunk(int slice, int j) const { return mod(slice, g) * nodes + mod(j, nodes); }
  int intra(int l) const { return node * g + mod(l, g); }
  int inter(int nd) const { return mod(nd, nodes) * g + local; }
};

// Rings inside the node over slices, one column of chunks at a time so no rank ever has more
// than one chunk in flight to its neighbour.
void intraReduceScatter(LaneSpec& lane, const Geometry& G) {
  int next = G.intra(G.local + 1), prev = G.intra(G.local - 1), l = G.local;
  for (int j = 0; j < G.nodes; j++) {
    send(lane, next, in(G.chunk(l - 1, j)), kPre);
    for (int k = 1; k < G.g - 1; k++) recvReduceSend(lane, prev, next, in(G.chunk(l - 1 - k, j)), kPre);
    recvReduceCopy(lane, prev, in(G.chunk(l, j)), out(G.chunk(l, j)), kPre);
  }
}

void interAllReduce(LaneSpec& lane, const Geometry& G) {
  int next = G.inter(G.node + 1), prev = G.inter(G.node - 1), i = G.node, N = G.nodes, l = G.local;
  auto c = [&](int j) { return out(G.chunk(l, j)); };
  send(lane, next, c(i));
  for (int k = 1; k < N - 1; k++) recvReduceSend(lane, prev, next, c(i - k));
  recvReduceCopySend(lane, prev, next, c(i + 1), c(i + 1), kPost);
  for (int j = 1; j < N - 1; j++) recvSend(lane, prev, next, c(i + 1 - j));
  recv(lane, prev, c(i + 2 - N));
}

void intraAllGather(LaneSpec& lane, const Geometry& G) {
  int next = G.intra(G.local + 1), prev = G.intra(G.local - 1), l = G.local;
  for (int j = 0; j < G.nodes; j++) {
    send(lane, next, out(G.chunk(l, j)));
    for (int k = 1; k < G.g - 1; k++) recvSend(lane, prev, next, out(G.chunk(l - k, j)));
    recv(lane, prev, out(G.chunk(l + 1, j)));
  }
}

}  // namespace

// One node, one rank per node, or nodes of unequal size: the plain ring.
RankPlan hierarchicalAllReduce(int r, int n, int ranksPerNode) {
  int g = ranksPerNode;
  if (g <= 1 || g >= n || n % g != 0) {
    RankPlan plan = ringAllReduce(r, n);
    plan.algorithm = "hierarchical";
    return plan;
  }
  Geometry G{g, n / g, r / g, r % g};
  LaneSpec lane = directLane(Layout::Split, n);
  intraReduceScatter(lane, G);
  interAllReduce(lane, G);
  intraAllGather(lane, G);
  return RankPlan{"hierarchical", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct HierarchicalModel : sim::CostModel {
  // Hierarchical (hierarchical.cpp): a tile is n chunks. Inside the node, a ring reduce-scatter
  // then all-gather, one column of g - 1 hops per node; across nodes, a ring all-reduce of
  // 2(N - 1) hops with every rank of a node crossing at once. Unequal nodes, one node or one
  // rank per node: the plan is the ring's.
  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    long long g = f.ranksPerNode;
    if (g <= 1 || g >= n || n % g != 0) return ringCost(*this);
    long long nodes = n / g;
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(n));
    auto perTile = [&](double c, bool) {
      double column = double(g - 1) * hopOf(c, true, flowsOf(true, 0)) + o;
      double hops = double(2 * (nodes - 1));
      double inter = std::max(hops * hopOf(c, false, flowsOf(false, double(g))), portFloor(c, 0, hops * double(g))) + o;
      return 2 * double(nodes) * column + inter;
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> hierarchicalCost(const sim::CostModel& model) { return HierarchicalModel{model}.estimate(); }

}  // namespace tutti::plan
