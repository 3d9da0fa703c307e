// Calls that disagree between ranks: every message carries its call's signature (kernels/work.h),
// so the first message of a mismatched call fails the receiver at once, naming both calls, and its
// failure notice stops the others; never a silent wrong result.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

namespace {

struct Call {
  size_t count;
  ncclDataType_t type;
};

// Three ranks all-reduce; rank 0 makes `odd`, the others `usual`. Returns each rank's result,
// message and seconds.
struct Outcome {
  ncclResult_t result = ncclSuccess;
  std::string message;
  double seconds = 0;
};
// One ring on one channel for every count: the ranks then open the same connections, and the
// mismatch shows in the first message. (A mismatch that makes the ranks choose different
// algorithms or channel counts leaves them waiting for different connections: that is caught by
// TUTTI_TIMEOUT for now, naming the peer that did not connect.)
std::vector<Outcome> allReduceWith(Call odd, Call usual, const char* algorithm = "ring") {
  setenv("TUTTI_TIMEOUT", "60", 1);  // a mismatch must not need the timeout
  setenv("NCCL_ALGO", algorithm, 1);
  setenv("NCCL_MAX_NCHANNELS", "1", 1);
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const int n = 3;
  std::vector<Outcome> outcomes(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        outcomes[size_t(r)].message = std::string("init: ") + ncclGetLastError(nullptr);
        outcomes[size_t(r)].result = ncclInternalError;
        return;
      }
      const Call c = r == 0 ? odd : usual;
      std::vector<char> in(c.count * 8, 1), out(c.count * 8, 0);
      auto start = std::chrono::steady_clock::now();
      outcomes[size_t(r)].result = ncclAllReduce(in.data(), out.data(), c.count, c.type, ncclSum, comm, nullptr);
      outcomes[size_t(r)].seconds = tutti_test::secondsSince(start);
      outcomes[size_t(r)].message = ncclGetLastError(nullptr);
      ncclCommAbort(comm);
    });
  for (auto& t : threads) t.join();
  unsetenv("TUTTI_TIMEOUT");
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_MAX_NCHANNELS");
  return outcomes;
}

// Every rank failed within seconds, and some rank's message holds both needles (the rank that
// saw the mismatch names both calls; the others name it as the cause).
void requireCaught(const std::vector<Outcome>& outcomes, const std::string& ours, const std::string& theirs) {
  bool named = false;
  for (size_t r = 0; r < outcomes.size(); r++) {
    INFO("rank " << r << ": " << outcomes[r].message);
    CHECK(outcomes[r].result != ncclSuccess);
    CHECK(outcomes[r].seconds < 10);
    named = named || (outcomes[r].message.find(ours) != std::string::npos &&
                      outcomes[r].message.find(theirs) != std::string::npos);
  }
  CHECK(named);
}

}  // namespace

TEST_CASE("mismatch: a count that differs between ranks fails every rank at once, naming both calls",
          "[mismatch][device-path]") {
  // Large enough to go through the plans' FIFOs, not the one-shot mailboxes.
  requireCaught(allReduceWith({100000, ncclFloat32}, {400000, ncclFloat32}), "count 100000", "count 400000");
}

TEST_CASE("mismatch: the same bytes as another type fail instead of reducing garbage", "[mismatch][device-path]") {
  requireCaught(allReduceWith({200000, ncclFloat32}, {200000, ncclInt32}), "float32", "int32");
}

TEST_CASE("mismatch: small all-reduces through the one-shot mailboxes are checked too", "[mismatch][device-path]") {
  // On the host executor with every rank in this process the one-shot all-reduce goes through the
  // mailboxes, which carry the call beside the input; a device executor runs its plan instead.
  requireCaught(allReduceWith({100, ncclFloat32}, {200, ncclFloat32}, "oneshot"), "count 100,", "count 200,");
  requireCaught(allReduceWith({100, ncclFloat32}, {100, ncclInt32}, "oneshot"), "float32", "int32");
}

namespace {

// Ranks as threads (or processes) that each make `call(rank, comm)` under the default selector,
// with a timeout far beyond what the test allows: a mismatch that makes the ranks take different
// paths (so no message carries a signature to compare) must still be caught within seconds, by
// the stalled wait's look at the awaited peer's call (runtime/launch/call_log.h).
using Call2 = std::function<ncclResult_t(int rank, ncclComm_t comm, std::vector<float>& buf)>;

std::vector<Outcome> runCalls(int n, const Call2& call) {
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        outcomes[size_t(r)] = {ncclInternalError, std::string("init: ") + ncclGetLastError(nullptr), 0};
        return;
      }
      std::vector<float> buf(1 << 20, 1.0f);
      auto start = std::chrono::steady_clock::now();
      outcomes[size_t(r)].result = call(r, comm, buf);
      outcomes[size_t(r)].seconds = tutti_test::secondsSince(start);
      outcomes[size_t(r)].message = ncclGetLastError(nullptr);
      ncclCommAbort(comm);
    });
  for (auto& t : threads) t.join();
  return outcomes;
}

}  // namespace

TEST_CASE(
    "mismatch: AllReduce against Broadcast, which wait on different connections, fails within seconds naming both",
    "[mismatch]") {
  auto outcomes = runCalls(3, [](int rank, ncclComm_t comm, std::vector<float>& buf) {
    if (rank == 0) return ncclAllReduce(buf.data(), buf.data(), 100000, ncclFloat32, ncclSum, comm, nullptr);
    return ncclBroadcast(buf.data(), buf.data(), 100000, ncclFloat32, 0, comm, nullptr);
  });
  requireCaught(outcomes, "AllReduce(count 100000", "Broadcast(count 100000, float32, root 0)");
}

TEST_CASE("mismatch: a one-shot mailbox all-reduce against one through the FIFOs fails within seconds naming both",
          "[mismatch]") {
  // 1 KiB goes through the mailboxes (every rank in this process), 64 KiB through a plan's FIFOs.
  auto outcomes = runCalls(3, [](int rank, ncclComm_t comm, std::vector<float>& buf) {
    return ncclAllReduce(buf.data(), buf.data(), rank == 0 ? 256 : 16384, ncclFloat32, ncclSum, comm, nullptr);
  });
  requireCaught(outcomes, "count 256,", "count 16384,");
}

TEST_CASE("mismatch: AllReduce against Broadcast between rank processes is caught through the control blocks",
          "[mismatch][processes]") {
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  std::string failures = tutti_test::runProcesses(
      3,
      [](int rank, int, ncclComm_t comm) {
        std::vector<float> buf(100000, 1.0f);
        auto start = std::chrono::steady_clock::now();
        ncclResult_t result =
            rank == 0 ? ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr)
                      : ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclFloat32, 0, comm, nullptr);
        const double seconds = tutti_test::secondsSince(start);
        const std::string message = ncclGetLastError(comm);
        const std::string who = "rank " + std::to_string(rank) + " (" + std::to_string(seconds) + " s): ";
        tutti_test::check(result != ncclSuccess && seconds < 10, who + "did not fail at once: " + message);
        tutti_test::check(message.find("AllReduce(count 100000") != std::string::npos &&
                              message.find("Broadcast(count 100000") != std::string::npos,
                          who + "the error does not name both calls: " + message);
      },
      90);
  CHECK(failures == "");
}
