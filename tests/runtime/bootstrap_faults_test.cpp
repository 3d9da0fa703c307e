// The bootstrap against peers that misbehave: a root that never answers, bad and fuzzed
// connections to the root and to ranks, a rank whose connection ends without a goodbye.
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

RankOutcome joinThrough(const SocketAddress& root) {
  UniqueIdContents contents;
  contents.root = root;
  contents.secret = {1, 2};
  ncclUniqueId id;
  encodeUniqueId(contents, &id);
  return runRanks(1, [&](int) { bootstrap::Bootstrap::create(&id, 1, 0, 2, bootstrap::BootstrapOptions()); })[0];
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
    bootstrap::BootstrapOptions options;
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
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, options);
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
  CHECK(fuzz(contents.root, contents.secret, {kRegister, kBlockReport, kBlockFailed}, sizeof(RegistrationPayload), 300,
             1) == "");
  const int nranks = 3;
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    ranks[rank] = bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, bootstrap::BootstrapOptions());
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
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(2);
  requireAllOk(runRanks(2, [&](int rank) {
    ranks[rank] = bootstrap::Bootstrap::create(ids.data(), 1, rank, 2, bootstrap::BootstrapOptions());
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
  CHECK(seen[0].second.find("its process ended: the bootstrap connection closed without a goodbye") !=
        std::string::npos);

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

}  // namespace
}  // namespace tutti
