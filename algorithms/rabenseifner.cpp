// Rabenseifner's algorithm: its plans and its analytic cost (registry entry "rabenseifner").
//
// Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather.
//
// Cost with p = 2^floor(log2 n) and m bytes: 2 log2(p) alpha + 2 (p-1)/p m beta
// (+ (p-1)/p m gamma). A tile is cut into p chunks and each round exchanges chunk by chunk, so
// the latency term is really 2(p-1) chunk steps: best for medium messages at moderate n. When n
// is not a power of two the extra ranks fold their whole message into a partner first and get
// the result back last: 2(alpha + m beta) more.
#include <algorithm>
#include <optional>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

namespace {

// Where each chunk's partial sum lives: still the untouched input, or already in the output.
struct Partials {
  std::vector<bool> inOut;
  BufRef at(int k) const { return inOut[size_t(k)] ? out(k) : in(k); }
  uint8_t pre(int k) const { return inOut[size_t(k)] ? 0 : kPre; }
};

}  // namespace

RankPlan rabenseifnerAllReduce(int r, int n) {
  if (n == 1) return localCopy("rabenseifner", Layout::Split, in(0), out(0), kPre | kPost);
  int p = floorPow2(n), extra = r + p;
  LaneSpec lane = directLane(Layout::Split, p);
  if (r >= p) {
    for (int k = 0; k < p; k++) send(lane, r - p, in(k), kPre);
    for (int k = 0; k < p; k++) recv(lane, r - p, out(k));
    return RankPlan{"rabenseifner", {lane}};
  }
  bool folded = extra < n;
  Partials part{std::vector<bool>(size_t(p), folded)};
  if (folded)
    for (int k = 0; k < p; k++) recvReduceCopy(lane, extra, in(k), out(k), kPre);
  int lo = 0, hi = p;
  for (int mask = p / 2; mask >= 1; mask /= 2) {  // halve the range, keep the half holding r
    int partner = r ^ mask, mid = (lo + hi) / 2, half = mid - lo;
    int keep = (r & mask) ? mid : lo, give = (r & mask) ? lo : mid;
    for (int i = 0; i < half; i++) {
      int s = give + i, k = keep + i;
      send(lane, partner, part.at(s), part.pre(s));
      recvReduceCopy(lane, partner, part.at(k), out(k), uint8_t(part.pre(k) | (mask == 1 ? kPost : 0)));
      part.inOut[size_t(k)] = true;
    }
    lo = keep;
    hi = keep + half;
  }
  for (int mask = 1; mask < p; mask *= 2) {  // double the finished range
    int partner = r ^ mask, mine = r & ~(mask - 1), theirs = partner & ~(mask - 1);
    for (int i = 0; i < mask; i++) {
      send(lane, partner, out(mine + i));
      recv(lane, partner, out(theirs + i));
    }
  }
  if (folded)
    for (int k = 0; k < p; k++) send(lane, extra, out(k));
  return RankPlan{"rabenseifner", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct RabenseifnerModel : sim::CostModel {
  // Rabenseifner (rabenseifner.cpp): a tile is p chunks; recursive halving sends mask chunks in
  // round mask (p/2 .. 1), recursive doubling mask chunks in round mask (1 .. p/2), each chunk a
  // send then the partner's receive (2o + x + a); extra ranks stream p chunks in and out.
  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    long long pw = floorPow2(n);
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(pw));
    auto perTile = [&](double c, bool first) {
      double time = 0;
      for (long long mask = 1; mask < pw; mask <<= 1) time += 2 * xorRound(c, mask, mask, pw, first);
      if (pw < n) time += 2 * foldRound(c, pw, pw, first);
      return time;
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> rabenseifnerCost(const sim::CostModel& model) { return RabenseifnerModel{model}.estimate(); }

}  // namespace tutti::plan
