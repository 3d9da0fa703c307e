// Tests of the net interface's Socket backend on loopback: messages of many sizes over one and
// several sockets, small messages read ahead of their receives, the length check, hostile
// connections to a listener, abort, backend choice.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "tests/common/env_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/net.h"
#include "transports/net/socket/socket_backend.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;

using Pair = tutti_test::NetPair;
Pair connectPair(NetBackend& backend) { return tutti_test::connectNetPair(backend); }
size_t exchange(Pair& pair, const std::vector<char>& out, std::vector<char>& in) {
  return tutti_test::exchangeOverNet(pair, out, in);
}
std::vector<char> pattern(size_t bytes, uint32_t seed) { return tutti_test::randomBytes(bytes, seed); }

}  // namespace

TEST_CASE("net/socket: messages of many sizes arrive intact, over one and several sockets and helper threads",
          "[net][socket]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  // sockets per thread x helper threads: 1x1 and 3x1 run on the caller's thread (the proxy's);
  // 1x3 and 2x2 start helper threads on both sides.
  auto [nsocks, nthreads] =
      GENERATE(std::pair{"1", "1"}, std::pair{"3", "1"}, std::pair{"1", "3"}, std::pair{"2", "2"});
  ScopedEnv perThread("NCCL_NSOCKS_PERTHREAD", nsocks);
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", nthreads);
  CHECK(socketsPerConnection() == std::atoi(nsocks) * std::atoi(nthreads));
  auto backend = openNetBackend("Socket", "");
  REQUIRE(std::string(backend->name()) == "Socket");
  REQUIRE(backend->deviceCount() >= 1);
  CHECK(backend->properties(0).name == "lo");
  Pair pair = connectPair(*backend);
  uint32_t seed = 1;
  for (size_t bytes :
       {size_t(0), size_t(1), size_t(8), size_t(4095), size_t(100000), size_t(1 << 20) + 3, size_t(3 << 20)}) {
    INFO(bytes << " bytes, " << nsocks << " sockets per thread, " << nthreads << " threads");
    std::vector<char> out = pattern(bytes, seed++), in(bytes + 64, 'x');
    REQUIRE(exchange(pair, out, in) == bytes);
    CHECK((bytes == 0 || std::memcmp(in.data(), out.data(), bytes) == 0));
    CHECK(in[bytes] == 'x');  // nothing written past the message
  }
  // Several in flight at once: they complete in order, each intact.
  std::vector<std::vector<char>> outs, ins;
  std::vector<NetRequest*> sends, recvs;
  for (int i = 0; i < 8; i++) {
    outs.push_back(pattern(size_t(70000 * i + 5), uint32_t(100 + i)));
    ins.emplace_back(outs.back().size());
  }
  for (int i = 0; i < 8; i++) {
    NetRequest* r = pair.recv->irecv(ins[size_t(i)].data(), ins[size_t(i)].size(), 0, {});
    REQUIRE(r != nullptr);
    recvs.push_back(r);
    NetRequest* s = pair.send->isend(outs[size_t(i)].data(), outs[size_t(i)].size(), 0, {});
    REQUIRE(s != nullptr);
    sends.push_back(s);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; i < 8; i++) {
    size_t got = 0;
    while (!pair.recv->test(recvs[size_t(i)], &got)) {
      for (auto& s : sends)
        if (s && pair.send->test(s, nullptr)) s = nullptr;
      REQUIRE(std::chrono::steady_clock::now() < deadline);
    }
    CHECK(got == outs[size_t(i)].size());
    CHECK(ins[size_t(i)] == outs[size_t(i)]);
  }
  // The send buffers must outlive their requests (a helper may still be reading one).
  for (auto& s : sends)
    while (s && !pair.send->test(s, nullptr)) REQUIRE(std::chrono::steady_clock::now() < deadline);
}

