// Tests of the bootstrap with ranks as threads on loopback: rendezvous through one or several
// roots, allGather, barrier, tagged p2p, missing ranks, hostile connections, abort and timeouts.
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
#include "runtime/bootstrap.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_wire.h"

namespace tutti {
namespace {

using namespace bootstrap_wire;

// Every test runs on loopback with a short bootstrap timeout, so failure cases end quickly.
void useLoopback(int timeoutSeconds = 3) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("NCCL_SOCKET_FAMILY");
  unsetenv("NCCL_COMM_ID");
  setenv("TUTTI_BOOTSTRAP_TIMEOUT", std::to_string(timeoutSeconds).c_str(), 1);
}

struct RankOutcome {
  bool ok = false;
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  double seconds = 0;
};

// Runs body(rank) on one thread per rank; exceptions stay in their thread and are reported.
std::vector<RankOutcome> runRanks(int nranks, const std::function<void(int)>& body) {
  std::vector<RankOutcome> outcomes(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      auto start = std::chrono::steady_clock::now();
      try {
        body(rank);
        outcomes[rank].ok = true;
      } catch (const Error& error) {
        outcomes[rank].code = error.code();
        outcomes[rank].message = error.message();
      } catch (const std::exception& error) {
        outcomes[rank].message = std::string("unexpected exception: ") + error.what();
      }
      outcomes[rank].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

void requireAllOk(const std::vector<RankOutcome>& outcomes) {
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    INFO("rank " << rank << ": " << outcomes[rank].message);
    REQUIRE(outcomes[rank].ok);
  }
}

std::vector<ncclUniqueId> makeIds(int nIds) {
  std::vector<ncclUniqueId> ids(nIds);
  for (ncclUniqueId& id : ids) bootstrapGetUniqueId(&id);
  return ids;
}

// The byte every check compares against: a function of who sent it, to whom, under which tag.
uint8_t patternByte(int from, int to, uint32_t tag, size_t index) {
  return static_cast<uint8_t>(from * 131 + to * 31 + tag * 7 + index * 13 + (index >> 8));
}

std::vector<uint8_t> pattern(int from, int to, uint32_t tag, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = patternByte(from, to, tag, i);
  return bytes;
}

// allGather of distinct per-rank bytes; every slot is checked against what its owner wrote.
void checkAllGather(Bootstrap& bootstrap, size_t bytesPerRank, uint32_t salt) {
  int n = bootstrap.nranks();
  std::vector<uint8_t> data(n * bytesPerRank, 0xEE);
  std::vector<uint8_t> mine = pattern(bootstrap.rank(), -1, salt, bytesPerRank);
  std::memcpy(data.data() + bootstrap.rank() * bytesPerRank, mine.data(), bytesPerRank);
  bootstrap.allGather(data.data(), bytesPerRank);
  for (int owner = 0; owner < n; ++owner)
    for (size_t i = 0; i < bytesPerRank; ++i)
      if (data[owner * bytesPerRank + i] != patternByte(owner, -1, salt, i))
        throw Error(ErrorCode::Internal, "allGather slot " + std::to_string(owner) + " byte " + std::to_string(i) +
                                             " is wrong on rank " + std::to_string(bootstrap.rank()));
}

void expectMessage(Bootstrap& bootstrap, int from, uint32_t tag, size_t size) {
  std::vector<uint8_t> received(size, 0xEE);
  bootstrap.recv(from, tag, received.data(), size);
  if (received != pattern(from, bootstrap.rank(), tag, size))
    throw Error(ErrorCode::Internal, "message from rank " + std::to_string(from) + " tag " + std::to_string(tag) +
                                         " has wrong contents on rank " + std::to_string(bootstrap.rank()));
}

void sendPattern(Bootstrap& bootstrap, int to, uint32_t tag, size_t size) {
  std::vector<uint8_t> bytes = pattern(bootstrap.rank(), to, tag, size);
  bootstrap.send(to, tag, bytes.data(), size);
}

// Everything a job does over the bootstrap, with results checked.
void exerciseBootstrap(Bootstrap& bootstrap, std::vector<std::atomic<int>>& arrivals) {
  int rank = bootstrap.rank();
  int n = bootstrap.nranks();
  checkAllGather(bootstrap, 1, 1);
  checkAllGather(bootstrap, 13, 2);
  checkAllGather(bootstrap, 4096 + 3, 3);

  // A barrier lets nobody through before everyone has arrived.
  for (int round = 0; round < 3; ++round) {
    arrivals[round].fetch_add(1);
    bootstrap.barrier();
    if (arrivals[round].load() != n)
      throw Error(ErrorCode::Internal, "rank " + std::to_string(rank) + " left barrier " + std::to_string(round) +
                                           " before every rank arrived");
  }

  // Ring: 0 bytes, 1 byte and 1 MiB, each on its own tag.
  int next = (rank + 1) % n;
  int prev = (rank - 1 + n) % n;
  const size_t ringSizes[] = {0, 1, 1 << 20};
  for (uint32_t i = 0; i < 3; ++i) sendPattern(bootstrap, next, 2000 + i, ringSizes[i]);
  for (uint32_t i = 3; i-- > 0;) expectMessage(bootstrap, prev, 2000 + i, ringSizes[i]);  // any order of tags

  // All-to-all, including to itself, several tags and sizes; two messages on one tag keep order.
  const size_t sizes[] = {0, 1, 1000};
  for (int peer = 0; peer < n; ++peer) {
    for (uint32_t t = 0; t < 3; ++t) sendPattern(bootstrap, peer, 3000 + t, sizes[t]);
    sendPattern(bootstrap, peer, 3100, 8);
    sendPattern(bootstrap, peer, 3100, 5);
  }
  for (int peer = n - 1; peer >= 0; --peer) {
    for (uint32_t t = 3; t-- > 0;) expectMessage(bootstrap, peer, 3000 + t, sizes[t]);
    expectMessage(bootstrap, peer, 3100, 8);
    expectMessage(bootstrap, peer, 3100, 5);
  }
  bootstrap.barrier();
}

TEST_CASE("bootstrap: allGather, barrier and p2p for 1, 2, 3, 5 and 8 ranks") {
  useLoopback();
  int nranks = GENERATE(1, 2, 3, 5, 8);
  INFO("nranks " << nranks);
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::vector<std::atomic<int>> arrivals(3);
  std::vector<RankOutcome> outcomes = runRanks(nranks, [&](int rank) {
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), 1, rank, nranks, BootstrapOptions());
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
  auto [nranks, nIds] = GENERATE(std::make_pair(2, 2), std::make_pair(5, 2), std::make_pair(3, 3),
                                 std::make_pair(7, 3), std::make_pair(8, 3));
  INFO("nranks " << nranks << ", nIds " << nIds);
  std::vector<ncclUniqueId> ids = makeIds(nIds);
  std::vector<std::atomic<int>> arrivals(3);
  std::vector<RankOutcome> outcomes = runRanks(nranks, [&](int rank) {
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), nIds, rank, nranks, BootstrapOptions());
    exerciseBootstrap(*bootstrap, arrivals);
  });
  requireAllOk(outcomes);
}

