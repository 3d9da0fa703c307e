// The first failure reaches everyone: ranks as processes of one host whose calls differ (a count
// mismatch between ranks 0 and 1) all leave within 10 s (TUTTI_TIMEOUT is 60), each naming the
// mismatch, also those that were setting up connections for the call when the rank that caught it
// left; and a rank whose init fails stops the others' nonblocking inits, waiting for it in the
// bootstrap's exchanges, with its cause.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

namespace {

TEST_CASE("setup failures: a count mismatch between ranks 0 and 1 reaches all 4 rank processes within 10 s",
          "[faults][setup]") {
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  for (int round = 0; round < 3; round++) {
    INFO("round " << round);
    std::string failures = tutti_test::runProcesses(
        4,
        [](int rank, int, ncclComm_t comm) {
          // Rank 1's all-reduce of 64 KiB takes recursive doubling, whose connections it sets up in
          // the call, waiting for its partners' offers; the others' of 8 MiB take the ring made at
          // init, run into rank 1 and find the mismatch.
          std::vector<float> buf(rank == 1 ? 16384 : (1 << 21) + 5, 1.0f);
          const auto start = std::chrono::steady_clock::now();
          ncclResult_t result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
          const double seconds = tutti_test::secondsSince(start);
          const std::string error = ncclGetLastError(comm);
          tutti_test::check(result != ncclSuccess, "the mismatched all-reduce succeeded");
          tutti_test::check(seconds < 10,
                            "the all-reduce failed only after " + std::to_string(seconds) + " s: " + error);
          // Its words for the calls, first: the cause, before any connection that closed after it.
          tutti_test::check(error.find("called AllReduce") < error.find("after its goodbye"),
                            "the error does not lead with the mismatch: " + error);
        },
        120);
    INFO(failures);
    CHECK(failures.empty());
    if (!failures.empty()) break;
  }
}

TEST_CASE("setup failures: a rank whose init fails stops the others' nonblocking inits within 10 s, naming its cause",
          "[faults][setup]") {
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60"), bootstrapTimeout("TUTTI_BOOTSTRAP_TIMEOUT", "60");
  constexpr int kRanks = 4;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<pid_t> children;
  std::vector<int> pipes;
  for (int rank = 0; rank < kRanks; rank++) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      if (rank == 1) setenv("TUTTI_NSTEPS", "1", 1);  // its init fails after joining, before the exchanges
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclComm_t comm = nullptr;
      const auto start = std::chrono::steady_clock::now();
      ncclResult_t result = ncclCommInitRankConfig(&comm, kRanks, id, rank, &config);
      while (result == ncclInProgress || (result == ncclSuccess && comm != nullptr)) {
        if (ncclCommGetAsyncError(comm, &result) != ncclSuccess || result != ncclInProgress) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::string line = "rank " + std::to_string(rank) + " after " + std::to_string(tutti_test::secondsSince(start)) +
                         " s: " + ncclGetErrorString(result) + ": " + ncclGetLastError(comm) + "\n";
      (void)!write(fds[1], line.data(), line.size());
      if (comm != nullptr) ncclCommAbort(comm);
      _exit(0);
    }
    close(fds[1]);
    children.push_back(pid);
    pipes.push_back(fds[0]);
  }
  for (int rank = 0; rank < kRanks; rank++) {
    int status = 0;
    waitpid(children[size_t(rank)], &status, 0);
    std::string line;
    char buf[4096];
    for (ssize_t n; (n = read(pipes[size_t(rank)], buf, sizeof buf)) > 0;) line.append(buf, size_t(n));
    close(pipes[size_t(rank)]);
    INFO(line);
    CHECK(line.find("TUTTI_NSTEPS=1") != std::string::npos);
    CHECK(line.find("ncclSuccess") == std::string::npos);
    const double seconds = std::atof(line.substr(line.find(" after ") + 7).c_str());
    CHECK(seconds < 10);
  }
}

}  // namespace