TEST_CASE("net/socket: small messages sent before their receives are posted arrive intact, one by one",
          "[net][socket]") {
  // The receiving side reads small pieces into a per-socket stage, which may then hold several
  // messages (lengths and payloads) ahead of the receives; each must still land in its own buffer.
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  auto [nsocks, nthreads] = GENERATE(std::pair{"1", "1"}, std::pair{"3", "1"}, std::pair{"2", "2"});
  ScopedEnv perThread("NCCL_NSOCKS_PERTHREAD", nsocks);
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", nthreads);
  auto backend = openNetBackend("Socket", "");
  Pair pair = connectPair(*backend);
  const std::vector<size_t> sizes = {8, 0, 1, 100, 3000, 16383, 16384, 40000, 8, 5, 20000, 7, 1 << 20, 12, 64};
  std::vector<std::vector<char>> outs;
  std::vector<NetRequest*> sends;
  for (size_t k = 0; k < sizes.size(); k++) {
    outs.push_back(pattern(sizes[k], uint32_t(500 + k)));
    NetRequest* s = pair.send->isend(outs.back().data(), sizes[k], 0, {});
    REQUIRE(s != nullptr);
    sends.push_back(s);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto pumpSends = [&] {
    for (auto& s : sends)
      if (s && pair.send->test(s, nullptr)) s = nullptr;
  };
  // Let the small ones reach the receiver's socket before any receive is posted.
  for (int i = 0; i < 1000; i++) pumpSends();
  for (size_t k = 0; k < sizes.size(); k++) {
    INFO("message " << k << " of " << sizes[k] << " bytes, " << nsocks << " sockets per thread, " << nthreads
                    << " threads");
    std::vector<char> in(sizes[k] + 64, 'x');
    NetRequest* r = pair.recv->irecv(in.data(), in.size(), 0, {});
    REQUIRE(r != nullptr);
    size_t got = 0;
    while (!pair.recv->test(r, &got)) {
      pumpSends();
      REQUIRE(std::chrono::steady_clock::now() < deadline);
    }
    REQUIRE(got == sizes[k]);
    CHECK((sizes[k] == 0 || std::memcmp(in.data(), outs[k].data(), sizes[k]) == 0));
    CHECK(in[sizes[k]] == 'x');
  }
  while (std::any_of(sends.begin(), sends.end(), [](NetRequest* s) { return s != nullptr; })) {
    pumpSends();
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
}

TEST_CASE("net/socket: a message longer than the posted receive is a Remote error", "[net][socket]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  const char* nthreads = GENERATE("1", "2");
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", nthreads);
  // The buffers outlive the connections: a helper thread may still be sending when the test ends.
  std::vector<char> out(5000, 'a'), in(100);
  auto backend = openNetBackend("Socket", "");
  Pair pair = connectPair(*backend);
  NetRequest* s = pair.send->isend(out.data(), out.size(), 0, {});
  REQUIRE(s);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool threw = false;
  NetRequest* r = nullptr;
  bool sent = false;
  while (!threw && std::chrono::steady_clock::now() < deadline) {
    if (!sent) sent = pair.send->test(s, nullptr);  // a request is released once test() says it is done
    try {
      // The length arrives first; the check may already fire when the receive is posted.
      if (r == nullptr)
        r = pair.recv->irecv(in.data(), in.size(), 0, {});
      else
        pair.recv->test(r, nullptr);
    } catch (const Error& e) {
      threw = true;
      CHECK(e.code() == ErrorCode::Remote);
      CHECK(std::string(e.what()).find("5000 bytes") != std::string::npos);
    }
  }
  CHECK(threw);
}

TEST_CASE("net/socket: a closed peer is a Remote error on both sides", "[net][socket]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  const char* nthreads = GENERATE("1", "2");  // 2: the error surfaces from a helper thread
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", nthreads);
  auto backend = openNetBackend("Socket", "");
  Pair pair = connectPair(*backend);
  std::vector<char> in(100);
  NetRequest* r = pair.recv->irecv(in.data(), in.size(), 0, {});
  pair.send.reset();  // the sender goes away
  std::optional<Error> error = tutti_test::firstErrorWithin([&] { pair.recv->test(r, nullptr); });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Remote);
  CHECK(std::string(error->what()).find("closed") != std::string::npos);
}

TEST_CASE("net/socket: a message that arrived before its peer closed is delivered, then the close is an error",
          "[net][socket]") {
  // The sender's last message and its end of stream are read in the same pass (a plugin peer
  // closes without a goodbye): the message is the receiver's, and only the receive posted after
  // it fails.
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  const char* nthreads = GENERATE("1", "2");
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", nthreads);
  auto backend = openNetBackend("Socket", "");
  Pair pair = connectPair(*backend);
  const std::vector<char> out = pattern(3000, 7);
  NetRequest* s = pair.send->isend(out.data(), out.size(), 0, {});
  REQUIRE(s != nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pair.send->test(s, nullptr)) REQUIRE(std::chrono::steady_clock::now() < deadline);
  pair.send.reset();  // gone, no goodbye: its bytes and its end of stream are both on the way
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  std::vector<char> in(4096, 0), next(4096, 0);
  NetRequest* first = pair.recv->irecv(in.data(), in.size(), 0, {});
  NetRequest* second = pair.recv->irecv(next.data(), next.size(), 0, {});
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  size_t bytes = 0;
  bool arrived = false;
  while (!arrived) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    arrived = pair.recv->test(first, &bytes);
  }
  CHECK(bytes == out.size());
  CHECK(std::equal(out.begin(), out.end(), in.begin()));
  std::optional<Error> error = tutti_test::firstErrorWithin([&] { pair.recv->test(second, nullptr); });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Remote);
  CHECK(std::string(error->what()).find("closed") != std::string::npos);
}

