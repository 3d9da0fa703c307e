// Faults: a rank that never joins, an abort from another thread during a stuck collective.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"

using tutti_test::initPair;
using tutti_test::secondsSince;

TEST_CASE("a rank that never joins fails init within the deadline, naming it", "[faults][bootstrap]") {
  setenv("TUTTI_BOOTSTRAP_TIMEOUT", "2", 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const int n = 4;  // rank 3 never comes
  std::vector<ncclResult_t> results(3, ncclSuccess);
  std::vector<std::string> messages(3);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; r++)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      results[size_t(r)] = ncclCommInitRank(&comm, n, id, r);
      messages[size_t(r)] = ncclGetLastError(nullptr);
    });
  for (auto& t : threads) t.join();
  double elapsed = secondsSince(start);
  unsetenv("TUTTI_BOOTSTRAP_TIMEOUT");
  CHECK(elapsed < 10);
  for (int r = 0; r < 3; r++) {
    CHECK(results[size_t(r)] != ncclSuccess);
    INFO(messages[size_t(r)]);
    CHECK(messages[size_t(r)].find("3") != std::string::npos);
    CHECK(messages[size_t(r)].find("never") != std::string::npos);
  }
}

TEST_CASE("ncclCommAbort from another thread ends a collective stuck on an absent peer",
          "[faults][abort][device-path]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  // Rank 1 never calls the all-reduce; rank 0 waits for it until aborted.
  std::vector<float> buf(1 << 20, 1.0f);
  ncclResult_t result = ncclSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread stuck(
      [&] { result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(ncclCommAbort(comms[0]) == ncclSuccess);
  stuck.join();
  double elapsed = secondsSince(start);
  CHECK(result != ncclSuccess);
  CHECK(elapsed < 5);
  REQUIRE(ncclCommAbort(comms[1]) == ncclSuccess);
}

TEST_CASE("a peer that stops moving makes the operation time out, naming it", "[faults][timeout][device-path]") {
  // On the host executor 1 element goes through the shared mailboxes, 4096 through the plan's
  // FIFOs; a device executor takes the FIFOs for both.
  const char* device = std::getenv("TUTTI_DEVICE");
  const bool mailboxes = device == nullptr || std::string(device) == "host";
  const size_t count = GENERATE(size_t(1), size_t(4096));
  INFO(count << " elements");
  setenv("TUTTI_TIMEOUT", "2", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  unsetenv("TUTTI_TIMEOUT");
  std::vector<float> x(count, 1.0f), y(count, 0.0f);
  auto start = std::chrono::steady_clock::now();
  ncclResult_t result = ncclAllReduce(x.data(), y.data(), count, ncclFloat32, ncclSum, comms[0], nullptr);
  std::string message = ncclGetLastError(nullptr);
  CHECK(result == ncclRemoteError);
  CHECK(secondsSince(start) < 10);
  INFO(message);
  CHECK(message.find("rank 1") != std::string::npos);
  CHECK(message.find("AllReduce") != std::string::npos);
  if (count == 1 && mailboxes) CHECK(message.find("waiting for the input of rank 1") != std::string::npos);
  ncclResult_t async = ncclSuccess;
  REQUIRE(ncclCommGetAsyncError(comms[0], &async) == ncclSuccess);
  CHECK(async == ncclRemoteError);
  REQUIRE(ncclCommDestroy(comms[0]) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comms[1]) == ncclSuccess);
}

TEST_CASE("a rank that aborts mid-operation tells its peers, which fail at once naming it",
          "[faults][abort][device-path]") {
  setenv("TUTTI_TIMEOUT", "60", 1);  // the peers must not need their own timeout
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const int n = 3;
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<std::thread> init;
  for (int r = 0; r < n; r++) init.emplace_back([&, r] { ncclCommInitRank(&comms[size_t(r)], n, id, r); });
  for (auto& t : init) t.join();
  unsetenv("TUTTI_TIMEOUT");
  for (ncclComm_t c : comms) REQUIRE(c != nullptr);
  // Ranks 1 and 2 all-reduce; rank 0 never calls, and aborts instead.
  std::vector<ncclResult_t> results(n, ncclSuccess);
  std::vector<std::string> messages(n);
  std::vector<double> seconds(n, 0);
  std::vector<std::thread> peers;
  for (int r = 1; r < n; r++)
    peers.emplace_back([&, r] {
      std::vector<float> buf(1 << 20, 1.0f);
      auto start = std::chrono::steady_clock::now();
      results[size_t(r)] =
          ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[size_t(r)], nullptr);
      seconds[size_t(r)] = secondsSince(start);
      messages[size_t(r)] = ncclGetLastError(nullptr);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(ncclCommAbort(comms[0]) == ncclSuccess);
  for (auto& t : peers) t.join();
  for (int r = 1; r < n; r++) {
    INFO("rank " << r << ": " << messages[size_t(r)]);
    CHECK(results[size_t(r)] == ncclRemoteError);
    CHECK(seconds[size_t(r)] < 0.5 + 5);
    CHECK(messages[size_t(r)].find("rank 0") != std::string::npos);
    CHECK(messages[size_t(r)].find("ncclCommAbort") != std::string::npos);
    REQUIRE(ncclCommAbort(comms[size_t(r)]) == ncclSuccess);
  }
}
