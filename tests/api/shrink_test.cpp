// ncclCommShrink and ncclCommRevoke: shrinking a healthy communicator, shrinking with
// NCCL_SHRINK_ABORT after a rank process was SIGKILLed mid-loop, revoking one with an operation
// pending, and the arguments and exclude lists they refuse.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"
#include "tests/common/shared_memory_support.h"

using tutti_test::check;
using tutti_test::initPair;
using tutti_test::monotonicNanoseconds;
using tutti_test::runProcesses;
using tutti_test::runThreads;
using tutti_test::ScopedEnv;
using tutti_test::secondsSince;
using tutti_test::SharedWithChildren;

namespace {

// Sum all-reduces of a few sizes on comm, checked against the float64 reference of every rank's
// generated inputs; `seed` shifts the inputs so that repeated calls differ.
void checkedAllReduces(ncclComm_t comm, const std::string& who, size_t seed = 0) {
  int nranks = 0, rank = -1;
  TUTTI_NCCL_CHECK(ncclCommCount(comm, &nranks));
  TUTTI_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  for (size_t count : {size_t(1), size_t(1000), size_t(70001)}) {
    for (ncclDataType_t type : {ncclFloat32, ncclFloat64}) {
      const size_t bytes = tutti_test::elementBytes(type);
      std::vector<unsigned char> in(count * bytes), out(count * bytes);
      tutti_test::fillInput(type, ncclSum, nranks, rank, in.data(), count, seed);
      TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, type, ncclSum, comm, nullptr));
      std::string wrong = tutti_test::checkReduced(type, ncclSum, nranks, out.data(), count, seed);
      check(wrong.empty(), who + ": all-reduce of " + std::to_string(count) + " elements over " +
                               std::to_string(nranks) + " ranks: " + wrong);
    }
  }
}

std::string lastError(ncclComm_t comm) { return ncclGetLastError(comm); }

}  // namespace

TEST_CASE(
    "ncclCommShrink of a healthy communicator: the survivors, renumbered, reduce correctly and the parent carries on",
    "[shrink][device-path]") {
  const int excluded = 1;
  std::string failures = runThreads(4, [&](int rank, int nranks, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank);
    if (rank != excluded) {
      int exclude[] = {excluded};
      ncclComm_t child = nullptr;
      TUTTI_NCCL_CHECK(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
      int count = 0, childRank = -1;
      TUTTI_NCCL_CHECK(ncclCommCount(child, &count));
      TUTTI_NCCL_CHECK(ncclCommUserRank(child, &childRank));
      check(count == nranks - 1, who + ": the shrunk communicator has " + std::to_string(count) + " ranks");
      check(childRank == rank - (rank > excluded ? 1 : 0),
            who + " is rank " + std::to_string(childRank) + " of the shrunk one");
      checkedAllReduces(child, who + " in the shrunk communicator");
      TUTTI_NCCL_CHECK(ncclCommDestroy(child));
    }
    // NCCL_SHRINK_DEFAULT leaves the parent as it was: all four ranks still reduce on it.
    checkedAllReduces(comm, who + " in the parent", 7);
  });
  CHECK(failures == "");
}

