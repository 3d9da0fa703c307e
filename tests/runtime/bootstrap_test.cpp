// Tests of the bootstrap with ranks as threads on loopback: rendezvous through one or several
// roots, allGather, barrier, tagged p2p, missing ranks, abort and timeouts (hostile and lost
// peers: bootstrap_faults_test.cpp).
#include <catch2/catch.hpp>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "base/error.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/id.h"
#include "bootstrap/wire.h"

#include "tests/runtime/bootstrap_test_support.h"

namespace tutti {
namespace {

using namespace bootstrap_test;
using namespace bootstrap::wire;

TEST_CASE("bootstrap: allGather, barrier and p2p for 1, 2, 3, 5 and 8 ranks") {
  useLoopback();
  int nranks = GENERATE(1, 2, 3, 5, 8);
  // Ranks as threads of this process, through their inboxes and through the sockets.
  bool shortcut = GENERATE(true, false);
  INFO("nranks " << nranks << (shortcut ? ", same-process shortcut" : ", sockets"));
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::vector<std::atomic<int>> arrivals(3);
  bootstrap::BootstrapOptions options;
  options.sameProcessShortcut = shortcut;
  std::vector<RankOutcome> outcomes = runRanks(nranks, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, options);
    if (bootstrap->rank() != rank || bootstrap->nranks() != nranks)
      throw Error(ErrorCode::Internal, "rank/nranks mismatch");
    for (int peer = 0; peer < nranks; ++peer)
      if (!SocketAddress::parse(bootstrap->peerAddress(peer)).isLoopback())
        throw Error(ErrorCode::Internal, "peer address is not loopback: " + bootstrap->peerAddress(peer));
    exerciseBootstrap(*bootstrap, arrivals);
  });
  requireAllOk(outcomes);
}

TEST_CASE("bootstrap: several roots (nIds 2 and 3) give every rank the full table") {
  useLoopback();
  auto [nranks, nIds] = GENERATE(std::make_pair(2, 2), std::make_pair(5, 2), std::make_pair(3, 3), std::make_pair(7, 3),
                                 std::make_pair(8, 3));
  INFO("nranks " << nranks << ", nIds " << nIds);
  std::vector<ncclUniqueId> ids = makeIds(nIds);
  std::vector<std::atomic<int>> arrivals(3);
  std::vector<RankOutcome> outcomes = runRanks(nranks, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), nIds, rank, nranks, bootstrap::BootstrapOptions());
    exerciseBootstrap(*bootstrap, arrivals);
  });
  requireAllOk(outcomes);
}

TEST_CASE("bootstrap: a message larger than one frame arrives whole") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  const size_t size = (9 << 20) + 17;  // several frames
  requireAllOk(runRanks(2, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 1, rank, 2, bootstrap::BootstrapOptions());
    if (rank == 0) {
      sendPattern(*bootstrap, 1, 1000, size);
      sendPattern(*bootstrap, 1, 1001, 3);
    } else {
      expectMessage(*bootstrap, 0, 1001, 3);
      expectMessage(*bootstrap, 0, 1000, size);
    }
    bootstrap->barrier();
  }));
}

TEST_CASE("bootstrap: a failure notice reaches every other rank, even with a dead peer among them") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  const int nranks = 4;
  const std::string text = "rank 1: the connection to rank 3 failed";
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::vector<std::pair<int, std::string>>> received(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, bootstrap::BootstrapOptions());
    bootstrap->setNoticeHandler([&, rank](int sender, const std::string& t) {
      std::lock_guard<std::mutex> lock(mutex);
      received[size_t(rank)].emplace_back(sender, t);
      changed.notify_all();
    });
    bootstrap->barrier();
    if (rank == 3) return;  // gone before the notice: its listener closes
    if (rank == 1) {
      bootstrap->broadcastNotice(text);
      bootstrap->broadcastNotice("a second failure is not sent");
      bootstrap->flushNotices();
    }
    std::unique_lock<std::mutex> lock(mutex);
    if (rank != 1) changed.wait_for(lock, std::chrono::seconds(10), [&] { return !received[size_t(rank)].empty(); });
    lock.unlock();
    bootstrap->setNoticeHandler(nullptr);
  }));
  for (int rank : {0, 2}) {
    INFO("rank " << rank);
    REQUIRE(received[size_t(rank)].size() == 1);
    CHECK(received[size_t(rank)][0].first == 1);
    CHECK(received[size_t(rank)][0].second == text);
  }
  CHECK(received[1].empty());  // a rank does not notify itself
}

