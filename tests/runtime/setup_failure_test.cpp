// The first failure reaches everyone: ranks as processes of one host whose calls differ (a count
// mismatch between ranks 0 and 1) all leave within 10 s (TUTTI_TIMEOUT is 60), each naming the
// mismatch, also those that were setting up connections for the call when the rank that caught it
// left.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
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
          // Its words for the calls: the cause, not a connection that closed after the fact.
          tutti_test::check(error.find("called AllReduce") != std::string::npos &&
                                error.find("after its goodbye") == std::string::npos,
                            "the error does not name the mismatch: " + error);
        },
        120);
    CHECK(failures.empty());
    INFO(failures);
    if (!failures.empty()) break;
  }
}

}  // namespace