TEST_CASE(
    "a rank process SIGKILLed mid-loop: the survivors shrink with NCCL_SHRINK_ABORT and carry on with correct results",
    "[shrink][faults][processes][shm]") {
  const int timeoutSeconds = 20;
  ScopedEnv timeout("TUTTI_TIMEOUT", std::to_string(timeoutSeconds).c_str());
  struct State {
    std::atomic<int64_t> killedAt{0};
    std::atomic<int> shrunk{0};
  };
  SharedWithChildren<State> state;
  // Rank 0 too: the lowest survivor, which makes the new root, is then parent rank 1.
  const int victim = GENERATE(0, 2);
  INFO("rank " << victim << " killed");
  std::string failures = runProcesses(
      4,
      [&](int rank, int nranks, ncclComm_t comm) {
        const std::string who = "rank " + std::to_string(rank);
        std::vector<float> in(4096), out(4096);
        ncclResult_t result = ncclSuccess;
        for (int i = 0; i < 100000 && result == ncclSuccess; i++) {
          if (rank == victim && i == 20) {
            state->killedAt.store(monotonicNanoseconds());
            raise(SIGKILL);
          }
          for (size_t k = 0; k < in.size(); k++) in[k] = float((rank + 1) * (i % 7 + 1));
          result = ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
          if (result == ncclSuccess)
            check(out[0] == float(nranks * (nranks + 1) / 2 * (i % 7 + 1)) && out.back() == out[0],
                  who + ": all-reduce " + std::to_string(i) + " before the kill gave " + std::to_string(out[0]));
        }
        check(result == ncclRemoteError,
              who + ": the loop ended with " + ncclGetErrorString(result) + ": " + lastError(comm));
        int exclude[] = {victim};
        ncclComm_t child = nullptr;
        TUTTI_NCCL_CHECK(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT));
        double seconds = double(monotonicNanoseconds() - state->killedAt.load()) / 1e9;
        check(seconds < timeoutSeconds + 5,
              who + ": the shrunk communicator was ready " + std::to_string(seconds) + " s after the kill");
        int count = 0;
        TUTTI_NCCL_CHECK(ncclCommCount(child, &count));
        check(count == 3, who + ": the shrunk communicator has " + std::to_string(count) + " ranks");
        for (size_t round = 0; round < 3; round++) checkedAllReduces(child, who + " in the shrunk communicator", round);
        TUTTI_NCCL_CHECK(ncclCommDestroy(child));
        state->shrunk.fetch_add(1);
        // The runner destroys the aborted parent.
      },
      90);
  CHECK(failures == "process " + std::to_string(victim) + " died of signal 9\n");
  CHECK(state->shrunk.load() == 3);
}

