// Rings, double binary trees and channel counts over the global topology.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <set>

#include "base/error.h"
#include "tests/topology/topology_support.h"
#include "topology/channels.h"
#include "topology/exchange.h"
#include "topology/synthetic.h"
#include "topology/xml.h"

using namespace tutti::topo;

namespace {

// Every rank exactly once.
bool isPermutation(std::vector<int> ranks, size_t n) {
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  std::sort(ranks.begin(), ranks.end());
  return ranks == all;
}

int crossings(const GlobalSystem& system, const std::vector<int>& ring) {
  int count = 0;
  for (size_t i = 0; i < ring.size(); ++i)
    count += system.ranks[ring[i]].node != system.ranks[ring[(i + 1) % ring.size()]].node;
  return count;
}

// Each rank reaches the root by parents without a cycle; children mirror parents.
void checkTree(const Tree& tree, size_t n) {
  REQUIRE(tree.parent.size() == n);
  CHECK(std::count(tree.parent.begin(), tree.parent.end(), -1) == 1);
  CHECK(tree.parent[tree.root] == -1);
  for (size_t r = 0; r < n; ++r) {
    int at = static_cast<int>(r);
    for (size_t steps = 0; at != tree.root && steps <= n; ++steps) at = tree.parent[at];
    CHECK(at == tree.root);
    for (int child : tree.children[r]) CHECK(tree.parent[child] == static_cast<int>(r));
    if (tree.parent[r] >= 0) {
      const auto& siblings = tree.children[tree.parent[r]];
      CHECK(std::count(siblings.begin(), siblings.end(), static_cast<int>(r)) == 1);
    }
  }
}

// 2 nodes x 8 GPUs x 4 NICs, each node written to an XML file, read back and exchanged as if by
// its ranks at init.
GlobalSystem clusterThroughFiles(const tutti_test::TempDir& dir) {
  std::vector<RankTopology> ranks;
  for (int n = 0; n < 2; ++n) {
    std::string file = dir.file("node" + std::to_string(n) + ".xml");
    saveTopologyFile(syntheticNode(8, 4, "node" + std::to_string(n)), file);
    NodeSystem loaded = loadTopologyFile(file);
    for (int gpu : loaded.graph.gpus()) ranks.push_back({serializeSystem(loaded), loaded.graph.node(gpu).name});
  }
  return mergeSystems(ranks);
}

}  // namespace

TEST_CASE("rings on 2 nodes x 8 GPUs x 4 NICs loaded from XML files") {
  tutti_test::TempDir dir;
  GlobalSystem system = clusterThroughFiles(dir);
  REQUIRE(system.nodes.size() == 2);
  REQUIRE(system.ranks.size() == 16);
  ChannelLayout layout = buildChannels(system, 4, 16);
  REQUIRE(layout.channels >= 4);
  REQUIRE(layout.rings.size() == static_cast<size_t>(layout.channels));
  for (int c = 0; c < layout.channels; ++c) {
    INFO("channel " << c);
    const Ring& ring = layout.rings[c];
    CHECK(isPermutation(ring.ranks, 16));
    CHECK(crossings(system, ring.ranks) == 2);
    for (int n = 0; n < 2; ++n) {
      const TopologyGraph& graph = system.nodes[n].graph;
      int net = graph.nets()[c % 4];
      CHECK(ring.nets[n] == net);
      // The ring enters and leaves the node at GPUs on the NIC's own switch.
      auto first = std::find_if(ring.ranks.begin(), ring.ranks.end(), [&](int r) { return system.ranks[r].node == n; });
      int entry = *first, exit = *(first + 7);
      CHECK(graph.path(system.ranks[entry].gpu, net).type == PathType::PIX);
      CHECK(graph.path(system.ranks[exit].gpu, net).type == PathType::PIX);
    }
  }
  std::set<int> firstFour;
  for (int c = 0; c < 4; ++c) firstFour.insert(layout.rings[c].nets[0]);
  CHECK(firstFour.size() == 4);  // consecutive rings spread over every NIC
}

