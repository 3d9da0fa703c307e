// ncclGroupSimulateEnd: the group's operations are estimated by the cost model, not run.
#include <catch2/catch.hpp>

#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"

TEST_CASE("ncclGroupSimulateEnd estimates the group without running it", "[simulate][threads]") {
  std::string failures = tutti_test::runThreads(4, [](int rank, int nranks, ncclComm_t comm) {
    auto simulate = [&](size_t count, int operations) {
      std::vector<float> in(count, 1.0f), out(count, -7.0f);
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      TUTTI_NCCL_CHECK(ncclGroupStart());
      for (int i = 0; i < operations; i++)
        TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      TUTTI_NCCL_CHECK(ncclGroupSimulateEnd(&sim));
      for (float v : out) tutti_test::check(v == -7.0f, "rank " + std::to_string(rank) + ": a simulated all-reduce wrote its output");
      return double(sim.estimatedTime);
    };
    double small = simulate(16, 1), large = simulate(1 << 20, 1), twice = simulate(1 << 20, 2);
    tutti_test::check(small > 0, "the estimate of a 64-byte all-reduce is " + std::to_string(small));
    tutti_test::check(large > small, "4 MiB (" + std::to_string(large) + " us) is not slower than 64 B (" + std::to_string(small) + " us)");
    tutti_test::check(twice > 1.9 * large && twice < 2.1 * large, "two operations of one communicator take " + std::to_string(twice) +
                                                                      " us against " + std::to_string(large) + " for one");
    // The communicator still runs real groups afterwards.
    std::vector<float> in(1000, float(rank + 1)), out(1000);
    TUTTI_NCCL_CHECK(ncclGroupStart());
    TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr));
    TUTTI_NCCL_CHECK(ncclGroupEnd());
    tutti_test::check(out[999] == float(nranks * (nranks + 1) / 2), "the all-reduce after simulating is wrong");
  });
  REQUIRE(failures == "");
}
