// Bruck's algorithms: their plans and their analytic cost (registry entry "bruck").
//
// Bruck's algorithms: all-to-all in ceil(log2 n) rounds with scratch staging, and all-gather by
// dissemination.
//
// A round's blocks to its one peer travel as one message (joined steps, plan.h): the sends of a
// round form one joined run, its receives another, so a round costs one step overhead each way
// whatever the number of blocks. The chunk of every block is then cut so that a round's blocks
// fit one FIFO slot together (joinedChunkBytes): at most slot / (n/2) bytes per block and tile.
//
// All-to-all cost with m bytes per block: ceil(log2 n) rounds, each one message of the about n/2
// blocks whose distance has that bit set: ceil(log2 n) alpha + (n/2) ceil(log2 n) m beta. Fewer
// messages than pairwise (n-1), more bytes: for small blocks at many ranks.
// All-gather cost with m bytes per rank: ceil(log2 n) alpha + (n-1) m beta, every round one
// message doubling the blocks a rank holds.
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

// Round k: rank r sends the blocks it holds (r .. r + 2^k - 1) to r - 2^k and receives the next
// 2^k from r + 2^k. Blocks land directly in their place in the output.
RankPlan bruckAllGather(int r, int n) {
  LaneSpec lane = directLane(Layout::Blocks);
  copy(lane, in(), out(r));  // skipped in place
  for (int d = 1; d < n; d *= 2) {
    int count = std::min(d, n - d);
    size_t first = lane.steps.size();
    for (int i = 0; i < count; i++) send(lane, mod(r - d, n), out(mod(r + i, n)));
    joinSince(lane, first);
    first = lane.steps.size();
    for (int i = 0; i < count; i++) recv(lane, mod(r + d, n), out(mod(r + d + i, n)));
    joinSince(lane, first);
  }
  return RankPlan{"bruck", {lane}};
}

// Slot i of rank r starts as the block for r + i. In round k every slot with bit k set moves 2^k
// ranks on, keeping its slot number, so after the last round slot i of rank r holds the block
// that rank r - i sent to r. A slot stays in scratch until its highest bit's round, which
// delivers it straight to its place in the output. A round's sends all go before its receives,
// which may overwrite the scratch slots just sent.
RankPlan bruckAlltoAll(int r, int n) {
  LaneSpec lane = directLane(Layout::Blocks);
  lane.scratchChunks = n > 1 ? n : 0;
  copy(lane, in(r), out(r));
  for (int k = 0; (1 << k) < n; k++) {
    int d = 1 << k;
    size_t first = lane.steps.size();
    for (int i = 1; i < n; i++)
      if (i & d) send(lane, mod(r + d, n), (i & (d - 1)) ? scratch(i) : in(mod(r + i, n)));
    joinSince(lane, first);
    first = lane.steps.size();
    for (int i = 1; i < n; i++)
      if (i & d) recv(lane, mod(r - d, n), highestBit(i) == k ? out(mod(r - i, n)) : scratch(i));
    joinSince(lane, first);
  }
  return RankPlan{"bruck", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct BruckModel : sim::CostModel {
  // How many i in [1, n) have bit d set.
  long long withBit(long long d) const { return (n / (2 * d)) * d + std::max<long long>(0, n % (2 * d) - d); }

  // Bruck (bruck.cpp): a local copy, then rounds at distance 1, 2, 4, ..., each one joined
  // message: all-to-all sends the blocks whose index has the round's bit, all-gather
  // min(d, n - d) blocks.
  std::optional<double> estimate() const {
    if (coll != Coll::AlltoAll && coll != Coll::AllGather) return std::nullopt;
    auto blocks = [&](long long d) { return coll == Coll::AlltoAll ? withBit(d) : std::min<long long>(d, n - d); };
    long long width = 1;
    for (long long d = 1; d < n; d <<= 1) width = std::max(width, blocks(d));
    if (plan::joinedChunkBytes(p.chunkBytes, size_t(width)) == 0) return std::nullopt;  // a round does not fit a slot
    std::vector<std::pair<long long, long long>>
        rounds;  // (distance, blocks): to r + d, from r - d (all-gather: the reverse)
    for (long long d = 1; d < n; d <<= 1) rounds.emplace_back(d, blocks(d));
    Tiles t = joinedTiles(Layout::Blocks, size_t(width));
    auto perTile = [&](double c, bool first) {
      double time = o + copy(c) + (first ? stagger(c, true) : 0);
      Load load;
      time += joinedRounds(c, rounds, coll == Coll::AlltoAll ? 1 : -1, load);
      return std::max(time, portFloor(c, load.localChunks, load.netChunks));
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> bruckCost(const sim::CostModel& model) { return BruckModel{model}.estimate(); }

}  // namespace tutti::plan