TEST_CASE("double binary trees reach every rank, interior in one tree and leaf in the other") {
  tutti_test::TempDir dir;
  GlobalSystem system = clusterThroughFiles(dir);
  ChannelLayout layout = buildChannels(system, 2, 2);
  REQUIRE(layout.trees.size() == 2);
  CHECK(layout.trees[0].mirrored != layout.trees[1].mirrored);
  for (const Tree& tree : layout.trees) checkTree(tree, 16);
  CHECK(layout.trees[0].root != layout.trees[1].root);

  for (int nodes = 1; nodes <= 33; ++nodes) {
    INFO(nodes << " nodes");
    std::vector<int> interior[2];
    for (int t = 0; t < 2; ++t) {
      interior[t].assign(nodes, 0);
      int roots = 0;
      for (int x = 0; x < nodes; ++x) {
        int up = nodeTreeParent(x, nodes, t == 1);
        if (up < 0) {
          ++roots;
          continue;
        }
        REQUIRE(up < nodes);
        ++interior[t][up];
        int depth = 0;  // a balanced tree: depth within log2
        for (int at = x; at >= 0 && depth <= nodes; at = nodeTreeParent(at, nodes, t == 1)) ++depth;
        CHECK((1 << (depth - 1)) <= 2 * nodes);
      }
      CHECK(roots == 1);
      for (int x = 0; x < nodes; ++x) CHECK(interior[t][x] <= 2);
    }
    int leafInBoth = 0;
    for (int x = 0; x < nodes; ++x) {
      CHECK(!(interior[0][x] > 0 && interior[1][x] > 0));
      leafInBoth += interior[0][x] == 0 && interior[1][x] == 0;
    }
    // Two trees of n nodes have n - 1 parents between them when they are complementary.
    if (nodes > 1) CHECK(leafInBoth == (nodes % 2 == 0 ? 0 : 1));
  }
}

TEST_CASE("node trees hang each node's ranks from its head as an in-order binary tree") {
  // Nodes of 5, 1, 3 and 8 ranks, ranks numbered out of order within them.
  const std::vector<std::vector<int>> chains{{4, 0, 16, 8, 12}, {1}, {2, 9, 5}, {3, 6, 7, 10, 11, 13, 14, 15}};
  std::vector<int> nodeOf(17, -1);
  for (size_t x = 0; x < chains.size(); ++x)
    for (int r : chains[x]) nodeOf[r] = static_cast<int>(x);
  for (bool mirrored : {false, true}) {
    INFO("mirrored " << mirrored);
    Tree tree = treeOverChains(chains, 17, mirrored);
    checkTree(tree, 17);
    CHECK(tree.mirrored == mirrored);
    int crossing = 0;
    for (size_t x = 0; x < chains.size(); ++x) {
      const std::vector<int>& chain = chains[x];
      const int head = chain.front();
      const int up = nodeTreeParent(static_cast<int>(x), 4, mirrored);
      CHECK(tree.parent[head] == (up < 0 ? -1 : chains[up].front()));
      CHECK(tree.children[head].size() <= 3);
      if (chain.size() > 1) CHECK(tree.children[head].front() == chain[(1 + chain.size()) / 2]);  // its own node first
      for (size_t i = 1; i < chain.size(); ++i) {
        const int r = chain[i];
        CHECK(nodeOf[tree.parent[r]] == static_cast<int>(x));
        CHECK(tree.children[r].size() <= 2);
        int depth = 0;  // below the head: within the in-order tree's log2
        for (int at = r; at != head; at = tree.parent[at]) ++depth;
        int bound = 1;
        while ((1 << bound) <= static_cast<int>(chain.size() - 1)) ++bound;
        CHECK(depth <= bound);
      }
    }
    for (int r = 0; r < 17; ++r) crossing += tree.parent[r] >= 0 && nodeOf[tree.parent[r]] != nodeOf[r];
    CHECK(crossing == 3);
  }
  // Under head 4, the in-order tree over 0 16 8 12 (chain places 1-4): 8 in the middle, 16 (and
  // under it 0) on its left, 12 on its right.
  Tree tree = treeOverChains(chains, 17, false);
  CHECK(tree.parent[8] == 4);
  CHECK(tree.parent[16] == 8);
  CHECK(tree.parent[0] == 16);
  CHECK(tree.parent[12] == 8);

  CHECK_THROWS_WITH(treeOverChains({{0, 1}, {1, 2}}, 3, false),
                    Catch::Contains("rank 1") && Catch::Contains("two nodes"));
  CHECK_THROWS_WITH(treeOverChains({{0, 1}, {}}, 2, false), Catch::Contains("no ranks"));
  CHECK_THROWS_WITH(treeOverChains({{0, 1}}, 3, false), Catch::Contains("2 of 3 ranks"));
  CHECK_THROWS_WITH(treeOverChains({{0, 3}}, 2, false), Catch::Contains("rank 3"));
}

