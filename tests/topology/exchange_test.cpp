// Serialising node graphs and merging every rank's view into the global system.
#include <catch2/catch.hpp>

#include "base/error.h"
#include "topology/exchange.h"
#include "topology/synthetic.h"

using namespace tutti::topo;

TEST_CASE("a node's graph survives serialisation with its identity") {
  NodeSystem node = syntheticNode(4, 2, "alpha");
  node.warnings.push_back("local only");
  NodeSystem back = deserializeSystem(serializeSystem(node));
  CHECK(back.hostname == "alpha");
  CHECK(back.bootId == node.bootId);
  CHECK(back.warnings.empty());
  REQUIRE(back.graph.nodes().size() == node.graph.nodes().size());
  for (size_t i = 0; i < node.graph.nodes().size(); ++i) {
    CHECK(back.graph.node(static_cast<int>(i)).name == node.graph.node(static_cast<int>(i)).name);
  }
  CHECK(back.graph.links().size() == node.graph.links().size());
  CHECK_THROWS_WITH(deserializeSystem("<system>", "rank 5"), Catch::Contains("rank 5:1:"));
}

TEST_CASE("merging groups ranks by host and boot id, and places each on its GPU") {
  NodeSystem a = syntheticNode(2, 1, "alpha");
  NodeSystem b = syntheticNode(2, 1, "beta");
  NodeSystem rebooted = a;
  rebooted.bootId = "another boot";
  auto gpu = [](const NodeSystem& s, int i) { return s.graph.node(s.graph.gpus()[i]).name; };
  std::vector<RankTopology> ranks = {{serializeSystem(b), gpu(b, 1)},
                                     {serializeSystem(a), gpu(a, 0)},
                                     {serializeSystem(b), gpu(b, 0)},
                                     {serializeSystem(a), gpu(a, 1)},
                                     {serializeSystem(rebooted), ""}};
  GlobalSystem global = mergeSystems(ranks);
  REQUIRE(global.nodes.size() == 3);
  CHECK(global.nodes[0].hostname == "beta");
  CHECK(global.nodes[1].hostname == "alpha");
  CHECK(global.nodes[2].bootId == "another boot");
  REQUIRE(global.ranks.size() == 5);
  CHECK(global.ranks[0].node == 0);
  CHECK(global.ranks[0].gpu == b.graph.gpus()[1]);
  CHECK(global.ranks[1].node == 1);
  CHECK(global.ranks[3].gpu == a.graph.gpus()[1]);
  CHECK(global.ranks[4].node == 2);
  CHECK(global.ranks[4].gpu == -1);

  ranks[2].gpuBusId = "0000:ee:00.0";
  CHECK_THROWS_WITH(mergeSystems(ranks),
                    Catch::Contains("rank 2 uses GPU 0000:ee:00.0") && Catch::Contains("host beta"));
}

TEST_CASE("merging each distinct graph once gives what merging every rank's copy gives") {
  NodeSystem a = syntheticNode(2, 1, "alpha");
  NodeSystem b = syntheticNode(2, 1, "beta");
  auto gpu = [](const NodeSystem& s, int i) { return s.graph.node(s.graph.gpus()[i]).name; };
  const std::string textA = serializeSystem(a), textB = serializeSystem(b);
  // Ranks 0-2 on beta, 3-5 on alpha, interleaved GPUs: the form a node's lowest rank's graph takes.
  std::vector<int> textOfRank = {0, 1, 0, 1, 1, 0};
  std::vector<std::string> busIds = {gpu(b, 0), gpu(a, 1), gpu(b, 1), "", gpu(a, 0), ""};
  GlobalSystem once = mergeSystems({textB, textA}, textOfRank, busIds);
  std::vector<RankTopology> copies;
  for (size_t r = 0; r < textOfRank.size(); r++) copies.push_back({textOfRank[r] == 0 ? textB : textA, busIds[r]});
  GlobalSystem each = mergeSystems(copies);
  REQUIRE(once.nodes.size() == 2);
  REQUIRE(each.nodes.size() == 2);
  for (size_t n = 0; n < 2; n++) {
    CHECK(once.nodes[n].hostname == each.nodes[n].hostname);
    CHECK(once.nodes[n].graph.nodes().size() == each.nodes[n].graph.nodes().size());
  }
  REQUIRE(once.ranks.size() == each.ranks.size());
  for (size_t r = 0; r < once.ranks.size(); r++) {
    INFO("rank " << r);
    CHECK(once.ranks[r].node == each.ranks[r].node);
    CHECK(once.ranks[r].gpu == each.ranks[r].gpu);
  }
  CHECK(once.ranks[0].node == 0);  // nodes numbered by their lowest rank
  CHECK(once.ranks[1].node == 1);
  CHECK(once.ranks[3].gpu == -1);
  // Fewer bus ids than ranks: the rest have none.
  CHECK(mergeSystems({textB}, {0, 0, 0}, {}).ranks[2].gpu == -1);
  CHECK_THROWS_WITH(mergeSystems({textB}, {0, 1}, {}), Catch::Contains("rank 1 names graph 1 of 1"));
}
