// Tests of the IB net backend's several QPs per connection (split and round-robin), its
// adaptive-routing writes and relaxed-ordering registrations, through the software verbs stand-in:
// every message checked byte for byte against what was sent, completions that come out of order
// across QPs matched to the right receive, and what the stand-in was asked for (its counters).
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/common/env_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/ib/ib_comms.h"
#include "transports/net/net.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;

using Standin = tutti_test::IbStandinEnv;

// The stand-in's counters (tutti_standin_counters). Holding the library open keeps them across
// the backends that load and unload it.
struct Counters {
  uint64_t plainWrites = 0, immWrites = 0, relaxedOrderingMrs = 0, heldOps = 0;
};
class StandinCounters {
 public:
  StandinCounters() : handle_(dlopen(TUTTI_TEST_IBVERBS_STANDIN, RTLD_NOW | RTLD_LOCAL)) {
    REQUIRE(handle_);
    read_ = reinterpret_cast<Read>(dlsym(handle_, "tutti_standin_counters"));
    REQUIRE(read_);
  }
  ~StandinCounters() { dlclose(handle_); }
  Counters now() const {
    Counters c;
    read_(&c.plainWrites, &c.immWrites, &c.relaxedOrderingMrs, &c.heldOps);
    return c;
  }

 private:
  using Read = void (*)(uint64_t*, uint64_t*, uint64_t*, uint64_t*);
  void* handle_;
  Read read_ = nullptr;
};

using tutti_test::errorOf;

// Sizes around the split boundaries: empty, shorter than one part, not divisible by 2 or 4 QPs or
// the part alignment, and above the adaptive-routing threshold (8 KiB).
const std::vector<size_t> kSizes = {0, 1, 3, 127, 128, 129, 1000, 4099, 8192, 8193, 65537, (size_t(1) << 20) + 5};

TEST_CASE("net/ib: QPs per connection x split x adaptive routing: every size arrives byte for byte", "[net][ib][qps]") {
  Standin standin;
  StandinCounters counters;
  const char* qps = GENERATE("1", "2", "4");
  const char* split = GENERATE("0", "1");
  const char* ar = GENERATE("0", "1");
  INFO("NCCL_IB_QPS_PER_CONNECTION=" << qps << " NCCL_IB_SPLIT_DATA_ON_QPS=" << split
                                     << " NCCL_IB_ADAPTIVE_ROUTING=" << ar);
  ScopedEnv qpsEnv("NCCL_IB_QPS_PER_CONNECTION", qps), splitEnv("NCCL_IB_SPLIT_DATA_ON_QPS", split),
      arEnv("NCCL_IB_ADAPTIVE_ROUTING", ar);
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  Counters before = counters.now();
  uint32_t seed = 7;
  size_t aboveThreshold = 0, immExpected = 0;
  for (size_t bytes : kSizes) {
    std::vector<char> out = tutti_test::randomBytes(bytes, seed++);
    std::vector<char> in(bytes + 300, 0);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == bytes);
    CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);
    CHECK(std::all_of(in.begin() + long(bytes), in.end(), [](char c) { return c == 0; }));  // nothing beyond
    size_t parts = std::strcmp(split, "1") == 0 ? size_t(std::atoi(qps)) : 1;
    immExpected += parts;
    if (bytes > 8192) aboveThreshold += parts;  // every part of it has data: parts are at most ceil(bytes / QPs)
  }
  Counters after = counters.now();
  // One write with immediate per part, and the sender's zero-byte ready write when it connects;
  // with adaptive routing, a plain write before each part of a message above the threshold (the
  // clear-to-send writes are plain writes too: one per message).
  CHECK(after.immWrites - before.immWrites == immExpected + 1);
  size_t plainExpected = kSizes.size() + (std::strcmp(ar, "1") == 0 ? aboveThreshold : 0);
  CHECK(after.plainWrites - before.plainWrites == plainExpected);
}

