// The binomial-tree algorithm: its plans and its analytic cost (registry entry "binomial").
//
// Binomial-tree broadcast and reduce, rooted anywhere.
//
// Cost with m bytes: ceil(log2 n) levels; along the critical path the root sends to
// ceil(log2 n) children one after another: ceil(log2 n)(alpha + c beta) per tile of c bytes,
// and tiles pipeline down the tree, so about (ceil(log2 n) + m/c - 1)(alpha + c beta). Reduce
// is the same tree upwards, plus a reduction of c bytes per child at each node.
#include <algorithm>
#include <optional>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
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
  for (int j = v == 0 ? 0 : highestBit(v) + 1; v + (1 << j) < n; j++)
    node.children.push_back(mod(v + (1 << j) + root, n));
  return node;
}

}  // namespace

// The largest subtree is served first, since it has the longest way to go.
RankPlan binomialBroadcast(int r, int n, int root) {
  Node node = nodeOf(r, n, root);
  std::vector<int> kids(node.children.rbegin(), node.children.rend());
  LaneSpec lane = directLane(Layout::Whole);
  if (node.parent < 0) {
    copy(lane, in(), out());                          // skipped in place
    for (int c : kids) send(lane, c, in(), kDirect);  // the broadcast's data is final: direct (plan.h)
  } else if (kids.empty()) {
    recv(lane, node.parent, out());
  } else {
    recvSend(lane, node.parent, kids[0], out(), kDirect);
    for (size_t i = 1; i < kids.size(); i++) send(lane, kids[i], out(), kDirect);
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
  for (size_t i = 0; i + 1 < kids.size(); i++)
    recvReduceCopy(lane, kids[i], i == 0 ? in() : scratch(0), scratch(0), i == 0 ? kPre : 0);
  bool only = kids.size() == 1;
  recvReduceSend(lane, kids.back(), node.parent, only ? in() : scratch(0), only ? kPre : 0);
  return RankPlan{"binomial", {lane}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct BinomialModel : sim::CostModel {
  // A rank's work per tile along the chain of largest subtrees (the root has the most
  // children): broadcast sends to every child; reduce receives from each and sends up.
  double busiest(double c, bool broadcast) const {
    double most = 0;
    long long v = 0;
    for (int h = -1;; h++) {
      long long kids = childCount(v, h);
      double work = 0;
      if (broadcast) {
        work = (v == 0 ? o + copy(c) : 0) + sendsTo(c, v, h);
      } else {
        work = double(std::max<long long>(kids, 1)) * o;
        if (v != 0) work += xfer(c, !crosses(v, v - (1LL << std::max(0, h))), 1.0);
      }
      most = std::max(most, work);
      if (kids == 0) return most;
      v += 1LL << (h + 1);
    }
  }

  // The children of node 0's ranks that sit on other nodes (ranks are placed in order, so
  // they are the children v + 2^j with 2^j >= ranks per node).
  long long nicChildren() const {
    if (!multiNode()) return 0;
    long long g = perNode(), count = 0;
    for (long long d = 1; d < n; d <<= 1)
      if (d >= g) count += std::min(g, n - d);
    return count;
  }

  // One send per child of v, each o + x on its own link.
  double sendsTo(double c, long long v, int h) const {
    double time = 0;
    for (int j = h + 1; v + (1LL << j) < n; j++) time += o + xfer(c, !crosses(v, v + (1LL << j)), 1.0);
    return time;
  }

  // Children of relative rank v (highest bit h, or -1 for the root): v + 2^j < n, j > h.
  long long childCount(long long v, int h) const {
    long long count = 0;
    for (int j = h + 1; v + (1LL << j) < n; j++) count++;
    return count;
  }

  // Broadcast, from the moment relative rank v (highest bit h) holds a chunk: v sends to its
  // children largest distance first, so the largest subtree (v + 2^(h+1)) is served last and
  // carries the critical chain; the other children are taken as leaves (their subtrees are
  // small), which keeps this O(log^2 n).
  double broadcastFrom(double c, long long v, int h) const {
    double sent = 0, done = o;
    for (int j = 62; j > h; j--) {
      long long kid = v + (1LL << j);
      if ((1LL << j) >= n || kid >= n) continue;
      bool local = !crosses(v, kid);
      sent += o + xfer(c, local, 1.0);
      double below = j == h + 1 ? broadcastFrom(c, kid, j) : o;
      done = std::max(done, sent + latency(local) + below);
    }
    return done;
  }
  double broadcastPath(double c) const { return o + copy(c) + broadcastFrom(c, 0, -1); }

  // Reduce: v receives from its children smallest distance (largest subtree) first, then sends
  // up; returns when v's send is through (the root: its last receive). Children other than
  // the first are taken as leaves.
  double reduceUp(double c, long long v, int h) const {
    double t = 0;
    bool any = false;
    for (int j = h + 1; (1LL << j) < n && v + (1LL << j) < n; j++) {
      long long kid = v + (1LL << j);
      bool local = !crosses(kid, v);
      double sent = j == h + 1 ? reduceUp(c, kid, j) : o + xfer(c, local, 1.0);
      t = std::max(t, sent + latency(local)) + o;
      any = true;
    }
    if (v == 0) return t;
    long long parent = v - (1LL << std::max(0, h));
    double x = xfer(c, !crosses(v, parent), 1.0);
    return any ? t + x : o + x;
  }
  double reducePath(double c) const { return reduceUp(c, 0, -1); }

  // Binomial broadcast / reduce (binomial.cpp), root 0: relative rank v's children are
  // v + 2^j for j above v's highest bit. The critical path is the chain 0 -> 1 -> 3 -> 7 ...
  // of the largest subtrees; tiles pipeline down the tree at the pace of the busiest rank.
  std::optional<double> estimate() const {
    if (coll != Coll::Broadcast && coll != Coll::Reduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    if (t.count == 0) return 0.0;
    bool broadcast = coll == Coll::Broadcast;
    // the root's port carries a chunk per child, node 0's NIC pool one per child off the node
    double rootChunks = double(childCount(0, -1));
    auto floor = [&](double c) { return portFloor(c, rootChunks, double(nicChildren())); };
    auto path = [&](double c) {
      double bound = floor(c) + 2 * o + latency(!multiNode());  // the ports, then the last chunk's way
      return std::max((broadcast ? broadcastPath(c) : reducePath(c)) + stagger(c, true), bound);
    };
    auto period = [&](double c) { return std::max(busiest(c, broadcast), floor(c)); };
    return double(t.count - 1) * period(double(t.chunk)) + path(double(t.lastChunk));
  }
};

}  // namespace

std::optional<double> binomialCost(const sim::CostModel& model) { return BinomialModel{model}.estimate(); }

}  // namespace tutti::plan
