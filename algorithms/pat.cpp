// The PAT algorithm: its plans and its analytic cost (registry entry "pat").
//
// PAT-style logarithmic all-gather and reduce-scatter, for small messages at many ranks.
//
// Block b reaches the rank at distance d below it (rank b - d) over a tree in which d gets it from
// d - 2^k, k being d's lowest set bit. All-gather walks the rounds from the largest distance to
// the smallest: round k moves the blocks whose distance has lowest bit k, so the first round
// sends one block far and the last sends about n/2 blocks to the neighbour. Reduce-scatter is
// the same trees run backwards, summing on the way.
//
// A round's blocks to its one peer travel as one message (joined steps, plan.h): the round's
// sends form one joined run and its receives (reduce-scatter: its RecvReduceCopy steps) another,
// so a round costs one step overhead each way. A block's chunk is cut so that the widest round
// (about n/2 blocks) fits one FIFO slot (joinedChunkBytes).
//
// Cost with m bytes per block: ceil(log2 n) rounds, one message each way per round, (n-1)
// blocks sent per rank in all: ceil(log2 n) alpha + (n-1) m beta (reduce-scatter adds
// (n-1) m gamma).
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

namespace {
int rounds(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}
}  // namespace

RankPlan patAllGather(int r, int n) {
  LaneSpec lane = directLane(Layout::Blocks);
  copy(lane, in(), out(r));  // skipped in place
  for (int k = rounds(n) - 1; k >= 0; k--) {
    int d = 1 << k;
    size_t first = lane.steps.size();
    // Blocks are written once: a lone send may go direct (plan.h; a joined run is copied).
    for (int dist = d; dist < n; dist += 2 * d) send(lane, mod(r - d, n), out(mod(r + dist - d, n)), kDirect);
    joinSince(lane, first);
    first = lane.steps.size();
    for (int dist = d; dist < n; dist += 2 * d) recv(lane, mod(r + d, n), out(mod(r + dist, n)));
    joinSince(lane, first);
  }
  return RankPlan{"pat", {lane}};
}

// Rank r keeps the partial sum of block r + e (e = 0 in the output, others in scratch slot e);
// the partial of distance dist leaves for r + 2^k in round k = lowest bit of dist, after the
// rounds below k have added everything its subtree holds. A round sends the partials of odd
// multiples of 2^k and receives into those of even ones, so its sends may all go first.
RankPlan patReduceScatter(int r, int n) {
  if (n == 1) return localCopy("pat", Layout::Blocks, in(0), out(), kPre | kPost);
  LaneSpec lane = directLane(Layout::Blocks);
  lane.scratchChunks = n;
  std::vector<bool> started(size_t(n), false);
  auto at = [&](int e) { return started[size_t(e)] ? (e == 0 ? out() : scratch(e)) : in(mod(r + e, n)); };
  auto pre = [&](int e) { return started[size_t(e)] ? 0 : kPre; };
  int K = rounds(n);
  for (int k = 0; k < K; k++) {
    int d = 1 << k;
    size_t first = lane.steps.size();
    for (int dist = d; dist < n; dist += 2 * d) send(lane, mod(r + d, n), at(dist), uint8_t(pre(dist)));
    joinSince(lane, first);
    first = lane.steps.size();
    for (int dist = d; dist < n; dist += 2 * d) {
      int e = dist - d;
      uint8_t flags = uint8_t(pre(e) | (e == 0 && k == K - 1 ? kPost : 0));
      recvReduceCopy(lane, mod(r - d, n), at(e), e == 0 ? out() : scratch(e), flags);
      started[size_t(e)] = true;
    }
    joinSince(lane, first);
  }
  return RankPlan{"pat", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct PatModel : sim::CostModel {
  // PAT (pat.cpp): rounds at distance 2^k, each one joined message of the ceil((n - d) / 2d)
  // blocks whose distance has lowest bit k; all-gather starts with a local copy.
  std::optional<double> estimate() const {
    if (coll != Coll::AllGather && coll != Coll::ReduceScatter) return std::nullopt;
    auto blocks = [&](long long d) { return (n - d + 2 * d - 1) / (2 * d); };
    const long long width = std::max(1LL, blocks(1));
    if (plan::joinedChunkBytes(p.chunkBytes, size_t(width)) == 0) return std::nullopt;  // a round does not fit a slot
    // all-gather from the largest distance down, from r + d to r - d; reduce-scatter the reverse
    std::vector<std::pair<long long, long long>> rounds;
    for (long long d = 1; d < n; d <<= 1) rounds.emplace_back(d, blocks(d));
    if (coll == Coll::AllGather) std::reverse(rounds.begin(), rounds.end());
    Tiles t = joinedTiles(Layout::Blocks, size_t(width));
    auto perTile = [&](double c, bool first) {
      double time = (coll == Coll::AllGather ? o + copy(c) : 0) + (first ? stagger(c, true) : 0);
      Load load;
      time += joinedRounds(c, rounds, coll == Coll::AllGather ? -1 : 1, load);
      return std::max(time, portFloor(c, load.localChunks, load.netChunks));
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> patCost(const sim::CostModel& model) { return PatModel{model}.estimate(); }

}  // namespace tutti::plan
