// Every registered algorithm, for every collective it serves, proved by the verifier over many
// rank counts and roots, in and out of place, with the smallest and the default FIFO.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/registry.h"
#include "algorithms/ring_order.h"
#include "algorithms/verify.h"
#include "base/error.h"
#include "topology/channels.h"

using namespace tutti::plan;

namespace {

bool rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter || c == Coll::Send ||
         c == Coll::Recv;
}

// Roots worth trying at n ranks: the ends, the middle, and an odd one.
std::vector<int> rootsFor(Coll c, int n) {
  if (!rooted(c)) return {0};
  std::vector<int> roots{0};
  for (int r : {n - 1, n / 2, n / 3 + 1})
    if (r > 0 && r < n && std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
  return roots;
}

void verifyAll(const std::string& name, const std::vector<int>& counts) {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* a = registry.find(name);
  REQUIRE(a);
  for (Coll coll : a->colls)
    for (int n : counts)
      for (int root : rootsFor(coll, n))
        for (int capacity : {2, 8}) {
          std::string err = verifyAlgorithm(*a, coll, n, root, 0, capacity);
          INFO("FIFO capacity " << capacity);
          REQUIRE(err == "");
        }
}

std::vector<int> range(int from, int to) {
  std::vector<int> v;
  for (int n = from; n <= to; n++) v.push_back(n);
  return v;
}

const std::vector<int> kLarge{96, 128, 255, 256};

}  // namespace

TEST_CASE("every algorithm is registered under the names the team uses", "[library]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  for (const char* name : {"ring", "direct", "tree", "recdoubling", "rabenseifner", "hierarchical", "bruck", "pairwise",
                           "pat", "binomial", "chain", "oneshot"})
    CHECK(registry.find(name));
  CHECK(registry.find("chain")->deterministic);
  CHECK(registry.find("oneshot")->deterministic);
  CHECK(registry.find("recdoubling")->deterministic);
  CHECK_FALSE(registry.find("ring")->deterministic);
}

#define ALGORITHM_CASES(NAME)                                                                       \
  TEST_CASE(NAME " plans verify for 1 to 64 ranks", "[library]") { verifyAll(NAME, range(1, 64)); } \
  TEST_CASE(NAME " plans verify for 96 to 256 ranks", "[library][large]") { verifyAll(NAME, kLarge); }

ALGORITHM_CASES("ring")
ALGORITHM_CASES("direct")
ALGORITHM_CASES("tree")
ALGORITHM_CASES("recdoubling")
ALGORITHM_CASES("rabenseifner")
ALGORITHM_CASES("hierarchical")
ALGORITHM_CASES("bruck")
ALGORITHM_CASES("pairwise")
ALGORITHM_CASES("pat")
ALGORITHM_CASES("binomial")
ALGORITHM_CASES("chain")
ALGORITHM_CASES("oneshot")

TEST_CASE("hierarchical plans verify for every node size", "[library]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* a = registry.find("hierarchical");
  REQUIRE(a);
  for (int n = 1; n <= 48; n++)
    for (int g = 0; g <= n; g++) {
      if (g > 1 && n % g != 0 && g != 5) continue;  // non-divisors fall back to the ring; try one
      INFO(n << " ranks, " << g << " per node");
      REQUIRE(verifyAlgorithm(*a, Coll::AllReduce, n, 0, g) == "");
    }
  for (auto [n, g] : std::vector<std::pair<int, int>>{{128, 8}, {256, 8}, {256, 16}, {96, 4}}) {
    INFO(n << " ranks, " << g << " per node");
    REQUIRE(verifyAlgorithm(*a, Coll::AllReduce, n, 0, g, 2) == "");
  }
}

TEST_CASE("verifying any algorithm at 64 ranks takes well under a second", "[library]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  for (const Algorithm& a : registry.all())
    for (Coll coll : a.colls) {
      auto start = std::chrono::steady_clock::now();
      REQUIRE(verifyAlgorithm(a, coll, 64, 5) == "");
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO(a.name << " " << collName(coll) << ": " << seconds << " s in and out of place");
      CHECK(seconds < 0.5);
    }
}

namespace {

// The ring algorithm with every request's ring order replaced by `order`.
Algorithm alongOrder(const Algorithm& ring, const std::vector<int>& order) {
  Algorithm a = ring;
  a.build = [build = ring.build, order](const PlanRequest& q) {
    PlanRequest along = q;
    along.ring = order;
    return build(along);
  };
  return a;
}

std::string orderText(const std::vector<int>& order) {
  std::string s;
  for (int r : order) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

// Four shuffled orders of the ranks for every rank count from 1 to 16, the same in every run.
std::vector<std::vector<int>> randomOrders(uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<std::vector<int>> orders;
  for (int n = 1; n <= 16; n++)
    for (int trial = 0; trial < 4; trial++) {
      std::vector<int> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), random);
      orders.push_back(order);
    }
  return orders;
}

}  // namespace

