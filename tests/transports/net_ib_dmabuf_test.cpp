// GPUDirect RDMA through dmabuf on the IB backend, with the verbs stand-in: memory reached only by
// its descriptor (a memfd standing for a device's memory, as the emulated device's is) is
// registered with registerDmaBuf and written by RDMA; registrations are cached per range of a
// dmabuf; bad descriptors and offsets are refused naming the device and the peer; backends and
// libraries without dmabuf report dmaBuf=false and refuse with an error that says so.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

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

using DeviceMemory = tutti_test::MemfdMemory;

// The stand-in's count of dmabuf registrations made, of those still registered, and of RDMA reads.
struct DmabufCounts {
  uint64_t made = 0, live = 0, reads = 0;
};
DmabufCounts dmabufCounts() {
  auto counters =
      tutti_test::loadedStandinSymbol<void (*)(uint64_t*, uint64_t*, uint64_t*)>("tutti_standin_dmabuf_counters");
  REQUIRE(counters != nullptr);
  DmabufCounts c;
  counters(&c.made, &c.live, &c.reads);
  return c;
}

TEST_CASE("net/ib: memory registered by dmabuf on both sides receives what was sent, through the descriptor",
          "[net][ib][dmabuf]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  NetProperties p = backend->properties(0);
  CHECK(p.dmaBuf);
  CHECK(p.cudaMemory);
  auto pair = tutti_test::connectNetPair(*backend);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  DeviceMemory source(4), target(4);
  const size_t bytes = 2 * page + 123;
  std::vector<char> expected = tutti_test::randomBytes(bytes, 11);
  std::memcpy(source.data + page + 5, expected.data(), bytes);
  std::memset(target.data, 0x5a, target.bytes);
  DmabufCounts before = dmabufCounts();
  // Ranges that start inside the descriptor (at its second page, and 5 bytes into it), as a FIFO
  // inside a larger allocation does.
  MemoryRegistration sr = pair.send->registerDmaBuf(source.data + page + 5, bytes, source.fd, page + 5);
  MemoryRegistration rr = pair.recv->registerDmaBuf(target.data + page, bytes + 7, target.fd, page);
  CHECK(dmabufCounts().made == before.made + 2);
  CHECK(tutti_test::exchangeOverNet(pair, source.data + page + 5, bytes, target.data + page, bytes + 7, sr, rr) ==
        bytes);
  CHECK(std::memcmp(target.data + page, expected.data(), bytes) == 0);
  // Nothing outside the message was touched.
  for (size_t i = 0; i < target.bytes; ++i) {
    if (i >= page && i < page + bytes) continue;
    if (target.data[i] != 0x5a) FAIL("byte " << i << " outside the message changed");
  }

  SECTION("a second registration of a range within a cached one reuses it, and deregistering keeps it cached") {
    MemoryRegistration again = pair.recv->registerDmaBuf(target.data + page + 64, 256, target.fd, page + 64);
    CHECK(again.backendData == rr.backendData);
    CHECK(dmabufCounts().made == before.made + 2);
    pair.recv->deregisterMemory(again);
    // The same range named at another offset of the descriptor is other memory: a new registration.
    MemoryRegistration shifted = pair.recv->registerDmaBuf(target.data + page, 256, target.fd, 0);
    CHECK(shifted.backendData != rr.backendData);
    CHECK(dmabufCounts().made == before.made + 3);
    pair.recv->deregisterMemory(shifted);
  }
  pair.send->deregisterMemory(sr);
  pair.recv->deregisterMemory(rr);
}

