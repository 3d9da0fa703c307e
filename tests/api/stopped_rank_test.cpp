// Rank processes on one host, one of which stops (SIGSTOP) in the middle of a loop of all-reduces:
// every survivor's error names the stopped rank with its pid, not only the neighbour it waits for
// (the wait-for diagnosis, runtime/diagnostics/wait_diagnosis.h).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/shared_memory_support.h"

using tutti_test::check;
using tutti_test::monotonicNanoseconds;
using tutti_test::runProcesses;
using tutti_test::ScopedEnv;
using tutti_test::SharedWithChildren;

TEST_CASE("a rank process stopped during all-reduces is named by every survivor however far from it",
          "[faults][processes][shm]") {
  const int nranks = GENERATE(3, 4);
  INFO(nranks << " ranks");
  ScopedEnv timeout("TUTTI_TIMEOUT", "3");
  struct State {
    std::atomic<int64_t> stoppedAt{0};
    std::atomic<int> victimPid{0};
    std::atomic<int> survivorsDone{0};
    std::atomic<int64_t> secondsAfterStopMs[8];
  };
  SharedWithChildren<State> state;
  const int victim = 2;
  std::string failures = runProcesses(
      nranks,
      [&](int rank, int n, ncclComm_t comm) {
        std::vector<int> pids(size_t(n), 0);
        int me = int(getpid());
        TUTTI_NCCL_CHECK(ncclAllGather(&me, pids.data(), 1, ncclInt32, comm, nullptr));
        std::vector<float> buf(1 << 14, 1.0f);
        ncclResult_t result = ncclSuccess;
        for (int i = 0; i < 100000 && result == ncclSuccess; i++) {
          if (rank == victim && i == 20) {
            state->victimPid.store(me);
            state->stoppedAt.store(monotonicNanoseconds());
            raise(SIGSTOP);  // the last survivor kills it
          }
          result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
        }
        const std::string message = ncclGetLastError(comm);
        state->secondsAfterStopMs[rank].store((monotonicNanoseconds() - state->stoppedAt.load()) / 1000000);
        // Every survivor has its error (and asked the stopped rank what it could): it may go now.
        if (state->survivorsDone.fetch_add(1) + 1 == n - 1) kill(pid_t(state->victimPid.load()), SIGKILL);
        const std::string who = "rank " + std::to_string(rank);
        check(result == ncclRemoteError,
              who + ": the all-reduce returned " + ncclGetErrorString(result) + ": " + message);
        const std::string named = "rank 2 (";
        check(message.find(named) != std::string::npos &&
                  message.find("pid " + std::to_string(pids[victim])) != std::string::npos,
              who + "'s error does not name rank 2 and its pid " + std::to_string(pids[victim]) + ": " + message);
        check(
            message.find("did not answer") != std::string::npos && message.find("stopped or hung") != std::string::npos,
            who + "'s error does not say the stopped rank did not answer: " + message);
      },
      120);
  CHECK(failures == "process 2 died of signal 9\n");
  for (int rank = 0; rank < nranks; ++rank)
    if (rank != victim)
      std::printf("stopped rank test, %d ranks: rank %d failed %.2f s after the stop (TUTTI_TIMEOUT 3)\n", nranks, rank,
                  double(state->secondsAfterStopMs[rank].load()) / 1000.0);
}
