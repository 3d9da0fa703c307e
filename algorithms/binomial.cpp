// Binomial-tree broadcast and reduce, rooted anywhere.
//
// Cost with m bytes: ceil(log2 n) levels; along the critical path the root sends to
// ceil(log2 n) children one after another: ceil(log2 n)(alpha + c beta) per tile of c bytes,
// and tiles pipeline down the tree, so about (ceil(log2 n) + m/c - 1)(alpha + c beta). Reduce
// is the same tree upwards, plus a reduction of c bytes per child at each node.
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

namespace {

// Relative rank v = r - root: the parent of v clears v's highest bit; the children add a higher
// bit. Returned smallest subtree first.
struct Node {
  int parent = -1;
  std::vector<int> children;
};

Node nodeOf(int r, int n, int root) {
  int v = mod(r - root, n);
  Node node;
  if (v > 0) node.parent = mod(v - (1 << highestBit(v)) + root, n);
  for (int j = v == 0 ? 0 : highestBit(v) + 1; v + (1 << j) < n; j++) node.children.push_back(mod(v + (1 << j) + root, n));
  return node;
}

}  // namespace

// The largest subtree is served first, since it has the longest way to go.
RankPlan binomialBroadcast(int r, int n, int root) {
  Node node = nodeOf(r, n, root);
  std::vector<int> kids(node.children.rbegin(), node.children.rend());
  LaneSpec lane = directLane(Layout::Whole);
  if (node.parent < 0) {
    copy(lane, in(), out());  // skipped in place
    for (int c : kids) send(lane, c, in());
  } else if (kids.empty()) {
    recv(lane, node.parent, out());
  } else {
    recvSend(lane, node.parent, kids[0], out());
    for (size_t i = 1; i < kids.size(); i++) send(lane, kids[i], out());
  }
  return RankPlan{"binomial", {lane}};
}

// Non-roots have no output: their partial sums stay in scratch. The smallest subtree reports
// first.
RankPlan binomialReduce(int r, int n, int root) {
  if (n == 1) return localCopy("binomial", Layout::Whole, in(), out(), kPre | kPost);
  Node node = nodeOf(r, n, root);
  const std::vector<int>& kids = node.children;
  LaneSpec lane = directLane(Layout::Whole);
  if (node.parent < 0) {
    for (size_t i = 0; i < kids.size(); i++) {
      uint8_t flags = uint8_t((i == 0 ? kPre : 0) | (i + 1 == kids.size() ? kPost : 0));
      recvReduceCopy(lane, kids[i], i == 0 ? in() : out(), out(), flags);
    }
    return RankPlan{"binomial", {lane}};
  }
  if (kids.empty()) {
    send(lane, node.parent, in(), kPre);
    return RankPlan{"binomial", {lane}};
  }
  lane.scratchChunks = 1;
  for (size_t i = 0; i + 1 < kids.size(); i++) recvReduceCopy(lane, kids[i], i == 0 ? in() : scratch(0), scratch(0), i == 0 ? kPre : 0);
  bool only = kids.size() == 1;
  recvReduceSend(lane, kids.back(), node.parent, only ? in() : scratch(0), only ? kPre : 0);
  return RankPlan{"binomial", {lane}};
}

}  // namespace tutti::plan
