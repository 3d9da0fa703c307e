// Double binary tree all-reduce: two binary trees over the ranks, each carrying half of every
// tile; a rank that is a leaf of one tree is (mostly) an inner node of the other, so both halves
// keep every link busy in both directions.
//
// Cost per tile of c bytes, depth d = ceil(log2(n + 1)) - 1: the half tile goes up the tree
// (reduce) and back down (broadcast): 2d(alpha + c/2 beta), with the two trees running side by
// side. A rank's lane finishes tile t before it starts tile t + 1 (reduce up then broadcast down
// are one lane, as the IR requires for dependent phases), so m bytes cost about
// 2d(alpha + c/2 beta) m / c: a latency-bound algorithm, for small and medium messages.
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/steps.h"

namespace tutti::plan {

using namespace steps;

namespace {

// An in-order binary tree over positions [lo, hi): the middle is the root of each range.
void buildTree(int lo, int hi, int parent, std::vector<int>& parents, std::vector<std::vector<int>>& children) {
  if (lo >= hi) return;
  int mid = (lo + hi) / 2;
  parents[size_t(mid)] = parent;
  if (parent >= 0) children[size_t(parent)].push_back(mid);
  buildTree(lo, mid, mid, parents, children);
  buildTree(mid + 1, hi, mid, parents, children);
}

// Tree 1 is tree 0 shifted by one rank, so tree 0's leaves (even positions) become inner nodes.
int rankOf(int position, int tree, int n) { return mod(position + tree, n); }

LaneSpec treeLane(int r, int n, int tree) {
  std::vector<int> parents(size_t(n), -1);
  auto children = std::vector<std::vector<int>>(size_t(n));
  buildTree(0, n, -1, parents, children);
  int pos = mod(r - tree, n);
  int parent = parents[size_t(pos)] < 0 ? -1 : rankOf(parents[size_t(pos)], tree, n);
  std::vector<int> kids;
  for (int c : children[size_t(pos)]) kids.push_back(rankOf(c, tree, n));

  LaneSpec lane = directLane(Layout::Split, 2, tree);
  BufRef mine = in(tree), result = out(tree);
  // Reduce up.
  if (kids.empty()) {
    send(lane, parent, mine, kPre);
  } else if (parent >= 0) {
    if (kids.size() == 1) {
      recvReduceSend(lane, kids[0], parent, mine, kPre);
    } else {
      recvReduceCopy(lane, kids[0], mine, result, kPre);
      recvReduceSend(lane, kids[1], parent, result);
    }
  } else {  // the root finishes the sum and starts the broadcast
    if (kids.size() == 1) {
      recvReduceCopySend(lane, kids[0], kids[0], mine, result, kPre | kPost);
    } else {
      recvReduceCopy(lane, kids[0], mine, result, kPre);
      recvReduceCopySend(lane, kids[1], kids[0], result, result, kPost);
      send(lane, kids[1], result);
    }
    return lane;
  }
  // Broadcast down.
  if (kids.empty()) {
    recv(lane, parent, result);
  } else {
    recvSend(lane, parent, kids[0], result);
    for (size_t i = 1; i < kids.size(); i++) send(lane, kids[i], result);
  }
  return lane;
}

}  // namespace

RankPlan treeAllReduce(int r, int n) {
  if (n == 1) return localCopy("tree", Layout::Split, in(0), out(0), kPre | kPost);
  return RankPlan{"tree", {treeLane(r, n, 0), treeLane(r, n, 1)}};
}

}  // namespace tutti::plan