// Posts `count` messages of different sizes and tests the receives newest first, checking each as
// soon as it reports done; returns whether one completed before an earlier one.
bool exchangeTestingNewestFirst(tutti_test::NetPair& pair, int count) {
  std::vector<std::vector<char>> out, in;
  for (int i = 0; i < count; ++i) {
    out.push_back(tutti_test::randomBytes(size_t(i) * 523 % 7000 + size_t(i), uint32_t(100 + i)));
    in.emplace_back(8000, 0);
  }
  std::vector<NetRequest*> sends(size_t(count), nullptr), recvs(size_t(count), nullptr);
  std::vector<bool> sent(size_t(count), false), received(size_t(count), false);
  int sendsPosted = 0, recvsPosted = 0, sentCount = 0, receivedCount = 0;
  bool outOfOrder = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (sentCount < count || receivedCount < count) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("the messages did not complete within 30 s");
    if (sendsPosted < count)
      if (NetRequest* s = pair.send->isend(out[size_t(sendsPosted)].data(), out[size_t(sendsPosted)].size(), 0, {}))
        sends[size_t(sendsPosted++)] = s;
    if (recvsPosted < count)
      if (NetRequest* r = pair.recv->irecv(in[size_t(recvsPosted)].data(), 8000, 0, {}))
        recvs[size_t(recvsPosted++)] = r;
    for (int i = sendsPosted - 1; i >= 0; --i)
      if (!sent[size_t(i)] && pair.send->test(sends[size_t(i)], nullptr)) {
        sent[size_t(i)] = true;
        ++sentCount;
      }
    for (int i = recvsPosted - 1; i >= 0; --i) {
      size_t got = SIZE_MAX;
      if (received[size_t(i)] || !pair.recv->test(recvs[size_t(i)], &got)) continue;
      received[size_t(i)] = true;
      ++receivedCount;
      if (i > 0 && !received[size_t(i - 1)]) outOfOrder = true;
      INFO("message " << i);
      REQUIRE(got == out[size_t(i)].size());
      REQUIRE(std::memcmp(in[size_t(i)].data(), out[size_t(i)].data(), got) == 0);
    }
  }
  return outOfOrder;
}

TEST_CASE("net/ib: completions out of order across QPs complete the right receives, with all their data",
          "[net][ib][qps]") {
  Standin standin;
  StandinCounters counters;
  // The stand-in holds every write with immediate arriving at an even-numbered QP: of each
  // connection's QPs, every other one lags behind the rest (clear-to-send writes are not held).
  ScopedEnv delay("TUTTI_IBVERBS_STANDIN_DELAY_QP_MS", "20");
  const char* qps = GENERATE("2", "4");
  ScopedEnv qpsEnv("NCCL_IB_QPS_PER_CONNECTION", qps);
  Counters before = counters.now();
  SECTION("round-robin: later messages on the prompt QPs complete first") {
    ScopedEnv split("NCCL_IB_SPLIT_DATA_ON_QPS", "0");
    auto backend = openNetBackend("IB", "");
    auto pair = tutti_test::connectNetPair(*backend);
    CHECK(exchangeTestingNewestFirst(pair, 24));
  }
  SECTION("split: a message is done only when its part on the lagging QP has arrived") {
    ScopedEnv split("NCCL_IB_SPLIT_DATA_ON_QPS", "1");
    auto backend = openNetBackend("IB", "");
    auto pair = tutti_test::connectNetPair(*backend);
    exchangeTestingNewestFirst(pair, 24);
  }
  CHECK(counters.now().heldOps > before.heldOps);
}