TEST_CASE("binary tree positions: odd positions are leaves") {
  for (int n = 1; n <= 64; ++n) {
    std::vector<int> childCount(n + 1, 0);
    for (int p = 1; p <= n; ++p) {
      int up = binaryTreeParent(p, n);
      CHECK(up >= 0);
      CHECK(up <= n);
      if (up > 0) ++childCount[up];
    }
    for (int p = 1; p <= n; p += 2) CHECK(childCount[p] == 0);
  }
}

TEST_CASE("channel count follows bandwidth, clamped to the bounds") {
  GlobalSystem system = syntheticCluster(2, 8, 4);
  ChannelLayout free = buildChannels(system, 1, 64);
  CHECK(free.channels % 4 == 0);  // every NIC carries the same number of rings
  // Four 400 Gb/s ports are more than four channels of 20 GB/s can carry.
  CHECK(free.channels > 4);
  CHECK(buildChannels(system, 1, 2).channels == 2);
  CHECK(buildChannels(system, free.channels + 3, 64).channels == free.channels + 3);
  CHECK_THROWS_WITH(buildChannels(system, 4, 2), Catch::Contains("channel bounds [4, 2]"));
  CHECK_THROWS_WITH(buildChannels(system, 0, 2), Catch::Contains("channel bounds [0, 2]"));

  GlobalSystem bad = system;
  bad.ranks[3].gpu = 0;  // a CPU, not a GPU
  CHECK_THROWS_WITH(buildChannels(bad, 1, 4), Catch::Contains("rank 3"));
}

TEST_CASE("one node: rings over NVLink, channel count from the ring's bottleneck") {
  GlobalSystem system = syntheticCluster(1, 8, 4);
  ChannelLayout layout = buildChannels(system, 1, 64);
  CHECK(layout.channels > 1);  // 450 GB/s of NVLink needs more than one channel
  for (const Ring& ring : layout.rings) {
    CHECK(isPermutation(ring.ranks, 8));
    CHECK(crossings(system, ring.ranks) == 0);
    for (size_t i = 0; i < ring.ranks.size(); ++i) {
      CHECK(rankPath(system, ring.ranks[i], ring.ranks[(i + 1) % 8]).type == PathType::NVL);
    }
  }
  for (const Tree& tree : layout.trees) checkTree(tree, 8);
}

TEST_CASE("host-only machines: rings over processes grouped by node") {
  GlobalSystem system;
  for (int n = 0; n < 3; ++n) system.nodes.push_back(syntheticNode(0, n == 1 ? 0 : 2, "host" + std::to_string(n)));
  for (int r = 0; r < 9; ++r) system.ranks.push_back({r % 3, -1});  // interleaved, as a launcher may place them
  ChannelLayout layout = buildChannels(system, 1, 8);
  CHECK(layout.channels >= 1);
  for (const Ring& ring : layout.rings) {
    CHECK(isPermutation(ring.ranks, 9));
    CHECK(crossings(system, ring.ranks) == 3);
    CHECK(ring.nets[1] == -1);
  }
  for (const Tree& tree : layout.trees) checkTree(tree, 9);
  CHECK(rankPath(system, 0, 1).type == PathType::NET);
  CHECK(rankPath(system, 0, 3).type == PathType::LOC);
}
