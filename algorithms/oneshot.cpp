// The one-shot algorithm: its plans and its analytic cost (registry entry "oneshot").
//
// One-shot all-reduce for small messages: every rank sends its whole input to every other rank,
// then folds all n contributions itself in rank order, ((x0 op x1) op x2) op ..., with the
// accumulator always on the left. Every rank computes the same fold, so every rank holds the same
// bits, and for a given rank count the result does not depend on the size or the tiling: the
// same left fold as the chain plan, whose results it equals bitwise for sum and product.
//
// Cost per tile of c bytes: one hop, alpha + c beta on each of the n-1 connections at once
// (a rank's port carries (n-1) c each way), then n-1 local reductions of c bytes. Latency-bound
// messages gain (one hop instead of log2 n or 2(n-1)); the traffic, (n-1) m per rank, rules it
// out beyond small sizes. On one host the runtime runs it through the ranks' shared mailboxes
// (kernels/mailbox.h) instead of FIFOs: one cache line per rank for the smallest messages.
#include <algorithm>
#include <optional>
#include <string>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"
#include "base/error.h"

namespace tutti::plan {

using namespace steps;

RankPlan oneshotAllReduce(int r, int n) {
  if (n == 1) return localCopy("oneshot", Layout::Whole, in(), out(), kPre | kPost);
  // A lane names each peer by an 8-bit index; the cost model never picks it at such sizes.
  if (n > 256) throw Error(ErrorCode::InvalidUsage, "oneshot: at most 256 ranks (" + std::to_string(n) + " asked)");
  // One lane: the sends read the input before the fold writes the output (in place they alias).
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.layout = Layout::Whole;
  lane.scratchChunks = 2;  // 0: this rank's own contribution, 1: the one received last
  for (int i = 1; i < n; i++) send(lane, mod(r + i, n), in(), kPre);
  lane.steps.push_back({Op::Copy, kPre, in(), scratch(0)});
  for (int p = 0; p < n; p++) {
    uint8_t post = p == n - 1 ? kPost : 0;
    BufRef x = scratch(0);
    if (p != r) {
      recv(lane, p, p == 0 ? out() : scratch(1));
      if (p == 0) continue;
      x = scratch(1);
    }
    if (p == 0)
      lane.steps.push_back({Op::Copy, 0, x, out()});
    else
      lane.steps.push_back({Op::Reduce, post, x, out()});
  }
  return RankPlan{"oneshot", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct OneshotModel : sim::CostModel {
  // One-shot (oneshot.cpp). Through the mailboxes (one node, small enough): every rank's
  // write is seen by all the others after one handoff, then each rank pulls the n-1 other
  // inputs through its port and folds n inputs. As a plan:
  // n-1 sends through the rank's port, a hop, then n-1 receive-and-reduce steps per tile.
  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    if (!multiNode() && f.mailboxBytes > 0 && bytes <= f.mailboxBytes)
      return latency(true) + double(n - 1) * double(bytes) / portRate(true) + double(n) * copy(double(bytes));
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    long long remote = multiNode() ? n - perNode() : 0;
    // Rank 0 is the slowest: its fold starts with a copy and its first receive (from rank 1) is
    // the last chunk rank 1 sends; every rank sends to its successors in turn, so in each round
    // the ranks of a node that send across share the NIC pool, and the channels share every port.
    auto perTile = [&](double c, bool) {
      double sends = double(n - 1 - remote) * (o + xfer(c, true, n > 2 ? double(nch) : 0.5 * (1 + nch))) +
                     double(remote) * (o + xfer(c, false, double(perNode() * nch)));
      double firstWait = std::max(2 * (o + copy(c)), latency(remote == 0));
      return sends + firstWait + double(n - 1) * (2 * o + copy(c));
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> oneshotCost(const sim::CostModel& model) { return OneshotModel{model}.estimate(); }

}  // namespace tutti::plan