TEST_CASE(
    "ncclCommRevoke stops a pending operation, refuses later calls, tells the peer, and shrink and destroy still work",
    "[shrink][revoke][faults]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");  // the revoke, not a timeout, must end the operation
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  std::vector<float> buf(1 << 16, 1.0f);
  // Cold, the all-reduce waits in its connections' setup; warm, in the executor.
  const bool warm = GENERATE(false, true);
  INFO((warm ? "connections made before" : "connections not made yet"));
  if (warm)
    REQUIRE(tutti_test::runOnThreads(2, [&](int r) {
              std::vector<float> mine(buf.size(), 1.0f);
              TUTTI_NCCL_CHECK(
                  ncclAllReduce(mine.data(), mine.data(), mine.size(), ncclFloat32, ncclSum, comms[r], nullptr));
            }) == "");
  // Rank 1 never joins the all-reduce; rank 0 waits for it until revoked.
  ncclResult_t pending = ncclSuccess;
  std::string pendingMessage;
  auto start = std::chrono::steady_clock::now();
  std::thread stuck([&] {
    pending = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[0], nullptr);
    pendingMessage = ncclGetLastError(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT) == ncclSuccess);
  stuck.join();
  CHECK(secondsSince(start) < 10);
  INFO("the pending all-reduce: " << pendingMessage);
  CHECK(pending == ncclInvalidUsage);
  CHECK(pendingMessage.find("revoked") != std::string::npos);

  // Quiescent: NCCL's rule is ncclSuccess from now on, while every operation is refused.
  ncclResult_t async = ncclInternalError;
  REQUIRE(ncclCommGetAsyncError(comms[0], &async) == ncclSuccess);
  CHECK(async == ncclSuccess);
  float x = 1.0f;
  CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr) == ncclInvalidUsage);
  std::string refused = ncclGetLastError(nullptr);
  INFO(refused);
  CHECK(refused.find("ncclAllReduce") != std::string::npos);
  CHECK(refused.find("revoked (ncclCommRevoke)") != std::string::npos);
  CHECK(ncclCommFinalize(comms[0]) == ncclInvalidUsage);

  // The peer hears of it: its communicator fails, naming rank 0 and the revoke.
  ncclResult_t peer = ncclSuccess;
  for (int i = 0; i < 500 && peer == ncclSuccess; i++) {
    REQUIRE(ncclCommGetAsyncError(comms[1], &peer) == ncclSuccess);
    if (peer == ncclSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(peer == ncclRemoteError);
  std::string peerMessage = ncclGetLastError(nullptr);
  INFO(peerMessage);
  CHECK(peerMessage.find("rank 0") != std::string::npos);
  CHECK(peerMessage.find("ncclCommRevoke") != std::string::npos);

  // Both shrink with nothing excluded: a working communicator of the same two ranks.
  ncclComm_t children[2] = {nullptr, nullptr};
  std::string failures = tutti_test::runOnThreads(2, [&](int r) {
    TUTTI_NCCL_CHECK(ncclCommShrink(comms[r], nullptr, 0, &children[r], nullptr, NCCL_SHRINK_DEFAULT));
    checkedAllReduces(children[r], "rank " + std::to_string(r) + " after the revoke");
    TUTTI_NCCL_CHECK(ncclCommDestroy(children[r]));
  });
  CHECK(failures == "");
  CHECK(ncclCommDestroy(comms[0]) == ncclSuccess);
  CHECK(ncclCommDestroy(comms[1]) == ncclSuccess);
}

TEST_CASE(
    "ncclCommSplit of a revoked communicator: colors and keys still meet, and the new communicators reduce correctly",
    "[shrink][revoke]") {
  std::string failures = runThreads(4, [&](int rank, int nranks, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank);
    TUTTI_NCCL_CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    // Two colors, each ordered by descending parent rank; rank 3 takes no part.
    const int color = rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t child = nullptr;
    TUTTI_NCCL_CHECK(ncclCommSplit(comm, color, -rank, &child, nullptr));
    if (rank == 3) {
      check(child == nullptr, who + ": NCCL_SPLIT_NOCOLOR gave a communicator");
    } else {
      const int expectedCount = rank % 2 == 0 ? 2 : 1;  // color 0: ranks 0 and 2; color 1: rank 1
      const int expectedRank = rank == 0 ? 1 : 0;
      int count = 0, childRank = -1;
      TUTTI_NCCL_CHECK(ncclCommCount(child, &count));
      TUTTI_NCCL_CHECK(ncclCommUserRank(child, &childRank));
      check(count == expectedCount && childRank == expectedRank,
            who + " is rank " + std::to_string(childRank) + " of " + std::to_string(count) + " in its color");
      checkedAllReduces(child, who + " in the split of the revoked communicator");
      TUTTI_NCCL_CHECK(ncclCommDestroy(child));
    }
    (void)nranks;
  });
  CHECK(failures == "");
}