TEST_CASE("ring plans verify along random ring orders for 1 to 16 ranks", "[library][ring-order]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* ring = registry.find("ring");
  REQUIRE(ring);
  for (const std::vector<int>& order : randomOrders(20261202)) {
    const int n = int(order.size());
    Algorithm along = alongOrder(*ring, order);
    for (Coll coll : ring->colls)
      for (int root : rootsFor(coll, n))
        for (int capacity : {2, 8}) {
          INFO(n << " ranks, order " << orderText(order) << ", " << collName(coll) << " root " << root << ", FIFO "
                 << capacity);
          REQUIRE(verifyAlgorithm(along, coll, n, root, 0, capacity) == "");
        }
    // The plans walk the order: each rank sends to the rank after it and receives from the one before.
    for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter}) {
      if (n == 1) break;
      for (int i = 0; i < n; i++) {
        int r = order[size_t(i)];
        RankPlan p = along.build(PlanRequest{coll, r, n, 0, 0, {}});
        INFO(collName(coll) << " rank " << r << ": " << describe(p));
        REQUIRE(p.lanes.size() == 1);
        CHECK(p.lanes[0].sendPeers == std::vector<int>{order[size_t((i + 1) % n)]});
        CHECK(p.lanes[0].recvPeers == std::vector<int>{order[size_t((i + n - 1) % n)]});
      }
    }
  }
}

TEST_CASE("tree plans verify along random ring orders for 1 to 16 ranks", "[library][ring-order]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* tree = registry.find("tree");
  REQUIRE(tree);
  for (const std::vector<int>& order : randomOrders(20261203))
    for (int capacity : {2, 8}) {
      INFO(order.size() << " ranks, order " << orderText(order) << ", FIFO " << capacity);
      REQUIRE(verifyAlgorithm(alongOrder(*tree, order), Coll::AllReduce, int(order.size()), 0, 0, capacity) == "");
    }
}

TEST_CASE("tree plans along an order that groups each host's ranks cross between hosts less", "[library][ring-order]") {
  // 8 ranks placed round robin on two hosts (rank r on host r % 2), as a cyclic launcher does.
  // In-order trees over places 0..7 (root 4; 2 and 6; then 1, 3, 5, 7; 0 under 1), tree 1 shifted
  // by one place. Along rank order 5 of tree 0's 7 edges join ranks of different hosts, and 5 of
  // tree 1's; along 0 2 4 6 1 3 5 7 (each host's ranks together, as the topology's ring has them)
  // only the root's edge to 2 in tree 0, and 3 edges in tree 1 (its places 7, 0, 1, 2 on one host).
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* tree = registry.find("tree");
  REQUIRE(tree);
  auto crossingEdges = [&](const std::vector<int>& order) {
    std::set<std::pair<int, int>> edges;  // undirected, per tree (lane)
    Algorithm along = alongOrder(*tree, order);
    for (int r = 0; r < 8; r++) {
      RankPlan p = along.build(PlanRequest{Coll::AllReduce, r, 8, 0, 0, {}});
      REQUIRE(p.lanes.size() == 2);
      for (size_t t = 0; t < 2; t++)
        for (int peer : p.lanes[t].sendPeers)
          if (peer % 2 != r % 2) edges.insert({int(t) * 100 + std::min(r, peer), std::max(r, peer)});
    }
    return edges.size();
  };
  CHECK(crossingEdges({0, 1, 2, 3, 4, 5, 6, 7}) == 10);
  CHECK(crossingEdges({0, 2, 4, 6, 1, 3, 5, 7}) == 4);
}

namespace {

// Tree edges (undirected, per lane) that join ranks of different nodes, over every rank's plan.
size_t crossingTreeEdges(const Algorithm& tree, int n, int ranksPerNode, const std::vector<int>& nodeOf) {
  std::set<std::pair<int, int>> edges;
  for (int r = 0; r < n; r++) {
    RankPlan p = tree.build(PlanRequest{Coll::AllReduce, r, n, 0, ranksPerNode, {}});
    REQUIRE(p.lanes.size() == 2);
    for (size_t t = 0; t < 2; t++)
      for (int peer : p.lanes[t].sendPeers)
        if (nodeOf[size_t(peer)] != nodeOf[size_t(r)])
          edges.insert({int(t) * 100000 + std::min(r, peer), std::max(r, peer)});
  }
  return edges.size();
}

}  // namespace

TEST_CASE("tree plans across nodes follow node trees: verified, one crossing per node edge", "[library][node-tree]") {
  // Blocks of g contiguous ranks per node (the last may be short): each tree joins the nodes'
  // heads by nodeCount - 1 edges and keeps every other edge inside a node.
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* tree = registry.find("tree");
  REQUIRE(tree);
  for (int g = 1; g <= 9; g++)
    for (int n = g + 1; n <= 64; n += (n < 24 ? 1 : 7)) {
      INFO(n << " ranks, " << g << " per node");
      for (int capacity : {2, 8}) REQUIRE(verifyAlgorithm(*tree, Coll::AllReduce, n, 0, g, capacity) == "");
      std::vector<int> nodeOf;
      for (int r = 0; r < n; r++) nodeOf.push_back(r / g);
      const size_t nodes = size_t((n + g - 1) / g);
      CHECK(crossingTreeEdges(*tree, n, g, nodeOf) == 2 * (nodes - 1));
    }
  for (int n : kLarge) REQUIRE(verifyAlgorithm(*tree, Coll::AllReduce, n, 0, 8, 2) == "");
}

