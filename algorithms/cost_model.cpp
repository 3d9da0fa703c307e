// The analytic cost model's shared primitives (cost_model.h).
#include "algorithms/cost_model.h"

#include <algorithm>

namespace tutti::sim {

using plan::Layout;

CostModel::CostModel(const Fabric& fabric, const Pipeline& pipe, plan::Coll c, size_t b)
    : f(fabric),
      p(pipe),
      bytes(b),
      n(fabric.nranks),
      channels(std::max(1, pipe.nchannels)),
      nch(busyChannels(laneBytes(c, Layout::Blocks, b, fabric.nranks), channels)),
      o(fabric.stepOverheadUs),
      coll(c) {}

int CostModel::perNode() const { return std::min(f.ranksPerNode, n); }

double CostModel::capRate(bool local) const {
  return std::min(f.channelGBps, local ? f.local.gbps : f.network.gbps) * kBytesPerUsPerGBps;
}

double CostModel::portRate(bool local) const {
  return (local ? f.local.gbps : f.network.gbps * f.nicsPerNode) * kBytesPerUsPerGBps;
}

double CostModel::single(Layout layout) const {
  tiling::Tiles t = tiling::tilesOf(range(layout), p.chunkBytes, 1);
  return overTiles(t, [&](double c) { return o + copy(c); });
}

double CostModel::xfer(double c, bool local, double flows) const {
  return std::max(c / capRate(local), flows * c / portRate(local));
}

double CostModel::lockstepPair(double c, bool local, double flows) const {
  return std::max(pairStep(c, local, flows), nch * flows * c / portRate(local));
}

double CostModel::flowsOf(bool local, double crossing) const { return local ? 1.0 : std::max(1.0, crossing); }

double CostModel::portFloor(double c, double localChunks, double netChunks) const {
  return nch * c * std::max(localChunks / portRate(true), multiNode() ? netChunks / portRate(false) : 0.0);
}

double CostModel::pairs(double c, long long count, bool local, double flows) const {
  if (count <= 0) return 0;
  double later = std::max(pairStep(c, local, 1), nch * flows * c / portRate(local));
  return lockstepPair(c, local, flows) + double(count - 1) * later;
}

double CostModel::xorRound(double c, long long count, long long mask, long long pw, bool first) const {
  bool local = !crosses(0, mask) && !crosses(pw - 1, pw - 1 - mask);
  double crossing = local ? 0 : double(std::min<long long>(perNode(), mask));
  return pairs(c, count, local, flowsOf(local, crossing)) + (first && mask == 1 ? stagger(c, local) : 0);
}

double CostModel::foldRound(double c, long long count, long long pw, bool first) const {
  bool local = !crosses(0, pw) && !crosses(n - 1 - pw, n - 1);
  double crossing = local ? 0 : double(std::min<long long>(perNode(), n - pw));
  double flows = flowsOf(local, crossing);
  // (across nodes, the other channels' folds share the NIC pool too)
  double x = xfer(c, local, first ? flows : (flows + (local ? 1 : nch)) / 2);
  // a stream of chunks keeps the port busy with every folding rank's chunks, and every
  // channel's, except that across nodes, once spread out, one channel folds in while the
  // other folds out (the two directions use different nodes' NIC pools)
  double channelFlows = first || local ? nch : 1;
  double stream =
      std::max(double(count) * (o + x), count > 1 ? double(count) * flows * channelFlows * c / portRate(local) : 0.0);
  return stream + latency(local) + o + (first ? stagger(c, local) : 0);
}

double CostModel::foldHead(double c, long long count, long long pw, bool first) const {
  double saved = 0;
  for (long long mask = 1; mask < pw; mask <<= 1)
    if (mask >= n - pw) saved += latency(!crosses(0, mask));
  return std::min(saved, foldRound(c, count, pw, first));
}

double CostModel::joinedRounds(double c, const std::vector<std::pair<long long, long long>>& rounds, int dir,
                               Load& load) const {
  // (on one node every rank's path is the same: one state)
  const bool byRank = multiNode() && n <= kExactPathRanks;
  const long long g = perNode(), states = !multiNode() ? 1 : byRank ? n : g;
  std::vector<double> t(static_cast<size_t>(states), 0.0), next(static_cast<size_t>(states), 0.0);
  for (auto [d, count] : rounds) {
    if (count <= 0) continue;
    double crossing = multiNode() ? double(std::min({d, n - d, g})) : 0;
    load.localChunks += double(count) * (1 - crossing / double(g));
    load.netChunks += double(count) * crossing;
    const double message = double(count) * c;
    const double local = o + xfer(message, true, 1),
                 net = o + xfer(message, false, nch * (flowsOf(false, crossing) + 1) / 2);
    for (long long r = 0; r < states; r++) {
      long long from = 0, to = 0;
      bool fromCrosses = false, toCrosses = false;
      if (!multiNode()) {
        from = to = r;
      } else if (byRank) {
        from = ((r - dir * d) % n + n) % n;
        to = ((r + dir * d) % n + n) % n;
        fromCrosses = crosses(from, r);
        toCrosses = crosses(r, to);
      } else {
        // r is a place in a node; a partner d away is on another node unless it stays in this one
        long long e = d % g;
        from = ((r - dir * e) % g + g) % g;
        to = ((r + dir * e) % g + g) % g;
        fromCrosses = d >= g || (dir > 0 ? r < e : r + e >= g);
        toCrosses = d >= g || (dir > 0 ? r + e >= g : r < e);
      }
      double own = t[size_t(r)] + (toCrosses ? net : local);
      double arrival = t[size_t(from)] + (fromCrosses ? net + latency(false) : local + latency(true));
      next[size_t(r)] = std::max(own, arrival) + o;
    }
    t.swap(next);
  }
  return *std::max_element(t.begin(), t.end());
}

tiling::Tiles CostModel::joinedTiles(Layout layout, size_t width) const {
  return tiling::tilesOf(range(layout), plan::joinedChunkBytes(p.chunkBytes, width), 1);
}

}  // namespace tutti::sim