// A peer returns from init once the final barrier has its messages, while this rank may still be
// receiving its last one; if that peer revokes at once, its notice must not fail this rank's init
// (the split that follows needs every rank). Played on a bare communicator, where the window is
// not left to the scheduler.
TEST_CASE("a peer's revoke notice that arrives before init has finished lands when init finishes, and no sooner",
          "[shrink][revoke]") {
  ncclComm comm;
  comm.identity.rank = 0;
  comm.identity.nranks = 4;
  comm.failFromNotice(2, tutti::kRevokeNotice);
  CHECK(comm.error.asyncError.load() == ncclSuccess);
  CHECK_FALSE(comm.error.abortFlag.load());
  comm.finishInit();
  CHECK(comm.error.asyncError.load() == ncclRemoteError);
  CHECK(comm.error.abortFlag.load());
  INFO(comm.error.message);
  CHECK(comm.error.message.find("rank 2") != std::string::npos);
  CHECK(comm.error.message.find("ncclCommRevoke") != std::string::npos);

  // So do the other notices a rank sends only after its own init: ncclCommAbort and
  // ncclCommShrink with NCCL_SHRINK_ABORT on a healthy communicator.
  for (const char* notice : {tutti::kAbortNotice, tutti::kShrinkAbortNotice}) {
    INFO(notice);
    ncclComm early;
    early.identity.rank = 0;
    early.identity.nranks = 4;
    early.failFromNotice(1, notice);
    CHECK(early.error.asyncError.load() == ncclSuccess);
    CHECK_FALSE(early.error.abortFlag.load());
    early.finishInit();
    CHECK(early.error.asyncError.load() == ncclRemoteError);
    CHECK(early.error.message.find(notice) != std::string::npos);
  }

  // Any other notice is a failure of init itself: it stops this rank's init at once.
  ncclComm other;
  other.identity.rank = 0;
  other.identity.nranks = 4;
  other.failFromNotice(3, "its connection setup to rank 1 failed");
  CHECK(other.error.asyncError.load() == ncclRemoteError);
  CHECK(other.error.abortFlag.load());
  INFO(other.error.message);
  CHECK(other.error.message.find("rank 3") != std::string::npos);
}

