// Chain all-reduce: a fixed reduction order ((x0 + x1) + x2) + ... for every element.
//
// Cost per tile of c bytes (alpha: latency, beta: time per byte): the partial sum walks the
// chain 0 -> 1 -> ... -> n-1 and the result walks on round the ring back to n-2, so one tile
// takes (2n - 2)(alpha + c beta). Tiles do not overlap on a rank (each rank's single lane waits
// for the result of tile t before it sends tile t + 1), so m bytes cost about
// (2n - 2)(alpha + c beta) * m / c: for small messages only, where it buys reproducibility.
#include "algorithms/builtin.h"
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
  if (r == 0) send(lane, next, in(), kPre);
  else recvReduceSend(lane, prev, next, in(), kPre);
  if (r == n - 2) recv(lane, prev, out());
  else recvSend(lane, prev, next, out());
  return RankPlan{"chain", {lane}};
}

}  // namespace tutti::plan
