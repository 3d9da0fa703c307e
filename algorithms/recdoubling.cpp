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
#include "algorithms/builtin.h"
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

}  // namespace tutti::plan