TEST_CASE("bootstrap: a message larger than one frame arrives whole") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  const size_t size = (9 << 20) + 17;  // several frames
  requireAllOk(runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), 1, rank, 2, BootstrapOptions());
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
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), 1, rank, nranks, BootstrapOptions());
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
    if (rank != 1)
      changed.wait_for(lock, std::chrono::seconds(10), [&] { return !received[size_t(rank)].empty(); });
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
      Bootstrap::create(ids.data(), 1, rank, 4, BootstrapOptions());
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
      Bootstrap::create(ids.data(), 1, rank, 6, BootstrapOptions());
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
      Bootstrap::create(ids.data(), 2, rank, 5, BootstrapOptions());
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
RankOutcome joinThrough(const SocketAddress& root) {
  UniqueIdContents contents;
  contents.root = root;
  contents.secret = {1, 2};
  ncclUniqueId id;
  encodeUniqueId(contents, &id);
  return runRanks(1, [&](int) { Bootstrap::create(&id, 1, 0, 2, BootstrapOptions()); })[0];
}

TEST_CASE("bootstrap: a root that never answers, or is not there, fails the rank") {
  useLoopback(1);
  SECTION("listening but silent") {
    // The kernel accepts connections on a listener nobody serves.
    Socket silent = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
    RankOutcome outcome = joinThrough(silent.localAddress());
    CHECK(outcome.code == ErrorCode::Timeout);
    CHECK(outcome.message.find(silent.localAddress().toString()) != std::string::npos);
  }
  SECTION("nothing listening") {
    SocketAddress closed;
    {
      Socket probe = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
      closed = probe.localAddress();
    }
    RankOutcome outcome = joinThrough(closed);
    CHECK(outcome.code == ErrorCode::Timeout);
    CHECK(outcome.message.find(closed.toString()) != std::string::npos);
    CHECK(outcome.message.find("refused") != std::string::npos);
  }
}

