// Rank processes on one host (shm between them) whose peer dies or leaves: a SIGKILLed rank fails
// every survivor within seconds, naming it; a rank that destroys its communicator is no death; a
// process that exits without destroying its communicator fails idle peers quietly.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/shared_memory_support.h"

using tutti_test::CapturedLog;
using tutti_test::check;
using tutti_test::monotonicNanoseconds;
using tutti_test::runProcesses;
using tutti_test::ScopedEnv;
using tutti_test::SharedWithChildren;

namespace {

std::vector<int> gatherPids(ncclComm_t comm, int nranks) {
  std::vector<int> pids(size_t(nranks), 0);
  int me = int(getpid());
  TUTTI_NCCL_CHECK(ncclAllGather(&me, pids.data(), 1, ncclInt32, comm, nullptr));
  return pids;
}

// Every rank contributes rank + 1: the sum is n (n + 1) / 2 everywhere.
void checkedAllReduce(int rank, int nranks, ncclComm_t comm) {
  std::vector<float> buf(4096, float(rank + 1));
  TUTTI_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr));
  float expected = float(nranks * (nranks + 1) / 2);
  for (float v : buf) check(v == expected, "rank " + std::to_string(rank) + ": all-reduce gave " + std::to_string(v));
}

}  // namespace

TEST_CASE("a rank process killed during all-reduces on one host fails every survivor within seconds, naming it",
          "[faults][processes][shm]") {
  // A regression would wait for this, and the runner would kill the ranks first.
  ScopedEnv timeout("TUTTI_TIMEOUT", "120");
  struct State {
    std::atomic<int64_t> killedAt{0};
  };
  SharedWithChildren<State> state;
  const int victim = 2;
  auto start = std::chrono::steady_clock::now();
  std::string failures = runProcesses(
      4,
      [&](int rank, int nranks, ncclComm_t comm) {
        std::vector<int> pids = gatherPids(comm, nranks);
        std::vector<float> buf(1 << 16, 1.0f);
        ncclResult_t result = ncclSuccess;
        for (int i = 0; i < 100000 && result == ncclSuccess; i++) {
          if (rank == victim && i == 20) {
            state->killedAt.store(monotonicNanoseconds());
            raise(SIGKILL);
          }
          result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
        }
        double seconds = double(monotonicNanoseconds() - state->killedAt.load()) / 1e9;
        std::string message = ncclGetLastError(comm);
        std::string who = "rank " + std::to_string(rank);
        check(result == ncclRemoteError,
              who + ": the all-reduce returned " + ncclGetErrorString(result) + ": " + message);
        check(state->killedAt.load() != 0 && seconds < 10,
              who + ": the all-reduce failed " + std::to_string(seconds) + " s after the kill: " + message);
        check(message.find("rank 2 (") != std::string::npos &&
                  message.find("pid " + std::to_string(pids[victim])) != std::string::npos,
              who + "'s error does not name rank 2 and its pid " + std::to_string(pids[victim]) + ": " + message);
        ncclResult_t async = ncclSuccess;
        TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        check(async == ncclRemoteError, who + ": ncclCommGetAsyncError gave " + ncclGetErrorString(async));
        // The runner destroys the failed communicator: a hang there shows as a process killed at 60 s.
      },
      60);
  CHECK(failures == "process 2 died of signal 9\n");
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 40);
}

TEST_CASE("a rank that destroys its communicator is not taken for a dead one", "[faults][processes][shm]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "120");
  std::string failures = runProcesses(4, [&](int rank, int nranks, ncclComm_t comm) {
    checkedAllReduce(rank, nranks, comm);
    if (rank == 0) return;  // the runner destroys it at once
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ncclResult_t async = ncclInProgress;
    TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    check(async == ncclSuccess, "rank " + std::to_string(rank) + ": ncclCommGetAsyncError gave " +
                                    ncclGetErrorString(async) +
                                    " after rank 0 destroyed its communicator: " + ncclGetLastError(comm));
  });
  CHECK(failures == "");
}

TEST_CASE("a process that exits without destroying its communicator fails idle peers without a warning",
          "[faults][processes][shm]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "120");
  CapturedLog log("INFO", "INIT");
  struct State {
    std::atomic<int> finished{0};
  };
  SharedWithChildren<State> state;
  std::string failures = runProcesses(4, [&](int rank, int nranks, ncclComm_t comm) {
    std::vector<int> pids = gatherPids(comm, nranks);
    checkedAllReduce(rank, nranks, comm);
    if (rank == 0) {
      // Only once the others are done: their last operation does not need it any more.
      while (state->finished.load() < nranks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      _exit(0);
    }
    state->finished.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    ncclResult_t async = ncclSuccess;
    TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    std::string message = ncclGetLastError(comm);
    check(async == ncclRemoteError,
          "rank " + std::to_string(rank) + ": ncclCommGetAsyncError gave " + ncclGetErrorString(async));
    check(message.find("rank 0 (") != std::string::npos &&
              message.find("pid " + std::to_string(pids[0])) != std::string::npos,
          "rank " + std::to_string(rank) + "'s error does not name rank 0 and its pid " + std::to_string(pids[0]) +
              ": " + message);
  });
  CHECK(failures == "");
  std::vector<std::string> seen = log.linesWith("is gone: its process ended");
  CHECK_FALSE(seen.empty());
  for (const std::string& line : seen) CHECK(line.find(" WARN ") == std::string::npos);
}