TEST_CASE("ncclCommShrink and ncclCommRevoke refuse bad arguments with ncclInvalidArgument, naming them",
          "[shrink][arguments]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  ncclComm_t child = nullptr;
  struct Case {
    std::vector<int> list;
    int count;
    bool nullOut;
    int flags;
    const char* says;
  };
  const Case cases[] = {
      {{0}, 1, false, NCCL_SHRINK_DEFAULT, "is this rank"},
      {{2}, 1, false, NCCL_SHRINK_DEFAULT, "out of range"},
      {{-1}, 1, false, NCCL_SHRINK_ABORT, "out of range"},
      {{1, 1}, 2, false, NCCL_SHRINK_DEFAULT, "twice"},
      {{1}, 1, true, NCCL_SHRINK_DEFAULT, "newcomm is NULL"},
      {{1}, -1, false, NCCL_SHRINK_DEFAULT, "negative"},
      {{}, 1, false, NCCL_SHRINK_DEFAULT, "excludeRanksList is NULL"},
      {{1}, 1, false, 2, "shrinkFlags 2"},
  };
  for (const Case& c : cases) {
    int* list = c.list.empty() ? nullptr : const_cast<int*>(c.list.data());
    CHECK(ncclCommShrink(comms[0], list, c.count, c.nullOut ? nullptr : &child, nullptr, c.flags) ==
          ncclInvalidArgument);
    std::string message = ncclGetLastError(nullptr);
    INFO(message);
    CHECK(message.find(c.says) != std::string::npos);
    CHECK(message.find("ncclCommShrink: rank 0 of 2") != std::string::npos);
    CHECK(child == nullptr);
  }
  CHECK(ncclCommShrink(nullptr, nullptr, 0, &child, nullptr, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument);
  CHECK(ncclCommRevoke(comms[0], 1) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("revokeFlags 1") != std::string::npos);
  // None of that touched the communicators (NCCL_SHRINK_ABORT included): they still reduce.
  std::string failures =
      tutti_test::runOnThreads(2, [&](int r) { checkedAllReduces(comms[r], "rank " + std::to_string(r)); });
  CHECK(failures == "");
  CHECK(ncclCommDestroy(comms[0]) == ncclSuccess);
  CHECK(ncclCommDestroy(comms[1]) == ncclSuccess);
}

TEST_CASE("survivors that pass different exclude lists fail with ncclInvalidUsage, saying so", "[shrink][arguments]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "5");
  ScopedEnv bootstrapTimeout("TUTTI_BOOTSTRAP_TIMEOUT", "3");
  std::vector<ncclResult_t> results(3, ncclSuccess);
  std::vector<std::string> messages(3);
  std::string failures = runThreads(3, [&](int rank, int, ncclComm_t comm) {
    if (rank == 2) return;  // rank 0 leaves it out; rank 1 does not
    int exclude[] = {2};
    ncclComm_t child = nullptr;
    results[size_t(rank)] = ncclCommShrink(comm, exclude, rank == 0 ? 1 : 0, &child, nullptr, NCCL_SHRINK_DEFAULT);
    messages[size_t(rank)] = ncclGetLastError(nullptr);
    if (child) ncclCommDestroy(child);
  });
  CHECK(failures == "");
  INFO(messages[1]);
  CHECK(results[1] == ncclInvalidUsage);
  CHECK(messages[1].find("rank 0 (") != std::string::npos);
  CHECK(messages[1].find("same exclude list") != std::string::npos);
  // Rank 0 made a communicator of two that rank 1 never joins.
  CHECK(results[0] != ncclSuccess);
}

TEST_CASE("ncclCommShrink with a nonblocking config returns ncclInProgress until the new communicator has joined",
          "[shrink][nonblocking]") {
  const int excluded = 0;  // the lowest survivor, which makes the new root, is then parent rank 1
  std::string failures = runThreads(3, [&](int rank, int, ncclComm_t comm) {
    if (rank == excluded) return;
    const std::string who = "rank " + std::to_string(rank);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int exclude[] = {excluded};
    ncclComm_t child = nullptr;
    ncclResult_t result = ncclCommShrink(comm, exclude, 1, &child, &config, NCCL_SHRINK_DEFAULT);
    check(result == ncclInProgress || result == ncclSuccess,
          who + ": ncclCommShrink returned " + ncclGetErrorString(result));
    check(child != nullptr, who + ": a nonblocking shrink must hand out the communicator at once");
    ncclResult_t state = ncclInProgress;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      TUTTI_NCCL_CHECK(ncclCommGetAsyncError(child, &state));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    check(state == ncclSuccess, who + ": the shrunk communicator's state is " + ncclGetErrorString(state));
    int childRank = -1;
    TUTTI_NCCL_CHECK(ncclCommUserRank(child, &childRank));
    check(childRank == rank - 1, who + " is rank " + std::to_string(childRank) + " of the shrunk one");
    checkedAllReduces(child, who + " in the shrunk communicator");
    TUTTI_NCCL_CHECK(ncclCommDestroy(child));
  });
  CHECK(failures == "");
}

TEST_CASE("a dead rank left out of the exclude list fails the survivors' shrink in bounded time, naming it",
          "[shrink][faults][processes][shm]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "4");
  ScopedEnv bootstrapTimeout("TUTTI_BOOTSTRAP_TIMEOUT", "4");
  const int victim = 2;
  std::string failures = runProcesses(
      3,
      [&](int rank, int nranks, ncclComm_t comm) {
        const std::string who = "rank " + std::to_string(rank);
        std::vector<float> buf(4096, 1.0f);
        TUTTI_NCCL_CHECK(
            ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr));  // all joined
        if (rank == victim) raise(SIGKILL);
        ncclResult_t result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
        check(result == ncclRemoteError, who + ": the all-reduce returned " + ncclGetErrorString(result));
        auto start = std::chrono::steady_clock::now();
        ncclComm_t child = nullptr;
        result = ncclCommShrink(comm, nullptr, 0, &child, nullptr, NCCL_SHRINK_ABORT);
        std::string message = lastError(comm);
        double seconds = secondsSince(start);
        if (child) ncclCommDestroy(child);
        check(result != ncclSuccess && result != ncclInProgress, who + ": the shrink with nothing excluded returned " +
                                                                     ncclGetErrorString(result) + " over " +
                                                                     std::to_string(nranks) + " ranks");
        check(seconds < 4 + 4 + 5,
              who + ": the shrink failed only after " + std::to_string(seconds) + " s: " + message);
        check(message.find("ncclCommShrink") != std::string::npos && message.find("rank 2") != std::string::npos,
              who + ": the shrink's error does not name rank 2: " + message);
      },
      60);
  CHECK(failures == "process 2 died of signal 9\n");
}