TEST_CASE("net/ib: adaptive routing defaults on for an InfiniBand link layer and off for RoCE", "[net][ib][qps]") {
  {
    ScopedEnv unset("NCCL_IB_ADAPTIVE_ROUTING", nullptr);
    CHECK(ib::useAdaptiveRouting(IBV_LINK_LAYER_INFINIBAND));
    CHECK_FALSE(ib::useAdaptiveRouting(IBV_LINK_LAYER_ETHERNET));
  }
  {
    ScopedEnv on("NCCL_IB_ADAPTIVE_ROUTING", "1");
    CHECK(ib::useAdaptiveRouting(IBV_LINK_LAYER_ETHERNET));
  }
  {
    ScopedEnv off("NCCL_IB_ADAPTIVE_ROUTING", "0");
    CHECK_FALSE(ib::useAdaptiveRouting(IBV_LINK_LAYER_INFINIBAND));
  }
  // End to end: a message above the threshold goes as a plain write plus the completion write only
  // on the InfiniBand port, unless the variable says otherwise.
  Standin standin;
  StandinCounters counters;
  struct Row {
    const char* linkLayer;
    const char* setting;
    bool twoWrites;
  };
  for (Row row : {Row{"ib", nullptr, true}, Row{"eth", nullptr, false}, Row{"ib", "0", false}, Row{"eth", "1", true}}) {
    INFO("link layer " << row.linkLayer << ", NCCL_IB_ADAPTIVE_ROUTING=" << (row.setting ? row.setting : "(unset)"));
    ScopedEnv linkLayer("TUTTI_IBVERBS_STANDIN_LINK_LAYER", row.linkLayer);
    ScopedEnv setting("NCCL_IB_ADAPTIVE_ROUTING", row.setting);
    auto backend = openNetBackend("IB", "");
    auto pair = tutti_test::connectNetPair(*backend);
    Counters before = counters.now();
    std::vector<char> out = tutti_test::randomBytes(100000, 5), in(100000);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == out.size());
    CHECK(in == out);
    Counters after = counters.now();
    CHECK(after.immWrites - before.immWrites == 2);  // the message's, and the sender's ready write
    CHECK(after.plainWrites - before.plainWrites == (row.twoWrites ? 2u : 1u));  // the clear-to-send is one
  }
}

TEST_CASE("net/ib: NCCL_IB_AR_THRESHOLD decides which messages take the two-write path", "[net][ib][qps]") {
  Standin standin;
  StandinCounters counters;
  ScopedEnv ar("NCCL_IB_ADAPTIVE_ROUTING", "1"), threshold("NCCL_IB_AR_THRESHOLD", "1K");
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  for (size_t bytes : {size_t(1024), size_t(1025)}) {
    Counters before = counters.now();
    std::vector<char> out = tutti_test::randomBytes(bytes, 11), in(bytes);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == bytes);
    CHECK(in == out);
    CHECK(counters.now().plainWrites - before.plainWrites == (bytes > 1024 ? 2u : 1u));
  }
}

TEST_CASE("net/ib: NCCL_IB_PCI_RELAXED_ORDERING registers with relaxed ordering where possible, or fails when required",
          "[net][ib][qps]") {
  Standin standin;
  StandinCounters counters;
  // Registrations with relaxed ordering made for the two data buffers of one exchange (after the
  // backend's set-up, whose probe and rings are not counted).
  auto exchange = [&counters] {
    auto backend = openNetBackend("IB", "");
    auto pair = tutti_test::connectNetPair(*backend);
    std::vector<char> out = tutti_test::randomBytes(5000, 3), in(5000);
    uint64_t before = counters.now().relaxedOrderingMrs;
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == out.size());
    CHECK(in == out);
    return counters.now().relaxedOrderingMrs - before;
  };
  SECTION("unset (2): asked for") {
    ScopedEnv unset("NCCL_IB_PCI_RELAXED_ORDERING", nullptr);
    CHECK(exchange() == 2);
  }
  SECTION("0: never asked for") {
    ScopedEnv off("NCCL_IB_PCI_RELAXED_ORDERING", "0");
    CHECK(exchange() == 0);
  }
  SECTION("a library without the optional flags: 2 goes on without, 1 fails naming the variable") {
    ScopedEnv refuse("TUTTI_IBVERBS_STANDIN_RELAXED_ORDERING", "0");
    {
      ScopedEnv ifAvailable("NCCL_IB_PCI_RELAXED_ORDERING", "2");
      CHECK(exchange() == 0);
    }
    ScopedEnv required("NCCL_IB_PCI_RELAXED_ORDERING", "1");
    std::string error = errorOf([] { openNetBackend("IB", ""); });
    CHECK(error.find("NCCL_IB_PCI_RELAXED_ORDERING=1 requires relaxed ordering") != std::string::npos);
    CHECK(error.find("standin_0:1") != std::string::npos);
  }
  SECTION("a value other than 0, 1, 2 is refused") {
    ScopedEnv bad("NCCL_IB_PCI_RELAXED_ORDERING", "3");
    CHECK(errorOf([] { openNetBackend("IB", ""); }).find("NCCL_IB_PCI_RELAXED_ORDERING=3 is not 0, 1 or 2") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace tutti::transport::net
