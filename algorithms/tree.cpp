// The double binary tree algorithm: its plans and its analytic cost (registry entry "tree").
//
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
#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/ring_order.h"
#include "algorithms/steps.h"
#include "algorithms/tree_shape.h"
#include "base/error.h"
#include "topology/channels.h"

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
    recvReduceCopySend(lane, kids[0], kids[0], mine, result, kPre | kPost | kDirect);
    return;
  }
  recvReduceCopy(lane, kids[0], mine, result, kPre);
  for (size_t i = 1; i + 1 < kids.size(); i++) recvReduceCopy(lane, kids[i], result, result);
  recvReduceCopySend(lane, kids.back(), kids[0], result, result, kPost | kDirect);
  for (size_t i = 1; i < kids.size(); i++) send(lane, kids[i], result, kDirect);
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
  // The result is final once it arrives: the sends down may be direct (plan.h).
  recvSend(lane, node.parent, node.kids[0], result, kDirect);
  for (size_t i = 1; i < node.kids.size(); i++) send(lane, node.kids[i], result, kDirect);
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
  if (trees.size() != 2 || trees[0].parent.size() != n || trees[1].parent.size() != n ||
      trees[0].children.size() != n || trees[1].children.size() != n)
    throw Error(ErrorCode::Internal, "tree: rank " + std::to_string(r) + " was given " + std::to_string(trees.size()) +
                                         " tree shapes, not two over " + std::to_string(n) + " ranks");
  return RankPlan{"tree", {treeLane(nodeOf(r, trees[0]), 0), treeLane(nodeOf(r, trees[1]), 1)}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

// Double binary tree all-reduce (tree.cpp): two lanes (one per tree, each kTreeChunks chunks
// of a tile), each reducing later chunks up the tree while earlier ones come down, and
// finishing a tile before the next: a tile costs its first chunk's way up plus the way down,
// then each further chunk at the pace of the busiest port or of the round trip that a rank's
// lookahead shares out, unless the busiest rank's own steps take longer.
// On one node the trees are in-order over positions [lo, hi) with the middle as root (tree 1's
// position p is rank p + 1): every edge is local, so a subtree's times depend only on its size
// and the recursion meets O(log n) distinct subtrees. Across nodes they are node trees
// (registry.cpp, topo::treeOverChains): a binary tree of the nodes' heads, each head also
// holding its own node's other ranks as an in-order tree; see nodeTree().
struct TreeModel : sim::CostModel {
  struct TreeTimes {
    double up = 0;    // from the tile's start until the subtree's root has its chunk's send
                      // issued (its parent adds the transfer and the latency)
    double down = 0;  // from the subtree's root holding the result until its last leaf has it
    double pace = 0;  // the busiest rank of the subtree: its steps' time per chunk
    int depth = 0;    // of its deepest leaf below its root
  };
  struct TreeKid {
    TreeTimes times;
    bool local;  // the edge to it stays inside a node
  };

  // A rank's times from its children's, served in the given order (tree.cpp): up, it receives
  // and reduces each child's chunk in turn, then sends (link `upLocal`) to its parent; down, it
  // receives from the parent and sends to each child in turn, the first in the same step. The
  // root's first send down is its last receive's step (RecvReduceCopySend).
  TreeTimes rankTimes(const std::vector<TreeKid>& kids, bool root, bool upLocal, double c) const {
    // both trees and every channel run the same steps at once: a transfer shares its port
    auto x = [&](bool local) { return xfer(c, local, (1.0 + nch) / 2); };
    TreeTimes result;
    // per chunk: a leaf sends up and receives; an inner rank takes a step per child each way;
    // the root, one per child and one more per child after the first. Transfers: up, and one
    // per child.
    double kidSends = 0;
    for (const TreeKid& k : kids) kidSends += x(k.local);
    double children = double(kids.size());
    double steps = root ? 2 * children - 1 : 2 * std::max(1.0, children);
    result.pace = steps * o + kidSends + (root ? 0 : x(upLocal));
    for (const TreeKid& k : kids) {
      result.pace = std::max(result.pace, k.times.pace);
      result.depth = std::max(result.depth, k.times.depth + 1);
    }
    if (kids.empty()) {
      result.up = o;
      result.down = o;
      return result;
    }
    double t = 0;  // receive from each child in turn
    for (const TreeKid& k : kids) t = std::max(t, k.times.up + x(k.local) + latency(k.local)) + o;
    result.up = t;
    double sent = root ? t : 0, done = 0;  // then pass the result to the children in turn
    for (size_t i = 0; i < kids.size(); i++) {
      const TreeKid& k = kids[i];
      sent += (root && i == 0 ? 0 : o) + x(k.local);
      done = std::max(done, sent + latency(k.local) + k.times.down);
    }
    result.down = root ? done - t : done;
    return result;
  }

  // The fabric's nodes in node order, as the node trees take them: blocks of perNode()
  // contiguous ranks, the last possibly short, or counted from the fabric's placement.
  struct NodeSizes {
    long long count = 1;
    long long full = 0;  // ranks of every node but the last
    long long last = 0;
    std::vector<long long> each;  // every node's, when they differ before the last
    long long of(long long node) const { return !each.empty() ? each[size_t(node)] : node + 1 == count ? last : full; }
  };
  NodeSizes nodeSizes() const {
    NodeSizes s;
    if (f.nodeOfRank.empty()) {
      s.full = perNode();
      s.count = (n + s.full - 1) / s.full;
      s.last = n - (s.count - 1) * s.full;
      return s;
    }
    std::vector<long long> counted(size_t(f.nodes), 0);
    for (int node : f.nodeOfRank) counted[size_t(node)]++;
    for (long long ranks : counted)
      if (ranks > 0) s.each.push_back(ranks);  // a node without ranks is not in the trees
    s.count = (long long)s.each.size();
    s.full = s.each.front();
    s.last = s.each.back();
    if (std::all_of(s.each.begin(), s.each.end() - 1, [&](long long r) { return r == s.full; })) s.each.clear();
    return s;
  }

  // Node x sits at position x + 1 of a binary tree over positions 1..N whose root in any range
  // of positions is the one divisible by the largest power of two (topo::nodeTreeParent); the
  // second tree mirrors the positions (N even) or shifts them by one (N odd), so that a node
  // inner in one tree is a leaf in the other.
  struct NodeOrder {
    long long count;
    bool mirrored;
    long long nodeAt(long long pos) const { return topo::nodeAtTreePosition(int(pos), int(count), mirrored); }
    long long positionOf(long long node) const { return topo::nodeTreePosition(int(node), int(count), mirrored); }
    static long long rootOf(long long lo, long long hi) {
      long long b = 1;
      while (2 * b <= hi) b *= 2;
      while (hi / b * b < lo) b /= 2;
      return hi / b * b;
    }
  };

  struct TreeWalk {
    double c;
    const NodeSizes& sizes;
    NodeOrder order;
    std::map<std::pair<long long, bool>, TreeTimes> local;
    std::map<std::tuple<long long, long long, int>, TreeTimes> nodes;
  };

  // An in-order tree of `size` ranks on one node: the whole tree on one node, or a node's ranks
  // below its head.
  TreeTimes localTree(TreeWalk& w, long long size, bool root) const {
    auto key = std::make_pair(size, root);
    if (auto it = w.local.find(key); it != w.local.end()) return it->second;
    std::vector<TreeKid> kids;
    for (long long kid : {size / 2, size - size / 2 - 1})
      if (kid > 0) kids.push_back({localTree(w, kid, false), true});
    TreeTimes result = rankTimes(kids, root, true, w.c);
    w.local.emplace(key, result);
    return result;
  }

  // The node tree over positions [lo, hi] (1-based): its root node's head has its own node's
  // ranks as first child (a local edge), then its child nodes' heads in node order (network
  // edges). A range is a full subtree of 2b - 1 positions around its root (b its lowest set bit),
  // cut at N on the right; when every node but the last is the same size, its times depend only
  // on b, its length right of the root and whether it holds position 1 or N (where the last node
  // sits, and where the mirrored trees' node order turns), so the walk meets O(log N) distinct
  // subtrees. Nodes of other sizes are keyed by the exact range: O(N).
  TreeTimes nodeTree(TreeWalk& w, long long lo, long long hi) const {
    const long long count = w.sizes.count;
    long long top = NodeOrder::rootOf(lo, hi);
    auto key = w.sizes.each.empty() ? std::make_tuple(top & -top, hi - top, 2 * (lo == 1) + (hi == count))
                                    : std::make_tuple(lo, hi, -1);
    if (auto it = w.nodes.find(key); it != w.nodes.end()) return it->second;
    std::vector<TreeKid> kids;
    long long ranks = w.sizes.of(w.order.nodeAt(top));
    if (ranks > 1) kids.push_back({localTree(w, ranks - 1, false), true});
    std::vector<std::pair<long long, long long>> below;
    if (lo < top) below.emplace_back(lo, top - 1);
    if (top < hi) below.emplace_back(top + 1, hi);
    auto nodeOf = [&](const std::pair<long long, long long>& r) {
      return w.order.nodeAt(NodeOrder::rootOf(r.first, r.second));
    };
    if (below.size() == 2 && nodeOf(below[1]) < nodeOf(below[0])) std::swap(below[0], below[1]);
    for (auto [klo, khi] : below) kids.push_back({nodeTree(w, klo, khi), false});
    TreeTimes result = rankTimes(kids, lo == 1 && hi == count, false, w.c);
    w.nodes.emplace(key, result);
    return result;
  }

  // The most chunks one rank sends, and one node's NIC pool carries out, for each chunk of a
  // tree (both trees together): each tree edge carries a chunk up and one down. These bound a
  // full pipeline's pace. A chunk's way up leaves a node once per edge whose child is there and
  // whose parent is not, and its way down once per such edge the other way: every chunk that
  // leaves a node in one direction leaves at the same time (all trees and channels start
  // together) and shares that node's NIC pool, and the way down waits for the way up.
  struct TreeLoad {
    double rankSends = 5;
    double nodeNetSends = 4;
    double nodeUpSends = 2;    // the most chunks leaving one node on the way up
    double nodeDownSends = 2;  // and on the way down
  };
  // One node: the in-order trees counted edge by edge up to kExactPathRanks ranks; above, the
  // counts of a large one (a rank inner in both trees).
  long long treeRank(long long pos, int tree) const { return (pos + tree) % n; }
  void countEdges(long long lo, long long hi, long long parent, int tree, std::vector<double>& sends) const {
    if (lo >= hi) return;
    long long mid = (lo + hi) / 2;
    if (parent >= 0) {
      sends[size_t(treeRank(mid, tree))]++;
      sends[size_t(treeRank(parent, tree))]++;
    }
    countEdges(lo, mid, mid, tree, sends);
    countEdges(mid + 1, hi, mid, tree, sends);
  }
  TreeLoad treeLoad() const {
    if (n > kExactPathRanks) return {};
    std::vector<double> sends(size_t(n), 0);
    for (int tree = 0; tree < 2; tree++) countEdges(0, n, -1, tree, sends);
    return {*std::max_element(sends.begin(), sends.end()), 0, 0, 0};
  }
  // Node trees, node by node: a head's edges are its parent's (network, unless the root node),
  // its own node's ranks' (local) and up to two child nodes' (network); a node's other ranks
  // form the same in-order tree in both trees, whose ranks have at most 3 edges.
  TreeLoad nodeTreeLoad(const NodeSizes& sizes) const {
    TreeLoad load{0, 0, 0, 0};
    const long long count = sizes.count;
    const long long top = NodeOrder::rootOf(1, count);
    for (long long node = 0; node < count; node++) {
      long long below = sizes.of(node) - 1;
      double up = 0, down = 0;
      for (bool mirrored : {false, true}) {
        long long pos = NodeOrder{count, mirrored}.positionOf(node);
        long long b = pos & -pos;  // children at pos -+ b/2, the right one cut off at N
        up += pos != top ? 1 : 0;
        down += b == 1 ? 0 : pos < count ? 2 : 1;
      }
      double head = up + down + (below > 0 ? 2 : 0);
      load.rankSends = std::max({load.rankSends, head, 2.0 * double(std::min<long long>(below, 3))});
      load.nodeNetSends = std::max(load.nodeNetSends, up + down);  // every crossing edge, either way
      load.nodeUpSends = std::max(load.nodeUpSends, up);
      load.nodeDownSends = std::max(load.nodeDownSends, down);
    }
    return load;
  }

  std::optional<double> estimate() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    const int k = plan::kTreeChunks;
    const NodeSizes sizes = multiNode() ? nodeSizes() : NodeSizes{};
    const TreeLoad load = multiNode() ? nodeTreeLoad(sizes) : treeLoad();
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(2 * k));
    auto perTile = [&](double c, bool first) {
      double worst = 0;
      for (bool mirrored : {false, true}) {
        TreeWalk w{c, sizes, {sizes.count, mirrored}, {}, {}};
        TreeTimes whole = multiNode() ? nodeTree(w, 1, sizes.count) : localTree(w, n, true);
        // The first chunk's way up and down, then the others at the pace of the busiest port or
        // of the round trip shared by the chunks a rank runs ahead (2 per level); or the busiest
        // rank's steps for all chunks, when they take longer.
        double fill = whole.up + whole.down;
        // The first tile's crossings: both trees go up together, and the chunks leaving a node
        // on the way up queue on its NIC pool before any comes down (the walk above charges one
        // crossing per hop): a floor, not a sum, since deeper crossings leave later. Later tiles
        // find the trees apart, one's way down beside the other's way up (portFloor below).
        if (first && multiNode())
          fill = std::max(fill, nch * c * (load.nodeUpSends + load.nodeDownSends) / portRate(false));
        double pace = std::max(fill / double(2 * whole.depth + 1), portFloor(c, load.rankSends, load.nodeNetSends));
        worst = std::max({worst, fill + double(k - 1) * pace, double(k) * whole.pace});
      }
      return std::max(worst, portFloor(c, load.rankSends * k, load.nodeNetSends * k));
    };
    return serialTiles(t, perTile);
  }
};

}  // namespace

std::optional<double> treeCost(const sim::CostModel& model) { return TreeModel{model}.estimate(); }

}  // namespace tutti::plan
