// The built-in ring and direct plans, checked by the verifier (algorithms/verify.h) for 1 to 16
// ranks, every root, in and out of place.
#include <catch2/catch.hpp>

#include "algorithms/builtin.h"
#include "algorithms/verify.h"

using namespace tutti::plan;

namespace {

std::string check(Coll coll, int n, int root, const std::function<RankPlan(int)>& planOf) {
  for (bool inPlace : {false, true}) {
    VerifyRequest q;
    q.coll = coll;
    q.nranks = n;
    q.root = root;
    q.planOf = planOf;
    q.inPlace = inPlace;
    std::string err = verify(q);
    if (!err.empty()) return (inPlace ? "in place: " : "out of place: ") + err;
  }
  return "";
}

}  // namespace

TEST_CASE("ring plans meet their postconditions for 1 to 16 ranks", "[plans]") {
  for (int n = 1; n <= 16; n++) {
    INFO(n << " ranks");
    CHECK(check(Coll::AllReduce, n, 0, [&](int r) { return ringAllReduce(r, n); }) == "");
    CHECK(check(Coll::AllGather, n, 0, [&](int r) { return ringAllGather(r, n); }) == "");
    CHECK(check(Coll::ReduceScatter, n, 0, [&](int r) { return ringReduceScatter(r, n); }) == "");
    for (int root = 0; root < n; root++) {
      INFO("root " << root);
      CHECK(check(Coll::Broadcast, n, root, [&](int r) { return ringBroadcast(r, n, root); }) == "");
      CHECK(check(Coll::Reduce, n, root, [&](int r) { return ringReduce(r, n, root); }) == "");
    }
  }
}

TEST_CASE("direct plans meet their postconditions for 1 to 16 ranks", "[plans]") {
  AlgorithmRegistry registry = builtinAlgorithms();
  const Algorithm* direct = registry.find("direct");
  REQUIRE(direct);
  for (int n = 1; n <= 16; n++) {
    INFO(n << " ranks");
    CHECK(check(Coll::AlltoAll, n, 0, [&](int r) { return directAlltoAll(r, n); }) == "");
    for (int root = 0; root < n; root++) {
      INFO("root " << root);
      CHECK(check(Coll::Gather, n, root, [&](int r) { return directGather(r, n, root); }) == "");
      CHECK(check(Coll::Scatter, n, root, [&](int r) { return directScatter(r, n, root); }) == "");
      // Every rank sends to r + root and receives from r - root in one group.
      CHECK(verifyAlgorithm(*direct, Coll::Send, n, root) == "");
    }
  }
}
