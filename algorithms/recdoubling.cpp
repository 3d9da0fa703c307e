// The recursive-doubling algorithm: its plans and its analytic cost (registry entry "recdoubling").
//
// Recursive-doubling all-reduce, for small messages.
//
// Cost with p = 2^floor(log2 n) and a message of m bytes: log2(p) rounds in which every rank
// exchanges the whole message with one partner: log2(p)(alpha + m beta) (+ m gamma reducing).
// When n is not a power of two, the n - p extra ranks first fold into ranks 0..n-p-1 and get
// the result back at the end: two more steps, 2(alpha + m beta).
//
// Deterministic: every element is reduced in the same order on every rank and for every size.
// Round k combines two partial sums that each cover an aligned block of 2^k ranks, and both
// partners compute "received op own", i.e. the same two operands; the operations we reduce with
// (sum, product, min, max, with PreMulSum's scalar applied to each input first) are commutative
// elementwise, so both partners get the same bits, and the fold of an extra rank is one more
// fixed pair. No step depends on where an element falls in a tile or channel.
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

RankPlan recdoublingAllReduce(int r, int n) {
  if (n == 1) return localCopy("recdoubling", Layout::Whole, in(), out(), kPre | kPost);
  int p = floorPow2(n), extra = r + p;
  LaneSpec lane = directLane(Layout::Whole);
  if (r >= p) {  // fold into r - p, get the result back
    send(lane, r - p, in(), kPre);
    recv(lane, r - p, out());
    return RankPlan{"recdoubling", {lane}};
  }
  bool folded = extra < n;
  if (folded) recvReduceCopy(lane, extra, in(), out(), kPre);
  for (int mask = 1; mask < p; mask <<= 1) {
    int partner = r ^ mask;
    bool first = mask == 1 && !folded, last = mask * 2 == p;
    send(lane, partner, first ? in() : out(), first ? kPre : 0);
    recvReduceCopy(lane, partner, first ? in() : out(), out(), uint8_t((first ? kPre : 0) | (last ? kPost : 0)));
  }
  if (folded) send(lane, extra, out());
  return RankPlan{"recdoubling", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct RecDoublingModel : sim::CostModel {
  // Recursive doubling (recdoubling.cpp): per tile log2(p) rounds of send + receive-reduce with
  // the partner r ^ mask (p = 2^floor(log2 n)); extra ranks fold in and get the result back:
  // two more rounds. Every round costs 2o + x + a and tiles run one after the other.
  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    long long pw = floorPow2(n);
    auto perTile = [&](double c, bool first) {
      double time = 0;
      for (long long mask = 1; mask < pw; mask <<= 1) time += xorRound(c, 1, mask, pw, first);
      if (pw < n) time += 2 * foldRound(c, 1, pw, first) - foldHead(c, 1, pw, first);
      return time;
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> recdoublingCost(const sim::CostModel& model) { return RecDoublingModel{model}.estimate(); }

}  // namespace tutti::plan
