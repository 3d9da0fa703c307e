// Tests of the verbs stand-in's wires under the IB net backend: the wire a test asks for
// (TUTTI_IBVERBS_STANDIN_WIRE) is the one that carries its bytes, with no silent fall back to TCP,
// and the benchmark's mode without data movement (TUTTI_IBVERBS_STANDIN_NO_DATA) still completes
// every message with its size while leaving the receiver's memory alone.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/common/env_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/net.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;
using Standin = tutti_test::IbStandinEnv;

// The stand-in's operations per wire (tutti_standin_wire_ops); the library stays open across the
// backends that load and unload it, so the counts do too.
class WireOps {
 public:
  WireOps() : handle_(dlopen(TUTTI_TEST_IBVERBS_STANDIN, RTLD_NOW | RTLD_LOCAL)) {
    REQUIRE(handle_);
    read_ = reinterpret_cast<Read>(dlsym(handle_, "tutti_standin_wire_ops"));
    REQUIRE(read_);
  }
  ~WireOps() { dlclose(handle_); }
  uint64_t tcp() const {
    uint64_t n = 0;
    read_(&n, nullptr);
    return n;
  }
  uint64_t shm() const {
    uint64_t n = 0;
    read_(nullptr, &n);
    return n;
  }

 private:
  using Read = void (*)(uint64_t*, uint64_t*);
  void* handle_;
  Read read_ = nullptr;
};

// Sizes from empty to several times the shared-memory ring (1 MiB), so that payloads wrap around it
// and wait for the receiver to make room.
const std::vector<size_t> kSizes = {0, 1, 4095, 65537, (size_t(1) << 20) - 3, (size_t(3) << 20) + 7};

TEST_CASE(
    "net/ib: the stand-in's wire is the one asked for, shared memory on one host or TCP, never a silent fall back",
    "[net][ib][wire]") {
  Standin standin;
  WireOps ops;
  const char* wire = GENERATE("shm", "tcp");
  INFO("TUTTI_IBVERBS_STANDIN_WIRE=" << wire);
  ScopedEnv wireEnv("TUTTI_IBVERBS_STANDIN_WIRE", wire);
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  uint64_t tcpBefore = ops.tcp(), shmBefore = ops.shm();
  uint32_t seed = 11;
  for (size_t bytes : kSizes) {
    std::vector<char> out = tutti_test::randomBytes(bytes, seed++);
    std::vector<char> in(bytes + 64, 0);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == bytes);
    CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);
    CHECK(std::all_of(in.begin() + long(bytes), in.end(), [](char c) { return c == 0; }));
  }
  uint64_t tcpOps = ops.tcp() - tcpBefore, shmOps = ops.shm() - shmBefore;
  // At least a clear-to-send and a data write per message, all on the wire asked for.
  if (std::strcmp(wire, "shm") == 0) {
    CHECK(shmOps >= 2 * kSizes.size());
    CHECK(tcpOps == 0);
  } else {
    CHECK(tcpOps >= 2 * kSizes.size());
    CHECK(shmOps == 0);
  }
}

TEST_CASE("net/ib: without data movement, messages complete with their sizes and the receiver's memory is untouched",
          "[net][ib][wire]") {
  Standin standin;
  const char* wire = GENERATE("shm", "tcp");
  INFO("TUTTI_IBVERBS_STANDIN_WIRE=" << wire);
  ScopedEnv wireEnv("TUTTI_IBVERBS_STANDIN_WIRE", wire), noData("TUTTI_IBVERBS_STANDIN_NO_DATA", "1");
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  uint32_t seed = 5;
  for (size_t bytes : {size_t(1), size_t(4096), (size_t(3) << 20) + 7}) {
    std::vector<char> out = tutti_test::randomBytes(bytes, seed++);
    std::vector<char> in(bytes, 0);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == bytes);
    CHECK(std::all_of(in.begin(), in.end(), [](char c) { return c == 0; }));
  }
}

}  // namespace
}  // namespace tutti::transport::net
