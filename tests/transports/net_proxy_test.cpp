// The net proxy's hand-over to a worker that drives the sockets itself (NetProxy::tryProgress,
// startDriving/stopDriving/releaseDriving): while a worker drives, the proxy thread leaves the
// sockets alone and the worker's passes move the slots; once it stops or releases them, the
// thread moves them again; a failure met
// in a worker's pass is reported by the thread, naming the peer. Through an external plugin (tutti's
// own, with its strictness knobs, and the strict stand-in): messages found by tutti's header where test() reports no
// size, a peer's close without a goodbye that is no fault while nothing waits on it (its last messages delivered, even
// those met in the pass that meets its end), and one that is.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "tests/common/env_support.h"
#include "tests/common/transport_context_support.h"
#include "transports/net/net_proxy.h"
#include "transports/net/plugin/plugin_backend.h"
#include "transports/net/plugin/plugin_loader.h"
#include "transports/net/socket/socket_backend.h"

namespace tutti::transport::net {
namespace {

using BackendFactory = std::function<std::unique_ptr<net::NetBackend>()>;

// tutti's own plugin (its Socket backend behind the ABI), through the loader and adapter.
std::unique_ptr<net::NetBackend> pluginBackend() {
  std::vector<net::NetPlugin> plugins = net::openNetPlugins({TUTTI_TEST_NET_PLUGIN});
  REQUIRE(plugins.size() == 1);
  return net::makePluginBackend(plugins[0].net, plugins[0].library);
}

// The strict plugin stand-in (tests/net_plugin_standin/), written apart from tutti.
std::unique_ptr<net::NetBackend> strictPluginBackend() {
  std::vector<net::NetPlugin> plugins = net::openNetPlugins({TUTTI_TEST_STRICT_PLUGIN});
  REQUIRE(plugins.size() == 1);
  return net::makePluginBackend(plugins[0].net, plugins[0].library);
}

// Two one-rank halves of a 2-rank communicator in this process: rank 0 sends, rank 1 receives,
// each through its own proxy, over one loopback TCP connection (the Socket backend's, or a
// plugin's).
struct ProxyPair {
  tutti_test::TestTransportContext comms[2] = {{0, 2, transport::FifoShape{4, 4096}},
                                               {1, 2, transport::FifoShape{4, 4096}}};
  std::unique_ptr<NetProxy> sender, receiver;
  kern::FifoHeader* out = nullptr;  // rank 0's send FIFO
  kern::FifoHeader* in = nullptr;   // rank 1's receive FIFO
  kern::Bell workerBells[2];

  explicit ProxyPair(const BackendFactory& makeBackend = net::makeSocketBackend) {
    sender = std::make_unique<NetProxy>(comms[0], makeBackend());
    receiver = std::make_unique<NetProxy>(comms[1], makeBackend());
    net::NetHandle handle{};
    auto listener = receiver->backend().listen(0, &handle);
    std::atomic<bool> abort{false};
    auto send = sender->backend().connect(0, handle, deadlineAfter(10), &abort);
    auto recv = listener->accept(deadlineAfter(10), &abort);
    out = sender->addSend(std::move(send), 1, 0, 0, &workerBells[0]);
    in = receiver->addRecv(std::move(recv), 0, 0, 0, &workerBells[1]);
  }

  // Writes slot number `n` of the send FIFO (a pattern of n) and publishes it, as an executor does.
  void publish(uint64_t n) {
    auto* slot = reinterpret_cast<unsigned char*>(kern::fifoSlot(out, n));
    std::memset(slot, int(n & 0xff), 100 + size_t(n));
    out->sizes[n % out->nsteps] = 100 + n;
    kern::fifoStoreRelease(&out->head, n + 1);
    kern::ringBell(sender->bell());
  }