TEST_CASE("bootstrap: ranks that never join are named in every other rank's error") {
  useLoopback(2);
  SECTION("one root") {
    std::vector<ncclUniqueId> ids = makeIds(1);
    std::vector<RankOutcome> outcomes = runRanks(4, [&](int rank) {
      if (rank == 2) return;  // never joins
      bootstrap::Bootstrap::create(ids.data(), 1, rank, 4, bootstrap::BootstrapOptions());
    });
    for (int rank : {0, 1, 3}) {
      INFO("rank " << rank << ": " << outcomes[rank].message);
      CHECK_FALSE(outcomes[rank].ok);
      CHECK(outcomes[rank].code == ErrorCode::Timeout);
      CHECK(outcomes[rank].message.find("rank 2 of 4 never arrived at the bootstrap root") != std::string::npos);
      CHECK(outcomes[rank].seconds < 2 + 10);  // the deadline plus generous slack: no hang
    }
  }
  SECTION("several missing ranks, compressed") {
    std::vector<ncclUniqueId> ids = makeIds(1);
    std::vector<RankOutcome> outcomes = runRanks(6, [&](int rank) {
      if (rank == 1 || rank == 3 || rank == 4) return;
      bootstrap::Bootstrap::create(ids.data(), 1, rank, 6, bootstrap::BootstrapOptions());
    });
    for (int rank : {0, 2, 5}) {
      INFO("rank " << rank << ": " << outcomes[rank].message);
      CHECK(outcomes[rank].code == ErrorCode::Timeout);
      CHECK(outcomes[rank].message.find("ranks 1, 3-4 of 6 never arrived") != std::string::npos);
    }
  }
  SECTION("two roots, the missing rank in the second block") {
    std::vector<ncclUniqueId> ids = makeIds(2);
    std::vector<RankOutcome> outcomes = runRanks(5, [&](int rank) {
      if (rank == 4) return;  // blocks are {0,1,2} and {3,4}
      bootstrap::Bootstrap::create(ids.data(), 2, rank, 5, bootstrap::BootstrapOptions());
    });
    for (int rank : {0, 1, 2, 3}) {
      INFO("rank " << rank << ": " << outcomes[rank].message);
      CHECK(outcomes[rank].code == ErrorCode::Timeout);
      CHECK(outcomes[rank].message.find("rank 4 of 5 never arrived") != std::string::npos);
      CHECK(outcomes[rank].seconds < 2 + 10);
    }
  }
}

// Rank 0 of 2 joining through a root at `root` (with a made-up secret).
TEST_CASE("bootstrap: IPv6 loopback") {
  useLoopback();
  bool haveIpv6Loopback = false;
  for (const NetworkInterface& interface : listNetworkInterfaces())
    haveIpv6Loopback = haveIpv6Loopback || (interface.loopback && interface.address.family() == AF_INET6);
  if (!haveIpv6Loopback) {
    WARN("no ::1 on this host; IPv6 not tested");
    return;
  }
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  std::vector<ncclUniqueId> ids = makeIds(2);
  unsetenv("NCCL_SOCKET_FAMILY");
  CHECK(decodeUniqueId(ids[0]).root.family() == AF_INET6);
  std::vector<std::atomic<int>> arrivals(3);
  std::vector<std::string> addresses(3);
  requireAllOk(runRanks(3, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 2, rank, 3, bootstrap::BootstrapOptions());
    addresses[rank] = bootstrap->peerAddress((rank + 1) % 3);
    exerciseBootstrap(*bootstrap, arrivals);
  }));
  for (const std::string& address : addresses) CHECK(address.rfind("[::1]:", 0) == 0);
}

TEST_CASE("bootstrap: abort ends a waiting recv promptly, a deadline names the peer") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::atomic<bool> abortFlag{false};
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(2);
  requireAllOk(runRanks(2, [&](int rank) {
    bootstrap::BootstrapOptions options;
    options.abortFlag = &abortFlag;
    options.timeoutSeconds = rank == 0 ? 60 : 1;
    ranks[rank] = bootstrap::Bootstrap::create(ids.data(), 1, rank, 2, options);
  }));

  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    abortFlag = true;
  });
  auto start = std::chrono::steady_clock::now();
  uint8_t byte = 0;
  try {
    ranks[0]->recv(1, 1000, &byte, 1);
    FAIL("recv returned without a message");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::Aborted);
  }
  aborter.join();
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 10);  // not the 60 s

  abortFlag = false;
  try {
    ranks[1]->recv(0, 1000, &byte, 1);  // 1 s timeout
    FAIL("recv returned without a message");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::Timeout);
    CHECK(error.message().find("rank 0 (" + ranks[1]->peerAddress(0) + ")") != std::string::npos);
  }
}