TEST_CASE("net/ib: flush after a receive into dmabuf memory issues an RDMA read of it, unless NCCL_GDR_FLUSH_DISABLE=1",
          "[net][ib][dmabuf]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  DeviceMemory target(2);
  MemoryRegistration rr = pair.recv->registerDmaBuf(target.data, target.bytes, target.fd, 0);
  std::vector<char> out = tutti_test::randomBytes(5000, 21), hostIn(5000);
  CHECK(tutti_test::exchangeOverNet(pair, out.data(), out.size(), target.data, target.bytes, {}, rr) == out.size());
  CHECK(std::memcmp(target.data, out.data(), out.size()) == 0);
  const uint64_t before = dmabufCounts().reads;
  pair.recv->flush(target.data, out.size(), rr);
  CHECK(dmabufCounts().reads == before + 1);
  pair.recv->flush(target.data, out.size(), rr);  // the flush QP is reused
  CHECK(dmabufCounts().reads == before + 2);
  {
    ScopedEnv off("NCCL_GDR_FLUSH_DISABLE", "1");
    pair.recv->flush(target.data, out.size(), rr);
    CHECK(dmabufCounts().reads == before + 2);
  }
  // Host memory needs no flush: none is issued.
  CHECK(tutti_test::exchangeOverNet(pair, out, hostIn) == out.size());
  pair.recv->flush(hostIn.data(), hostIn.size(), {});
  CHECK(dmabufCounts().reads == before + 2);
  pair.recv->deregisterMemory(rr);
}

TEST_CASE("net/ib: a bad dmabuf descriptor or offset is refused naming the call, the device and the peer",
          "[net][ib][dmabuf]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  DeviceMemory memory(2);
  std::string closedFd = tutti_test::errorOf([&] { pair.recv->registerDmaBuf(memory.data, page, 1000000, 0); });
  CHECK_THAT(closedFd, Catch::Contains("ibv_reg_dmabuf_mr") && Catch::Contains("standin_0:1") &&
                           Catch::Contains("the sender") && Catch::Contains("fd 1000000"));
  std::string beyond = tutti_test::errorOf([&] { pair.send->registerDmaBuf(memory.data, page, memory.fd, page + 1); });
  CHECK_THAT(beyond, Catch::Contains("ibv_reg_dmabuf_mr") && Catch::Contains("standin_0:1") &&
                         Catch::Contains("the receiver") && Catch::Contains("Invalid argument"));
  // A descriptor of something that is no dmabuf (a pipe).
  int pipeFds[2];
  REQUIRE(pipe(pipeFds) == 0);
  std::string notDmabuf = tutti_test::errorOf([&] { pair.recv->registerDmaBuf(memory.data, page, pipeFds[0], 0); });
  close(pipeFds[0]);
  close(pipeFds[1]);
  CHECK_THAT(notDmabuf, Catch::Contains("ibv_reg_dmabuf_mr") && Catch::Contains("Invalid argument"));
  // An address whose place in its page is not the offset's.
  std::string misaligned = tutti_test::errorOf([&] { pair.recv->registerDmaBuf(memory.data + 8, 64, memory.fd, 16); });
  CHECK_THAT(misaligned, Catch::Contains("Invalid argument"));
  // The connection still works after the refusals.
  std::vector<char> out = tutti_test::randomBytes(1000, 3), in(1000);
  CHECK(tutti_test::exchangeOverNet(pair, out, in) == out.size());
  CHECK(in == out);
}

TEST_CASE("net: backends without dmabuf report dmaBuf=false and refuse registerDmaBuf saying so", "[net][ib][dmabuf]") {
  SECTION("the IB backend over a library or kernel without dmabuf support") {
    Standin standin;
    ScopedEnv off("TUTTI_IBVERBS_STANDIN_DMABUF", "0");
    auto backend = openNetBackend("IB", "");
    CHECK_FALSE(backend->properties(0).dmaBuf);
    CHECK_FALSE(backend->properties(0).cudaMemory);
    auto pair = tutti_test::connectNetPair(*backend);
    DeviceMemory memory(1);
    CHECK_THAT(tutti_test::errorOf([&] { pair.recv->registerDmaBuf(memory.data, 64, memory.fd, 0); }),
               Catch::Contains("standin_0:1") && Catch::Contains("dmaBuf=false"));
  }
  SECTION("the Socket backend") {
    ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
    auto backend = openNetBackend("Socket", "");
    CHECK_FALSE(backend->properties(0).dmaBuf);
    auto pair = tutti_test::connectNetPair(*backend);
    DeviceMemory memory(1);
    CHECK_THAT(tutti_test::errorOf([&] { pair.send->registerDmaBuf(memory.data, 64, memory.fd, 0); }),
               Catch::Contains("registerDmaBuf") && Catch::Contains("dmaBuf=false"));
  }
}

}  // namespace
}  // namespace tutti::transport::net