// A raw connection that sends something and reports whether the other side closed it.
class RawClient {
 public:
  explicit RawClient(const SocketAddress& address) : socket_(Socket::connect(address, deadlineAfter(10), nullptr)) {}

  void send(const void* data, size_t size) { socket_.sendAll(data, size, deadlineAfter(10), nullptr); }

  void sendHeader(uint32_t type, uint64_t payloadBytes, const Secret& secret, int32_t sender = 0, uint32_t tag = 1000) {
    FrameHeader header = makeFrameHeader(type, tag, sender, secret, payloadBytes);
    send(&header, sizeof header);
  }

  // True once the peer closed the connection (it may first send an error frame, which is skipped).
  bool closedByPeer(double seconds) {
    SteadyTime deadline = deadlineAfter(seconds);
    uint8_t buffer[4096];
    while (SteadyClock::now() < deadline) {
      Socket::ReadResult read = socket_.readSome(buffer, sizeof buffer);
      if (read.closed) return true;
      if (read.bytes == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  Socket socket_;
};

// Sends every kind of bad input to `target`; returns the ones whose connection was not dropped
// (no Catch2 assertions here: it runs on other threads).
std::string attack(const SocketAddress& target, const Secret& realSecret, uint32_t wellFormedType,
                   double handshakeSeconds) {
  std::vector<std::unique_ptr<RawClient>> clients;
  Secret wrong = {realSecret[0] ^ 1, realSecret[1]};

  clients.push_back(std::make_unique<RawClient>(target));  // well-formed frame, wrong secret
  clients.back()->sendHeader(wellFormedType, 8, wrong);
  uint64_t body = 0;
  clients.back()->send(&body, sizeof body);

  clients.push_back(std::make_unique<RawClient>(target));  // random bytes
  std::mt19937_64 random(12345);
  std::vector<uint8_t> noise(256);
  for (uint8_t& byte : noise) byte = static_cast<uint8_t>(random());
  clients.back()->send(noise.data(), noise.size());

  clients.push_back(std::make_unique<RawClient>(target));  // absurd length, right secret
  clients.back()->sendHeader(wellFormedType, 1ull << 40, realSecret);

  clients.push_back(std::make_unique<RawClient>(target));  // truncated: half a header, then silence
  FrameHeader header{};
  header.magic = kFrameMagic;
  clients.back()->send(&header, sizeof header / 2);

  clients.push_back(std::make_unique<RawClient>(target));  // silent

  const char* kinds[] = {"wrong secret", "random bytes", "absurd length", "truncated frame", "silent"};
  std::string survivors;
  for (size_t i = 0; i < clients.size(); ++i)
    if (!clients[i]->closedByPeer(handshakeSeconds + 8))
      survivors += std::string(kinds[i]) + " to " + target.toString() + " was not dropped; ";
  return survivors;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST_CASE("bootstrap: bad connections to the root and to a rank during init are dropped and logged") {
  const int timeoutSeconds = 8;  // the handshake limit is a quarter of it: 2 s
  useLoopback(timeoutSeconds);
  std::filesystem::path logFile =
      std::filesystem::temp_directory_path() / ("tutti-bootstrap-test-" + std::to_string(getpid()) + ".log");
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logFile.c_str(), 1);
  log::reset();

  std::vector<ncclUniqueId> ids = makeIds(1);
  UniqueIdContents contents = decodeUniqueId(ids[0]);
  const int nranks = 3;
  std::mutex mutex;
  std::condition_variable changed;
  std::string rank1Listener;
  bool releaseLastRank = false;

  std::string rootSurvivors;
  std::string rankSurvivors;
  std::thread attacker([&] {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::seconds(20), [&] { return !rank1Listener.empty(); });
    std::string rankListener = rank1Listener;
    lock.unlock();
    std::thread rootAttacker([&] { rootSurvivors = attack(contents.root, contents.secret, kRegister, 2); });
    if (!rankListener.empty()) rankSurvivors = attack(SocketAddress::parse(rankListener), contents.secret, kData, 2);
    rootAttacker.join();
    lock.lock();
    releaseLastRank = true;
    changed.notify_all();
  });

  std::vector<std::atomic<int>> arrivals(3);
  std::vector<RankOutcome> outcomes = runRanks(nranks, [&](int rank) {
    BootstrapOptions options;
    if (rank == 2) {
      // The last rank joins only after the attack, so the root is still gathering.
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(30), [&] { return releaseLastRank; });
    }
    if (rank == 1)
      options.onListening = [&](const std::string& address) {
        std::lock_guard<std::mutex> lock(mutex);
        rank1Listener = address;
        changed.notify_all();
      };
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), 1, rank, nranks, options);
    exerciseBootstrap(*bootstrap, arrivals);
  });
  attacker.join();

  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  log::reset();
  std::string logText = readFile(logFile);
  std::filesystem::remove(logFile);

  requireAllOk(outcomes);
  CHECK(rootSurvivors == "");
  CHECK(rankSurvivors == "");
  INFO(logText);
  CHECK(logText.find("bootstrap root " + contents.root.toString() + ": dropped connection from 127.0.0.1:") !=
        std::string::npos);
  CHECK(logText.find("bootstrap rank 1 of 3: dropped connection from 127.0.0.1:") != std::string::npos);
  CHECK(logText.find("wrong secret") != std::string::npos);
  CHECK(logText.find("bad magic") != std::string::npos);
  CHECK(logText.find("announces 1099511627776 bytes") != std::string::npos);
  CHECK(logText.find("truncated frame") != std::string::npos);
  CHECK(logText.find("no frame within") != std::string::npos);
}