TEST_CASE("given node trees over round-robin placed ranks cross between hosts once per tree", "[library][node-tree]") {
  // 8 ranks round robin on two hosts (rank r on host r % 2): the topology's chains are 0 2 4 6
  // and 1 3 5 7; along its ring order the in-order trees crossed 4 times (test above).
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* tree = registry.find("tree");
  REQUIRE(tree);
  std::vector<TreeShape> shapes;
  for (bool mirrored : {false, true}) {
    tutti::topo::Tree t = tutti::topo::treeOverChains({{0, 2, 4, 6}, {1, 3, 5, 7}}, 8, mirrored);
    shapes.push_back({t.parent, t.children});
  }
  Algorithm given = *tree;
  given.build = [build = tree->build, shapes](const PlanRequest& q) {
    PlanRequest with = q;
    with.ring = {0, 2, 4, 6, 1, 3, 5, 7};
    with.trees = shapes;
    return build(with);
  };
  for (int capacity : {2, 8}) REQUIRE(verifyAlgorithm(given, Coll::AllReduce, 8, 0, 0, capacity) == "");
  CHECK(crossingTreeEdges(given, 8, 0, {0, 1, 0, 1, 0, 1, 0, 1}) == 2);
  // Rank 0 heads host 0 and its own subtree (4, under it 2 and 6); rank 1 heads host 1.
  RankPlan p0 = given.build(PlanRequest{Coll::AllReduce, 0, 8, 0, 0, {}});
  std::vector<int> peers = p0.lanes[0].recvPeers;
  std::sort(peers.begin(), peers.end());
  CHECK(peers == std::vector<int>{1, 4});
  // A shape of the wrong size is an internal error naming the rank, not a bad plan.
  std::vector<TreeShape> wrong{shapes[0]};
  CHECK_THROWS_WITH(treeAllReduce(3, RingOrder(8, {}), wrong),
                    Catch::Contains("rank 3") && Catch::Contains("two over 8 ranks"));
}

TEST_CASE("a ring order that is not a permutation of the ranks is refused, saying why", "[library][ring-order]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* ring = registry.find("ring");
  REQUIRE(ring);
  CHECK_THROWS_WITH(ring->build(PlanRequest{Coll::AllReduce, 0, 4, 0, 0, {0, 1, 2}}), Catch::Contains("has 3 ranks"));
  CHECK_THROWS_WITH(ring->build(PlanRequest{Coll::AllReduce, 0, 4, 0, 0, {0, 1, 1, 3}}), Catch::Contains("rank 1"));
  CHECK_THROWS_WITH(ring->build(PlanRequest{Coll::AllReduce, 0, 4, 0, 0, {0, 1, 4, 3}}), Catch::Contains("rank 4"));
  RingOrder order(4, {2, 0, 3, 1});
  CHECK(order.step(1, 1) == 2);
  CHECK(order.step(2, -1) == 1);
  CHECK(order.positionOf(3) == 2);
  CHECK(RingOrder(3, {}).step(2, 1) == 0);
}

namespace {

// Messages a plan sends and receives per tile: a joined run counts once.
struct Messages {
  int sent = 0, received = 0;
};
Messages messagesOf(const RankPlan& plan) {
  Messages m;
  for (const LaneSpec& lane : plan.lanes)
    for (size_t s = 0; s < lane.steps.size(); s += joinedRunLength(lane.steps, s)) {
      m.sent += opSends(lane.steps[s].op);
      m.received += opReceives(lane.steps[s].op);
    }
  return m;
}

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

}  // namespace

TEST_CASE("Bruck and PAT send and receive ceil(log2 n) messages per rank, a round's blocks joined", "[library][join]") {
  struct Generator {
    const char* name;
    RankPlan (*build)(int, int);
  };
  for (Generator g : {Generator{"bruck alltoall", bruckAlltoAll}, Generator{"bruck allgather", bruckAllGather},
                      Generator{"pat allgather", patAllGather}, Generator{"pat reducescatter", patReduceScatter}})
    for (int n = 1; n <= 64; n++)
      for (int r : {0, n / 2, n - 1}) {
        INFO(g.name << " at " << n << " ranks, rank " << r);
        RankPlan plan = g.build(r, n);
        Messages m = messagesOf(plan);
        CHECK(m.sent == ceilLog2(n));
        CHECK(m.received == ceilLog2(n));
        // and the blocks: all-to-all moves about n/2 per round, the others n - 1 in all
        size_t blocks = 0;
        for (const Step& s : plan.lanes[0].steps) blocks += opSends(s.op);
        if (std::string(g.name) != "bruck alltoall") CHECK(blocks == size_t(n - 1));
        CHECK(joinWidth(plan) <= size_t(std::max(1, n / 2)));
      }
}
