// Tests of the wait-for graph (runtime/diagnostics/wait_graph.h) on hand-built graphs: chains, cycles, two
// roots, a dead root, a rank that waits for itself.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/diagnostics/wait_graph.h"

using tutti::findRootCause;
using tutti::RankWait;
using tutti::RankWaitState;
using tutti::WaitGraph;

namespace {

RankWait waiting(std::vector<int> peers, uint64_t op = 7) {
  RankWait w;
  w.state = RankWaitState::Waiting;
  w.waitsFor = std::move(peers);
  w.opSeq = op;
  w.opName = "AllReduce";
  return w;
}

RankWait state(RankWaitState s, std::string detail = {}) {
  RankWait w;
  w.state = s;
  w.detail = std::move(detail);
  return w;
}

WaitGraph named(std::vector<RankWait> ranks) {
  WaitGraph g;
  g.ranks = std::move(ranks);
  for (size_t r = 0; r < g.ranks.size(); ++r)
    g.names.push_back("rank " + std::to_string(r) + " (h" + std::to_string(r) + " pid " + std::to_string(100 + r) +
                      ")");
  return g;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a chain of waits leads to the silent rank at its end", "[wait_graph]") {
  WaitGraph g = named({waiting({1}), waiting({2}), waiting({3}),
                       state(RankWaitState::NoAnswer, "did not answer within 1 s: stopped or hung")});
  auto cause = findRootCause(g, 0);
  REQUIRE(cause.roots == std::vector<int>{3});
  INFO(cause.text);
  CHECK(contains(
      cause.text,
      "rank 0 waits for rank 1 in AllReduce #7, which waits for rank 2 in AllReduce #7, which waits for rank 3"));
  CHECK(contains(cause.text, "rank 3 (h3 pid 103) did not answer within 1 s: stopped or hung"));
  // From the middle of the chain, the same root.
  CHECK(findRootCause(g, 2).roots == std::vector<int>{3});
}

TEST_CASE("a rank in no operation is the root of the ranks waiting for it", "[wait_graph]") {
  WaitGraph g = named({waiting({1}), state(RankWaitState::Idle), waiting({0})});
  auto cause = findRootCause(g, 2);
  REQUIRE(cause.roots == std::vector<int>{1});
  INFO(cause.text);
  CHECK(contains(cause.text, "rank 2 waits for rank 0"));
  CHECK(contains(cause.text, "which waits for rank 1"));
  CHECK(contains(cause.text, "in no operation"));
}

TEST_CASE("a dead root is named as gone", "[wait_graph]") {
  WaitGraph g = named(
      {waiting({1}), state(RankWaitState::Gone, "could not be reached (connection refused): its process is gone")});
  auto cause = findRootCause(g, 0);
  REQUIRE(cause.roots == std::vector<int>{1});
  CHECK(contains(cause.text, "rank 1 (h1 pid 101) could not be reached (connection refused): its process is gone"));
}

TEST_CASE("waits on two peers lead to both roots", "[wait_graph]") {
  WaitGraph g = named({waiting({1, 2}), state(RankWaitState::NoAnswer), waiting({3}), state(RankWaitState::Gone)});
  auto cause = findRootCause(g, 0);
  REQUIRE(cause.roots.size() == 2);
  CHECK(cause.roots[0] == 1);
  CHECK(cause.roots[1] == 3);
  INFO(cause.text);
  CHECK(contains(cause.text, "rank 1 (h1 pid 101) did not answer"));
  CHECK(contains(cause.text, "; also rank 0 waits for rank 2 in AllReduce #7, which waits for rank 3"));
}

TEST_CASE("ranks that wait for each other are named as a cycle", "[wait_graph]") {
  WaitGraph g = named({waiting({1}, 4), waiting({2}, 5), waiting({0}, 5)});
  auto cause = findRootCause(g, 0);
  CHECK(cause.roots.empty());
  INFO(cause.text);
  CHECK(contains(
      cause.text,
      "rank 0 waits for rank 1 in AllReduce #4, which waits for rank 2 in AllReduce #5, which waits for rank 0"));
  CHECK(contains(cause.text, "cycle"));
}

TEST_CASE("a rank that waits for itself is a cycle of one, and a rank not waiting has no cause", "[wait_graph]") {
  WaitGraph self = named({waiting({0}), state(RankWaitState::Idle)});
  auto cause = findRootCause(self, 0);
  CHECK(cause.roots.empty());
  CHECK(contains(cause.text, "rank 0 waits for rank 0"));
  CHECK(contains(cause.text, "cycle"));
  WaitGraph idle = named({state(RankWaitState::Idle), waiting({0})});
  CHECK(findRootCause(idle, 0).text.empty());
  CHECK(findRootCause(idle, 5).text.empty());
}

TEST_CASE("a rank not asked ends the chain as unknown", "[wait_graph]") {
  WaitGraph g = named({waiting({1}), waiting({2}), RankWait{}});
  auto cause = findRootCause(g, 0);
  REQUIRE(cause.roots == std::vector<int>{2});
  CHECK(contains(cause.text, "was not asked"));
}
