// ncclGroupSimulateEnd: the group's operations are estimated by the cost model, not run.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

TEST_CASE("ncclGroupSimulateEnd estimates the group without running it", "[simulate][threads]") {
  std::string failures = tutti_test::runThreads(4, [](int rank, int nranks, ncclComm_t comm) {
    auto simulate = [&](size_t count, int operations) {
      std::vector<float> in(count, 1.0f), out(count, -7.0f);
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      TUTTI_NCCL_CHECK(ncclGroupStart());
      for (int i = 0; i < operations; i++)
        TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      TUTTI_NCCL_CHECK(ncclGroupSimulateEnd(&sim));
      for (float v : out)
        tutti_test::check(v == -7.0f, "rank " + std::to_string(rank) + ": a simulated all-reduce wrote its output");
      return double(sim.estimatedTime);
    };
    double small = simulate(16, 1), large = simulate(1 << 20, 1), twice = simulate(1 << 20, 2);
    tutti_test::check(small > 0, "the estimate of a 64-byte all-reduce is " + std::to_string(small));
    tutti_test::check(large > small, "4 MiB (" + std::to_string(large) + " us) is not slower than 64 B (" +
                                         std::to_string(small) + " us)");
    tutti_test::check(twice > 1.9 * large && twice < 2.1 * large, "two operations of one communicator take " +
                                                                      std::to_string(twice) + " us against " +
                                                                      std::to_string(large) + " for one");
    // The communicator still runs real groups afterwards.
    std::vector<float> in(1000, float(rank + 1)), out(1000);
    TUTTI_NCCL_CHECK(ncclGroupStart());
    TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr));
    TUTTI_NCCL_CHECK(ncclGroupEnd());
    tutti_test::check(out[999] == float(nranks * (nranks + 1) / 2), "the all-reduce after simulating is wrong");
  });
  REQUIRE(failures == "");
}

TEST_CASE("tuttiCommAlgorithm reports what the selector runs, and NCCL_ALGO steers it", "[simulate][threads]") {
  std::string failures = tutti_test::runThreads(4, [](int rank, int, ncclComm_t comm) {
    char name[32];
    int channels = 0;
    TUTTI_NCCL_CHECK(tuttiCommAlgorithm(comm, "allreduce", 1 << 20, ncclFloat32, name, sizeof name, &channels));
    tutti_test::check(channels >= 1 && std::string(name).size() > 0,
                      "rank " + std::to_string(rank) + ": no algorithm reported");
    TUTTI_NCCL_CHECK(tuttiCommAlgorithm(comm, "alltoall", 100, ncclInt8, name, sizeof name, &channels));
    tutti_test::check(std::string(name) == "direct" || std::string(name) == "pairwise" || std::string(name) == "bruck",
                      std::string("all-to-all runs ") + name);
    tutti_test::check(
        tuttiCommAlgorithm(comm, "allreduse", 8, ncclFloat32, name, sizeof name, &channels) == ncclInvalidArgument,
        "a misspelt collective was accepted");
    tutti_test::check(tuttiCommAlgorithm(comm, "allreduce", 8, ncclFloat32, name, 0, &channels) == ncclInvalidArgument,
                      "an empty name buffer was accepted");
  });
  REQUIRE(failures == "");
  // NCCL_ALGO is read when the communicator is made.
  setenv("NCCL_ALGO", "allreduce:chain", 1);
  failures = tutti_test::runThreads(3, [](int rank, int, ncclComm_t comm) {
    char name[32];
    int channels = 0;
    for (size_t count : {size_t(2), size_t(1) << 22}) {
      TUTTI_NCCL_CHECK(tuttiCommAlgorithm(comm, "allreduce", count, ncclFloat32, name, sizeof name, &channels));
      tutti_test::check(std::string(name) == "chain",
                        "rank " + std::to_string(rank) + ": NCCL_ALGO=allreduce:chain gave " + name);
    }
  });
  unsetenv("NCCL_ALGO");
  REQUIRE(failures == "");
}