  // Waits (at most 10 s) until rank 1 holds slot n, checks it and frees it. `drive`: rank 0's
  // worker calls tryProgress meanwhile.
  void receive(uint64_t n, bool drive) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (kern::fifoLoadAcquire(&in->head) <= n) {
      if (std::chrono::steady_clock::now() > deadline) FAIL("slot " << n << " did not arrive within 10 s");
      if (drive)
        sender->tryProgress();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    REQUIRE(in->sizes[n % in->nsteps] == 100 + n);
    const auto* slot = reinterpret_cast<const unsigned char*>(kern::fifoSlot(in, n));
    for (size_t i = 0; i < 100 + n; i++) REQUIRE(slot[i] == (n & 0xff));
    kern::fifoStoreRelease(&in->tail, n + 1);
    kern::ringBell(receiver->bell());
  }
};

TEST_CASE("net proxy: a driving worker's passes move the slots, the proxy thread keeps off until it stops",
          "[net][proxy]") {
  ProxyPair pair;
  pair.publish(0);
  pair.receive(0, false);  // the proxy threads move it

  pair.sender->startDriving();
  pair.publish(1);
  // Many of the thread's check-ins (one a millisecond): it must not take the slot.
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  CHECK(kern::fifoLoadAcquire(&pair.out->tail) == 1);
  CHECK(kern::fifoLoadAcquire(&pair.in->head) == 1);
  pair.receive(1, true);  // the worker's passes send it
  CHECK(kern::fifoLoadAcquire(&pair.out->tail) == 2);

  // Wrapping the FIFO several times, the worker alone.
  for (uint64_t n = 2; n < 14; n++) {
    pair.publish(n);
    pair.receive(n, true);
  }
  pair.sender->stopDriving();
  for (uint64_t n = 14; n < 20; n++) {
    pair.publish(n);
    pair.receive(n, false);  // the thread again
  }
  CHECK_FALSE(pair.comms[0].failed());
  CHECK_FALSE(pair.comms[1].failed());
}

TEST_CASE("net proxy: sockets released at the end of operations go back to the thread", "[net][proxy]") {
  ProxyPair pair;
  // Operations in a row, each driving, moving its slot, making a last pass and releasing (as the
  // executor's runQueues does), with the thread kept off in between.
  for (uint64_t n = 0; n < 12; n++) {
    pair.sender->startDriving();
    pair.publish(n);
    pair.receive(n, true);
    pair.sender->tryProgress();
    pair.sender->releaseDriving();
  }
  // Nothing drives now: the thread takes the sockets back and moves the next slots alone.
  for (uint64_t n = 12; n < 20; n++) {
    pair.publish(n);
    pair.receive(n, false);
  }
  // A release right after a slot was published, before any pass took it: still delivered.
  pair.sender->startDriving();
  pair.publish(20);
  pair.sender->releaseDriving();
  pair.receive(20, false);
  // What an operation's end asks before releasing: a published slot counts as waiting until the
  // backend has finished it (the executor then makes one more pass).
  pair.sender->startDriving();
  CHECK_FALSE(pair.sender->sendsWaiting());
  pair.publish(21);
  CHECK(pair.sender->sendsWaiting());
  pair.receive(21, true);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pair.sender->sendsWaiting() && std::chrono::steady_clock::now() < deadline) pair.sender->tryProgress();
  CHECK_FALSE(pair.sender->sendsWaiting());
  pair.sender->releaseDriving();
  CHECK_FALSE(pair.comms[0].failed());
  CHECK_FALSE(pair.comms[1].failed());
}

TEST_CASE("net proxy: a failure met in a worker's pass is reported by the proxy thread, naming the peer",
          "[net][proxy][faults]") {
  ProxyPair pair;
  pair.publish(0);
  pair.receive(0, false);
  pair.receiver.reset();  // the peer's end closes
  pair.sender->startDriving();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Sends into a closed connection fail on the first or a later one (TCP learns of the close
  // from the peer's reset).
  for (uint64_t next = 1; !pair.comms[0].failed();) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("no failure within 10 s of the peer closing");
    if (next - kern::fifoLoadAcquire(&pair.out->tail) < pair.out->nsteps) pair.publish(next++);
    pair.sender->tryProgress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pair.sender->stopDriving();
  std::string message = pair.comms[0].firstFailure();
  INFO(message);
  CHECK(pair.comms[0].firstFailureCode() == ErrorCode::Remote);
  CHECK(message.find("network connection to rank 1") != std::string::npos);
  CHECK(message.find("host1") != std::string::npos);
  CHECK(pair.comms[0].abort.load());
  CHECK_FALSE(pair.sender->tryProgress());  // nothing more moves after a failure
}

TEST_CASE("net proxy: through a plugin whose test() leaves sizes unwritten, messages keep their sizes and bytes",
          "[net][proxy][plugin]") {
  tutti_test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  tutti_test::ScopedEnv noSizes("TUTTI_SOCKET_PLUGIN_NO_SIZES", "1");
  ProxyPair pair(pluginBackend);
  // Sizes from 100 up, several FIFO turns: each one's size comes from tutti's header, and the
  // bytes after it are the executor's (receive() checks both).
  for (uint64_t n = 0; n < 12; n++) {
    pair.publish(n);
    pair.receive(n, false);
  }
  CHECK_FALSE(pair.comms[0].failed());
  CHECK_FALSE(pair.comms[1].failed());
}

TEST_CASE("net proxy: a plugin peer's close without a goodbye, with nothing waiting on it, is no failure",
          "[net][proxy][plugin]") {
  tutti_test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  tutti_test::ScopedEnv noGoodbye("TUTTI_SOCKET_PLUGIN_NO_GOODBYE", "1");
  ProxyPair pair(pluginBackend);
  for (uint64_t n = 0; n < 6; n++) {
    pair.publish(n);
    pair.receive(n, false);
  }
  // Rank 0 finishes first: its last sends drained, its proxy (and with it the plugin's send comm)
  // goes. Rank 1's proxy keeps receives posted on the connection; their failure is the peer's end.
  pair.sender->drain(10);
  pair.sender.reset();
  // A failure is reported a second after it is met (the proxy waits for the peer's notice first).
  std::this_thread::sleep_for(std::chrono::seconds(3));
  INFO(pair.comms[1].firstFailure());
  CHECK_FALSE(pair.comms[1].failed());
  CHECK_FALSE(pair.comms[1].abort.load());
}

TEST_CASE("net proxy: a plugin peer's last messages, met in the same pass as its end, reach the FIFO",
          "[net][proxy][plugin]") {
  tutti_test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  tutti_test::ScopedEnv noGoodbye("TUTTI_STRICT_PLUGIN_NO_GOODBYE", "1");
  ProxyPair pair(strictPluginBackend);
  // Rank 1's thread keeps off: its one pass below, after rank 0 has sent three messages and
  // closed without a goodbye, finds them complete and the receive posted after them failed.
  pair.receiver->startDriving();
  for (uint64_t n = 0; n < 3; n++) pair.publish(n);
  pair.sender->drain(10);
  pair.sender.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the bytes and the end arrive
  pair.receiver->tryProgress();
  for (uint64_t n = 0; n < 3; n++) pair.receive(n, false);
  pair.receiver->stopDriving();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a failure would be reported by now
  INFO(pair.comms[1].firstFailure());
  CHECK_FALSE(pair.comms[1].failed());
}

TEST_CASE("net proxy: a plugin peer's close while a send to it waits fails the communicator, naming the peer",
          "[net][proxy][plugin][faults]") {
  tutti_test::ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  tutti_test::ScopedEnv noGoodbye("TUTTI_SOCKET_PLUGIN_NO_GOODBYE", "1");
  ProxyPair pair(pluginBackend);
  pair.publish(0);
  pair.receive(0, false);
  pair.receiver.reset();  // rank 1 leaves while rank 0 still has messages for it
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (uint64_t next = 1; !pair.comms[0].failed();) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("no failure within 10 s of the peer closing");
    if (next - kern::fifoLoadAcquire(&pair.out->tail) < pair.out->nsteps) pair.publish(next++);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::string message = pair.comms[0].firstFailure();
  INFO(message);
  CHECK(message.find("network connection to rank 1") != std::string::npos);
  CHECK(message.find("TuttiSocket") != std::string::npos);
}

}  // namespace
}  // namespace tutti::transport::net
