// The chain algorithm: its plans and its analytic cost (registry entry "chain").
//
// Chain all-reduce: a fixed reduction order ((x0 + x1) + x2) + ... for every element.
//
// Cost per tile of c bytes (alpha: latency, beta: time per byte): the partial sum walks the
// chain 0 -> 1 -> ... -> n-1 and the result walks on round the ring back to n-2, so one tile
// takes (2n - 2)(alpha + c beta). Tiles do not overlap on a rank (each rank's single lane waits
// for the result of tile t before it sends tile t + 1), so m bytes cost about
// (2n - 2)(alpha + c beta) * m / c: for small messages only, where it buys reproducibility.
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

// Every rank's element is the same left fold, computed once at rank n-1 and copied to everyone,
// so the result is independent of the message size, the tiling and the channel count.
RankPlan chainAllReduce(int r, int n) {
  if (n == 1) return localCopy("chain", Layout::Whole, in(), out(), kPre | kPost);
  LaneSpec lane;
  lane.kind = ConnKind::Ring;
  lane.layout = Layout::Whole;
  int next = mod(r + 1, n), prev = mod(r - 1, n);
  lane.sendPeers = {next};
  lane.recvPeers = {prev};
  if (r == n - 1) {
    recvReduceCopySend(lane, prev, next, in(), out(), kPre | kPost);
    return RankPlan{"chain", {lane}};
  }
  if (r == 0)
    send(lane, next, in(), kPre);
  else
    recvReduceSend(lane, prev, next, in(), kPre);
  if (r == n - 2)
    recv(lane, prev, out());
  else
    recvSend(lane, prev, next, out());
  return RankPlan{"chain", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct ChainModel : sim::CostModel {
  // Tiles and channels in flight collide at the node's NIC pool; a transfer that finds the pool
  // busy waits, on average, for half of what the pool carries per tile (`netChunks` chunks).
  double nicQueueing(double c, double netChunks) const { return multiNode() ? 0.5 * portFloor(c, 0, netChunks) : 0; }

  // Chain all-reduce (chain.cpp): per tile the partial sum walks 0 -> ... -> n-1 and the result
  // on round to n-2: 2n - 2 hops. Rank 0 starts the next tile when the result has come round
  // to it and it has passed it on, so tiles overlap by n - 2 hops.
  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    if (t.count == 0) return 0.0;
    long long netInRing = multiNode() ? f.nodes : 0;
    long long netInTile = multiNode() ? 2 * (f.nodes - 1) + 1 - (crosses(n - 2, n - 1) ? 1 : 0) : 0;
    auto hops = [&](double c, long long count, long long net) {
      return double(count - net) * hopOf(c, true, 1.0) + double(net) * hopOf(c, false, 1.0);
    };
    double sends = n > 2 ? 2 : 1;  // chunks a rank sends per tile
    auto period = [&](double c) {
      double pass = n > 2 ? o + xfer(c, !crosses(0, 1), 1.0) : o;
      return std::max(hops(c, n, netInRing) + pass, portFloor(c, sends, sends)) + nicQueueing(c, sends);
    };
    double last = double(t.lastChunk);
    return double(t.count - 1) * period(double(t.chunk)) + hops(last, 2 * n - 2, netInTile) + o + stagger(last, true);
  }
};

}  // namespace

std::optional<double> chainCost(const sim::CostModel& model) { return ChainModel{model}.estimate(); }

}  // namespace tutti::plan
