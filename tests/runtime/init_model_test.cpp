// The init model: logarithmic rounds, a root whose traffic grows as n log n, per-rank bytes that
// follow the structures' sizes.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>

#include "base/socket_address.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/init_model.h"

namespace tutti {
namespace {

const InitExchange& find(const std::vector<InitExchange>& all, const std::string& name) {
  for (const InitExchange& e : all)
    if (e.name == name) return e;
  FAIL("no exchange named " << name);
  return all.front();
}

TEST_CASE("init model: rounds grow with log2 of the ranks, the root's bytes as n log n") {
  for (int64_t n : {2, 3, 1000, 1024, 100000}) {
    INFO(n << " ranks");
    InitShape shape;
    shape.nranks = n;
    shape.nodes = (n + 7) / 8;
    std::vector<InitExchange> all = modelInit(shape);
    const int64_t log2n = int64_t(std::bit_width(uint64_t(n - 1)));  // ceil(log2 n) for n >= 2
    const InitExchange& info = find(all, "rank information");
    CHECK(info.rounds == log2n);
    CHECK(info.bytesIn == double(n - 1) * double(sizeof(RankInfo)));
    CHECK(find(all, "listener addresses").bytesIn == double(n - 1) * double(SocketAddress::kWireBytes));
    CHECK(find(all, "final barrier").rounds == log2n);
    // The root answers each rank with log2 n addresses, not n.
    const InitExchange& join = find(all, "join");
    CHECK(join.bytesIn <= 8 + double(log2n) * 32);
    CHECK(join.rootBytes <= double(n) * (200 + double(log2n) * 32));
    int64_t rounds = 0;
    for (const InitExchange& e : all) rounds += e.rounds;
    CHECK(rounds <= 12 * log2n + 2 * 40 + 2);  // a dozen log-round exchanges, the round trips, join and connect
  }
  InitShape two;
  two.nranks = 100000;
  two.rootsCount = 4;
  CHECK(find(modelInit(two), "join").rootBytes < find(modelInit(InitShape{100000, 1, 2, 4096, 1}), "join").rootBytes);
}

}  // namespace
}  // namespace tutti
