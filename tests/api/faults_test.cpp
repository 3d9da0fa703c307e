// Faults: a rank that never joins, an abort from another thread during a stuck collective.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {
double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Two ranks as threads of this process; comms[1] is left to the caller to ignore or use.
void initPair(ncclComm_t comms[2]) {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::thread second([&] { ncclCommInitRank(&comms[1], 2, id, 1); });
  REQUIRE(ncclCommInitRank(&comms[0], 2, id, 0) == ncclSuccess);
  second.join();
  REQUIRE(comms[1] != nullptr);
}
}  // namespace

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

TEST_CASE("ncclCommAbort from another thread ends a collective stuck on an absent peer", "[faults][abort]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  // Rank 1 never calls the all-reduce; rank 0 waits for it until aborted.
  std::vector<float> buf(1 << 20, 1.0f);
  ncclResult_t result = ncclSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread stuck([&] { result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(ncclCommAbort(comms[0]) == ncclSuccess);
  stuck.join();
  double elapsed = secondsSince(start);
  CHECK(result != ncclSuccess);
  CHECK(elapsed < 5);
  REQUIRE(ncclCommAbort(comms[1]) == ncclSuccess);
}

TEST_CASE("a peer that stops moving makes the operation time out, naming it", "[faults][timeout]") {
  setenv("TUTTI_TIMEOUT", "2", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  unsetenv("TUTTI_TIMEOUT");
  float x = 1, y = 0;
  auto start = std::chrono::steady_clock::now();
  ncclResult_t result = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comms[0], nullptr);
  std::string message = ncclGetLastError(nullptr);
  CHECK(result == ncclRemoteError);
  CHECK(secondsSince(start) < 10);
  INFO(message);
  CHECK(message.find("rank 1") != std::string::npos);
  ncclResult_t async = ncclSuccess;
  REQUIRE(ncclCommGetAsyncError(comms[0], &async) == ncclSuccess);
  CHECK(async == ncclRemoteError);
  REQUIRE(ncclCommDestroy(comms[0]) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comms[1]) == ncclSuccess);
}