// Frames that are wrong in one random way each: magic, secret, type, length, or cut short.
std::string fuzz(const SocketAddress& target, const Secret& realSecret, const std::vector<uint32_t>& allowedTypes,
                 uint64_t maxAllowed, int connections, uint64_t seed) {
  std::mt19937_64 random(seed);
  for (int i = 0; i < connections; ++i) {
    uint32_t type = allowedTypes[random() % allowedTypes.size()];
    uint32_t tag = static_cast<uint32_t>(random());
    int32_t sender = static_cast<int32_t>(random());
    FrameHeader header = makeFrameHeader(type, tag, sender, realSecret, random() % 64);
    switch (random() % 5) {
      case 0: header.magic ^= 1ull << (random() % 64); break;
      case 1: header.secret[random() % 2] ^= 1ull << (random() % 64); break;
      case 2: header.type = static_cast<uint32_t>(random() % 2 ? random() : 8 + random() % 8); break;
      case 3: header.payloadBytes = maxAllowed + 1 + random() % (UINT64_MAX - maxAllowed); break;
      default: header.secret[0] ^= 1; break;  // and cut short below
    }
    std::vector<uint8_t> bytes(sizeof header + random() % 96);
    std::memcpy(bytes.data(), &header, sizeof header);
    for (size_t b = sizeof header; b < bytes.size(); ++b) bytes[b] = static_cast<uint8_t>(random());
    size_t length = random() % 4 == 0 ? random() % bytes.size() : bytes.size();
    try {
      RawClient client(target);
      client.send(bytes.data(), length);
    } catch (const Error& error) {
      // A reset because the other side already dropped us is fine; anything else is not.
      if (error.code() != ErrorCode::Remote) return error.message();
    }
  }
  return {};
}

TEST_CASE("bootstrap: fuzzed frames never take down a root or a listener") {
  useLoopback(10);
  std::vector<ncclUniqueId> ids = makeIds(1);
  UniqueIdContents contents = decodeUniqueId(ids[0]);
  CHECK(fuzz(contents.root, contents.secret, {kRegister, kBlockReport, kBlockFailed}, sizeof(RegistrationPayload),
             300, 1) == "");
  const int nranks = 3;
  std::vector<std::unique_ptr<Bootstrap>> ranks(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    ranks[rank] = Bootstrap::create(ids.data(), 1, rank, nranks, BootstrapOptions());
  }));
  for (int rank = 0; rank < nranks; ++rank)
    CHECK(fuzz(SocketAddress::parse(ranks[rank]->peerAddress(rank)), contents.secret, {kData, kDataPart},
               kMaxDataFrameBytes, 100, 2 + rank) == "");
  std::vector<std::atomic<int>> arrivals(3);
  requireAllOk(runRanks(nranks, [&](int rank) { exerciseBootstrap(*ranks[rank], arrivals); }));
}