TEST_CASE("bootstrap: misuse and departed peers give clear errors") {
  useLoopback();
  bool shortcut = GENERATE(true, false);
  INFO((shortcut ? "same-process shortcut" : "sockets"));
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(2);
  bootstrap::BootstrapOptions options;
  options.sameProcessShortcut = shortcut;
  requireAllOk(
      runRanks(2, [&](int rank) { ranks[rank] = bootstrap::Bootstrap::create(ids.data(), 1, rank, 2, options); }));

  uint8_t bytes[8] = {};
  auto codeOf = [](const std::function<void()>& action) {
    try {
      action();
    } catch (const Error& error) {
      return error.code();
    }
    return ErrorCode::Internal;
  };
  CHECK(codeOf([&] { ranks[0]->send(1, 999, bytes, 1); }) == ErrorCode::InvalidArgument);
  CHECK(codeOf([&] { ranks[0]->send(2, 1000, bytes, 1); }) == ErrorCode::InvalidArgument);
  CHECK(codeOf([&] { ranks[0]->recv(-1, 1000, bytes, 1); }) == ErrorCode::InvalidArgument);
  CHECK(codeOf([&] { ranks[0]->peerAddress(5); }) == ErrorCode::InvalidArgument);

  ranks[0]->send(1, 1000, bytes, 8);
  CHECK(codeOf([&] { ranks[1]->recv(0, 1000, bytes, 4); }) == ErrorCode::InvalidUsage);

  // Rank 0 sends once and leaves: rank 1 still gets the message, then a Remote error, not a hang.
  ranks[0]->send(1, 1001, bytes, 8);
  ranks[0].reset();
  ranks[1]->recv(0, 1001, bytes, 8);
  auto start = std::chrono::steady_clock::now();
  CHECK(codeOf([&] { ranks[1]->recv(0, 1001, bytes, 8); }) == ErrorCode::Remote);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 3);
}

TEST_CASE("bootstrap: NCCL_COMM_ID names a fixed root that the first rank starts") {
  useLoopback();
  uint16_t port = 0;
  {
    Socket probe = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
    port = probe.localAddress().port();
  }
  std::string commId = "127.0.0.1:" + std::to_string(port);
  setenv("NCCL_COMM_ID", commId.c_str(), 1);
  ncclUniqueId id;
  bootstrap::getUniqueId(&id);
  UniqueIdContents contents = decodeUniqueId(id);
  CHECK(contents.fromCommId);
  CHECK(contents.root.toString() == commId);
  CHECK(contents.secret == kCommIdSecret);
  // Twice: the second job's root starts where the first one's has just finished.
  for (int job = 0; job < 2; ++job) {
    INFO("job " << job);
    std::vector<std::atomic<int>> arrivals(3);
    requireAllOk(runRanks(3, [&](int rank) {
      std::unique_ptr<bootstrap::Bootstrap> bootstrap =
          bootstrap::Bootstrap::create(&id, 1, rank, 3, bootstrap::BootstrapOptions());
      exerciseBootstrap(*bootstrap, arrivals);
    }));
  }
  unsetenv("NCCL_COMM_ID");
}

TEST_CASE("bootstrap: unique ids round-trip and foreign bytes are refused") {
  UniqueIdContents contents;
  contents.root = SocketAddress::parse("[::1]:4242");
  contents.secret = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  ncclUniqueId id;
  encodeUniqueId(contents, &id);
  UniqueIdContents decoded = decodeUniqueId(id);
  CHECK(decoded.root == contents.root);
  CHECK(decoded.secret == contents.secret);
  CHECK_FALSE(decoded.fromCommId);

  ncclUniqueId zeros{};
  CHECK_THROWS_AS(decodeUniqueId(zeros), Error);
  useLoopback();
  try {
    bootstrap::Bootstrap::create(&zeros, 1, 0, 1, bootstrap::BootstrapOptions());
    FAIL("an all-zero id was accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::InvalidArgument);
  }
  CHECK_THROWS_AS(bootstrap::Bootstrap::create(&id, 2, 0, 1, bootstrap::BootstrapOptions()),
                  Error);  // more ids than ranks
  CHECK_THROWS_AS(bootstrap::Bootstrap::create(&id, 1, 1, 1, bootstrap::BootstrapOptions()),
                  Error);  // rank out of range
}

TEST_CASE("bootstrap: rank lists and blocks") {
  CHECK(formatRankList({3}) == "3");
  CHECK(formatRankList({12, 3, 7, 8, 9, 10, 11}) == "3, 7-12");
  CHECK(formatRankList({0, 1, 2, 3}) == "0-3");
  std::vector<int> alternate;
  for (int r = 0; r < 100; r += 2) alternate.push_back(r);
  std::string longList = formatRankList(alternate);
  CHECK(longList.find("0, 2, 4") == 0);
  CHECK(longList.find("... and 34 more") != std::string::npos);

  // Blocks: contiguous, cover every rank once, the first nranks % nIds one larger.
  for (int nranks = 1; nranks <= 40; ++nranks) {
    for (int nIds = 1; nIds <= nranks; ++nIds) {
      int expectedRank = 0;
      for (int block = 0; block < nIds; ++block) {
        int size = blockSize(block, nranks, nIds);
        CHECK(size == nranks / nIds + (block < nranks % nIds ? 1 : 0));
        CHECK(firstRankOfBlock(block, nranks, nIds) == expectedRank);
        for (int r = expectedRank; r < expectedRank + size; ++r) CHECK(blockOfRank(r, nranks, nIds) == block);
        expectedRank += size;
      }
      CHECK(expectedRank == nranks);
    }
  }
}

}  // namespace
}  // namespace tutti