TEST_CASE("net/socket: garbage, a wrong secret and a truncated hello do not stop the real peer",
          "[net][socket][hostile]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  auto backend = openNetBackend("Socket", "");
  NetHandle handle{};
  auto listener = backend->listen(0, &handle);
  // The listener's address is in the handle; find it by asking the backend's own connect later.
  // Hostile clients connect to the same port first.
  uint8_t wire[SocketAddress::kWireBytes];
  std::memcpy(wire, handle.bytes + 24, sizeof wire);  // HandleLayout: magic, nonce, nsocks, pad, address
  SocketAddress address = SocketAddress::fromWire(wire);
  REQUIRE(address.isLoopback());
  std::atomic<bool> abort{false};
  auto deadline = deadlineAfter(10);
  std::vector<Socket> hostile;
  {
    Socket garbage = Socket::connect(address, deadline, &abort);
    std::vector<char> bytes = pattern(24, 7);
    garbage.sendAll(bytes.data(), bytes.size(), deadline, &abort);
    hostile.push_back(std::move(garbage));
  }
  {
    Socket wrongSecret = Socket::connect(address, deadline, &abort);
    NetHandle forged = handle;
    forged.bytes[8] ^= 0xff;  // the nonce
    // A well-formed hello with another nonce: the first 8 bytes of a hello are its magic.
    uint64_t hello[3] = {0x7475747469484c4full, 0, 0x0000000100000000ull};
    std::memcpy(&hello[1], forged.bytes + 8, 8);
    wrongSecret.sendAll(hello, sizeof hello, deadline, &abort);
    hostile.push_back(std::move(wrongSecret));
  }
  {
    Socket truncated = Socket::connect(address, deadline, &abort);
    char half[5] = {1, 2, 3, 4, 5};
    truncated.sendAll(half, sizeof half, deadline, &abort);
    truncated.close();
  }
  std::unique_ptr<NetSendComm> send;
  std::thread connector([&] { send = backend->connect(0, handle, deadline, &abort); });
  auto recv = listener->accept(deadline, &abort);
  connector.join();
  REQUIRE(send);
  Pair pair{std::move(send), std::move(recv)};
  std::vector<char> out = pattern(12345, 9), in(12345);
  CHECK(exchange(pair, out, in) == out.size());
  CHECK(in == out);
}

TEST_CASE("net/socket: accept is bounded and abortable", "[net][socket]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  auto backend = openNetBackend("Socket", "");
  NetHandle handle{};
  auto listener = backend->listen(0, &handle);
  std::atomic<bool> abort{false};
  try {
    listener->accept(deadlineAfter(0.2), &abort);
    FAIL("accept returned without a peer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
  }
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  try {
    listener->accept(deadlineAfter(30), &abort);
    FAIL("accept returned without a peer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Aborted);
  }
  aborter.join();
}

TEST_CASE("net/socket: acceptIfReady returns at once, and yields the comm once the peer's sockets are all in",
          "[net][socket]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv perThread("NCCL_NSOCKS_PERTHREAD", "3");
  auto backend = openNetBackend("Socket", "");
  NetHandle handle{};
  auto listener = backend->listen(0, &handle);
  auto start = std::chrono::steady_clock::now();
  CHECK(listener->acceptIfReady() == nullptr);  // nobody has connected: no waiting
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  std::atomic<bool> abort{false};
  Pair pair;
  pair.send = backend->connect(0, handle, deadlineAfter(10), &abort);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(pair.recv = listener->acceptIfReady())) REQUIRE(std::chrono::steady_clock::now() < deadline);
  std::vector<char> out = pattern(300000, 5), in(300000);
  CHECK(exchange(pair, out, in) == out.size());  // over all three sockets
  CHECK(in == out);
  CHECK_THROWS_AS(listener->acceptIfReady(), Error);  // a listener yields its comm once
}

TEST_CASE("net: NCCL_NET and TUTTI_NET_REQUIRE pick a backend by name, or fail naming those that exist", "[net]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  CHECK(std::string(openNetBackend("", "")->name()) == "Socket");
  CHECK(std::string(openNetBackend("socket", "")->name()) == "Socket");  // NCCL compares names without case
  for (auto [requested, required] :
       {std::pair<const char*, const char*>{"NoSuchNet", ""}, {"", "NoSuchNet"}, {"Socket", "NoSuchNet"}}) {
    try {
      openNetBackend(requested, required);
      FAIL("an unknown backend was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidUsage);
      CHECK(std::string(e.what()).find("NoSuchNet") != std::string::npos);
      CHECK(std::string(e.what()).find("available: Socket, IB") != std::string::npos);
    }
  }
}

TEST_CASE("net: an NCCL_SOCKET_IFNAME that matches nothing fails naming the interfaces that exist", "[net]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "=no-such-interface0");
  try {
    openNetBackend("Socket", "");
    FAIL("a backend without interfaces was opened");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK(std::string(e.what()).find("lo") != std::string::npos);
  }
}

}  // namespace tutti::transport::net