TEST_CASE("bootstrap: a rank's connection that ends without a goodbye reports the rank lost, a goodbye does not") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  Secret secret = decodeUniqueId(ids[0]).secret;
  std::vector<std::unique_ptr<Bootstrap>> ranks(2);
  requireAllOk(runRanks(2, [&](int rank) {
    ranks[rank] = Bootstrap::create(ids.data(), 1, rank, 2, BootstrapOptions());
    ranks[rank]->barrier();
  }));
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, std::string>> lost;
  ranks[0]->setPeerLostHandler([&](int peer, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    lost.emplace_back(peer, reason);
    changed.notify_all();
  });
  auto lostAfter = [&](size_t count, double seconds) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return lost.size() > count; });
    return lost;
  };
  SocketAddress target = SocketAddress::parse(ranks[0]->peerAddress(0));

  {  // claims rank 1 with the secret, says goodbye, closes: an orderly close
    RawClient client(target);
    client.sendHeader(kData, 0, secret, 1, 1000);
    client.sendHeader(kData, 0, secret, 1, kTagGoodbye);
  }
  {  // a goodbye without the secret is dropped like any bad frame, and means nothing
    RawClient client(target);
    client.sendHeader(kData, 0, {secret[0] ^ 1, secret[1]}, 1, kTagGoodbye);
    CHECK(client.closedByPeer(5));
  }
  ranks[1].reset();  // the real rank 1 leaves in order
  CHECK(lostAfter(0, 1.5).empty());

  {  // claims rank 1, then closes without a goodbye: as when its process is killed
    RawClient client(target);
    client.sendHeader(kData, 0, secret, 1, 1000);
  }
  std::vector<std::pair<int, std::string>> seen = lostAfter(0, 5);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == 1);
  CHECK(seen[0].second.find("its process ended: the bootstrap connection closed without a goodbye") != std::string::npos);

  {  // dies in the middle of a frame
    RawClient client(target);
    client.sendHeader(kData, 0, secret, 1, 1000);
    FrameHeader half{};
    half.magic = kFrameMagic;
    client.send(&half, sizeof half / 2);
  }
  seen = lostAfter(1, 5);
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].first == 1);
  CHECK(seen[1].second.find("connection closed in the middle of a frame") != std::string::npos);
  ranks[0]->setPeerLostHandler(nullptr);
}

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
    std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(ids.data(), 2, rank, 3, BootstrapOptions());
    addresses[rank] = bootstrap->peerAddress((rank + 1) % 3);
    exerciseBootstrap(*bootstrap, arrivals);
  }));
  for (const std::string& address : addresses) CHECK(address.rfind("[::1]:", 0) == 0);
}

TEST_CASE("bootstrap: abort ends a waiting recv promptly, a deadline names the peer") {
  useLoopback();
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::atomic<bool> abortFlag{false};
  std::vector<std::unique_ptr<Bootstrap>> ranks(2);
  requireAllOk(runRanks(2, [&](int rank) {
    BootstrapOptions options;
    options.abortFlag = &abortFlag;
    options.timeoutSeconds = rank == 0 ? 60 : 1;
    ranks[rank] = Bootstrap::create(ids.data(), 1, rank, 2, options);
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
  std::vector<ncclUniqueId> ids = makeIds(1);
  std::vector<std::unique_ptr<Bootstrap>> ranks(2);
  requireAllOk(runRanks(2, [&](int rank) { ranks[rank] = Bootstrap::create(ids.data(), 1, rank, 2, BootstrapOptions()); }));

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
  bootstrapGetUniqueId(&id);
  UniqueIdContents contents = decodeUniqueId(id);
  CHECK(contents.fromCommId);
  CHECK(contents.root.toString() == commId);
  CHECK(contents.secret == kCommIdSecret);
  // Twice: the second job's root starts where the first one's has just finished.
  for (int job = 0; job < 2; ++job) {
    INFO("job " << job);
    std::vector<std::atomic<int>> arrivals(3);
    requireAllOk(runRanks(3, [&](int rank) {
      std::unique_ptr<Bootstrap> bootstrap = Bootstrap::create(&id, 1, rank, 3, BootstrapOptions());
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
    Bootstrap::create(&zeros, 1, 0, 1, BootstrapOptions());
    FAIL("an all-zero id was accepted");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::InvalidArgument);
  }
  CHECK_THROWS_AS(Bootstrap::create(&id, 2, 0, 1, BootstrapOptions()), Error);  // more ids than ranks
  CHECK_THROWS_AS(Bootstrap::create(&id, 1, 1, 1, BootstrapOptions()), Error);  // rank out of range
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
