// Double binary tree all-reduce: two binary trees over the ranks, each carrying half of every
// tile; a rank that is a leaf of one tree is (mostly) an inner node of the other, so both halves
// keep every link busy in both directions. On one node the trees are in-order over places along
// the ring order (below); across nodes they are given (tree_shape.h): the topology's node trees,
// where a node's head also has its own node's subtree as a child, so a rank may have three.
//
// Pipelining: a tile holds kTreeChunks chunks per tree, and a rank at depth d (the root at 0)
// reduces chunk k + 2d up before it broadcasts chunk k down, so while chunk k travels to the
// root and back (2d hops) the rank keeps sending later chunks up. Up and down cannot be two
// lanes: in place, the down lane's output is the up lane's input, and the IR forbids lanes that
// may run at the same time from sharing memory (verify.h); the lookahead inside one lane gets the
// same overlap within a tile. The lookahead grows by 2 per level, never more than the smallest
// FIFO (2 slots) can absorb: a rank is at most 2 chunks ahead of its parent on either connection.
//
// Cost with depth D = ceil(log2(n + 1)) - 1 and chunks of c bytes: a tile of K = kTreeChunks
// chunks per tree costs the way up and down of one chunk, 2D(alpha + c/2 beta), plus K - 1 times
// the busiest rank's work per chunk (an inner node: 2 receives, a send up, 2 sends down), so
// m bytes cost about (2D + 3(K - 1))(alpha + c beta) m / (2Kc): latency-bound for small
// messages (every tile has 2K chunks, however small), close to a pipelined tree for large ones.
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/ring_order.h"
#include "algorithms/steps.h"
#include "algorithms/tree_shape.h"
#include "base/error.h"

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

// Positions are places along the channel's ring order, so that when a node's ranks are
// contiguous in that order (the topology's rings keep them so, wherever a launcher placed them)
// every subtree of a few positions stays inside a node. Tree 1 is tree 0 shifted by one place,
// so tree 0's leaves (even positions) become inner nodes.
int rankOf(int position, int tree, const RingOrder& order) { return order.rankAt(position + tree); }

struct TreeNode {
  int parent = -1;  // rank, -1 at the root
  std::vector<int> kids;
  int depth = 0;
};

TreeNode nodeOf(int r, const RingOrder& order, int tree) {
  const int n = order.size();
  std::vector<int> parents(size_t(n), -1);
  auto children = std::vector<std::vector<int>>(size_t(n));
  buildTree(0, n, -1, parents, children);
  int pos = mod(order.positionOf(r) - tree, n);
  TreeNode node;
  node.parent = parents[size_t(pos)] < 0 ? -1 : rankOf(parents[size_t(pos)], tree, order);
  for (int c : children[size_t(pos)]) node.kids.push_back(rankOf(c, tree, order));
  for (int p = parents[size_t(pos)]; p >= 0; p = parents[size_t(p)]) node.depth++;
  return node;
}

TreeNode nodeOf(int r, const TreeShape& shape) {
  TreeNode node;
  node.parent = shape.parent[size_t(r)];
  node.kids = shape.children[size_t(r)];
  for (int p = node.parent; p >= 0; p = shape.parent[size_t(p)])
    if (++node.depth > int(shape.parent.size()))
      throw Error(ErrorCode::Internal, "tree: the given shape has a cycle above rank " + std::to_string(r));
  return node;
}

// Chunk k of tree t in a tile; the trees alternate so a short last tile splits evenly.
int chunkOf(int k, int tree) { return 2 * k + tree; }

// The root finishes the sum and starts the broadcast in the same steps.
void rootChunk(LaneSpec& lane, const TreeNode& node, int chunk) {
  const std::vector<int>& kids = node.kids;
  BufRef mine = in(chunk), result = out(chunk);
  if (kids.size() == 1) {
    recvReduceCopySend(lane, kids[0], kids[0], mine, result, kPre | kPost);
    return;
  }
  recvReduceCopy(lane, kids[0], mine, result, kPre);
  for (size_t i = 1; i + 1 < kids.size(); i++) recvReduceCopy(lane, kids[i], result, result);
  recvReduceCopySend(lane, kids.back(), kids[0], result, result, kPost);
  for (size_t i = 1; i < kids.size(); i++) send(lane, kids[i], result);
}

// A node with several children keeps its partial sum in the chunk's output, which the
// broadcast overwrites.
void reduceUp(LaneSpec& lane, const TreeNode& node, int chunk) {
  const std::vector<int>& kids = node.kids;
  BufRef mine = in(chunk), partial = out(chunk);
  if (kids.empty()) {
    send(lane, node.parent, mine, kPre);
  } else if (kids.size() == 1) {
    recvReduceSend(lane, kids[0], node.parent, mine, kPre);
  } else {
    recvReduceCopy(lane, kids[0], mine, partial, kPre);
    for (size_t i = 1; i + 1 < kids.size(); i++) recvReduceCopy(lane, kids[i], partial, partial);
    recvReduceSend(lane, kids.back(), node.parent, partial);
  }
}

void broadcastDown(LaneSpec& lane, const TreeNode& node, int chunk) {
  BufRef result = out(chunk);
  if (node.kids.empty()) {
    recv(lane, node.parent, result);
    return;
  }
  recvSend(lane, node.parent, node.kids[0], result);
  for (size_t i = 1; i < node.kids.size(); i++) send(lane, node.kids[i], result);
}

LaneSpec treeLane(const TreeNode& node, int tree) {
  LaneSpec lane = directLane(Layout::Split, 2 * kTreeChunks, tree);
  if (node.parent < 0) {
    for (int k = 0; k < kTreeChunks; k++) rootChunk(lane, node, chunkOf(k, tree));
    return lane;
  }
  const int lookahead = 2 * node.depth;
  for (int k = 0; k < kTreeChunks + lookahead; k++) {
    if (k < kTreeChunks) reduceUp(lane, node, chunkOf(k, tree));
    if (k >= lookahead) broadcastDown(lane, node, chunkOf(k - lookahead, tree));
  }
  return lane;
}

}  // namespace

RankPlan treeAllReduce(int r, const RingOrder& order, const std::vector<TreeShape>& trees) {
  if (order.size() == 1) return localCopy("tree", Layout::Split, in(0), out(0), kPre | kPost);
  if (trees.empty()) return RankPlan{"tree", {treeLane(nodeOf(r, order, 0), 0), treeLane(nodeOf(r, order, 1), 1)}};
  const size_t n = size_t(order.size());
  if (trees.size() != 2 || trees[0].parent.size() != n || trees[1].parent.size() != n || trees[0].children.size() != n ||
      trees[1].children.size() != n)
    throw Error(ErrorCode::Internal, "tree: rank " + std::to_string(r) + " was given " + std::to_string(trees.size()) +
                                         " tree shapes, not two over " + std::to_string(n) + " ranks");
  return RankPlan{"tree", {treeLane(nodeOf(r, trees[0]), 0), treeLane(nodeOf(r, trees[1]), 1)}};
}

}  // namespace tutti::plan
