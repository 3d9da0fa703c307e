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

#include "algorithms/builtin.h"
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

}  // namespace tutti::plan
