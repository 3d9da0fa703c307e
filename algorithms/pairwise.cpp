// Pairwise-exchange all-to-all: n - 1 steps, each sending one block to one peer and receiving
// one from another.
//
// Cost with m bytes per block: (n-1)(alpha + m beta). Every byte moves once, so it is the
// bandwidth-optimal all-to-all for large blocks; with a power-of-two n, step k pairs r with
// r ^ k, so every step is a perfect matching and both directions of a link are used at once.
#include "algorithms/builtin.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

RankPlan pairwiseAlltoAll(int r, int n) {
  // A lane indexes its peers with 8 bits: beyond 255 steps, continue in a new lane (they run
  // concurrently, which costs only the schedule's ordering, not correctness).
  constexpr int kStepsPerLane = 255;
  RankPlan plan{"pairwise", {directLane(Layout::Blocks)}};
  copy(plan.lanes[0], in(r), out(r));
  bool pow2 = (n & (n - 1)) == 0;
  for (int k = 1; k < n; k++) {
    if ((k - 1) % kStepsPerLane == 0 && k > 1) plan.lanes.push_back(directLane(Layout::Blocks));
    int to = pow2 ? r ^ k : mod(r + k, n), from = pow2 ? r ^ k : mod(r - k, n);
    send(plan.lanes.back(), to, in(to));
    recv(plan.lanes.back(), from, out(from));
  }
  return plan;
}

}  // namespace tutti::plan
