// TUTTI_ALGO_FILE end to end: a plan file loaded at communicator init, chosen through NCCL_ALGO
// like a built-in, runs and gives the float64 reference's results, also when it is written for a
// root other than 0; a file written for another rank count says so when it is the only choice.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

namespace {
std::string ring4Plan() { return std::string(TUTTI_TEST_SOURCE_DIR) + "/algorithms/data/ring4.plan"; }
}  // namespace

TEST_CASE("plan file: a loaded plan is chosen by NCCL_ALGO and runs, all-reduce and broadcast from its root 1",
          "[plan-file][threads]") {
  tutti_test::ScopedEnv file("TUTTI_ALGO_FILE", ring4Plan().c_str());
  tutti_test::ScopedEnv algo("NCCL_ALGO", "allreduce:myring;broadcast:myring");
  REQUIRE(tutti_test::runThreads(4, [&](int rank, int nranks, ncclComm_t comm) {
            const std::string me = "rank " + std::to_string(rank) + ": ";
            const size_t count = 100003;
            for (tutti::plan::Coll coll : {tutti::plan::Coll::AllReduce, tutti::plan::Coll::Broadcast}) {
              const std::string name = comm->planning.selector->select(coll, count * sizeof(double)).algorithm->name;
              tutti_test::check(name == "myring",
                                me + tutti::plan::collName(coll) + " chose " + name + ", not the plan file's myring");
            }
            std::vector<double> sum(count), data(count);
            for (size_t i = 0; i < count; i++) {
              sum[i] = double(rank + 1) * double(i % 1009) + 0.25;
              data[i] = rank == 1 ? double(i) * 3.5 : -1.0;
            }
            TUTTI_NCCL_CHECK(ncclAllReduce(sum.data(), sum.data(), count, ncclFloat64, ncclSum, comm, nullptr));
            TUTTI_NCCL_CHECK(ncclBroadcast(data.data(), data.data(), count, ncclFloat64, 1, comm, nullptr));
            for (size_t i = 0; i < count; i += 7) {
              double want = 0;
              for (int q = 0; q < nranks; q++) want += double(q + 1) * double(i % 1009) + 0.25;
              tutti_test::check(sum[i] == want, me + "all-reduce element " + std::to_string(i) + " is " +
                                                    std::to_string(sum[i]) + ", want " + std::to_string(want));
              tutti_test::check(data[i] == double(i) * 3.5, me + "broadcast element " + std::to_string(i) + " is " +
                                                                std::to_string(data[i]) + ", want " +
                                                                std::to_string(double(i) * 3.5));
            }
          }) == "");
}

TEST_CASE("plan file: forced at a rank count it was not written for, the error says which it serves",
          "[plan-file][threads]") {
  tutti_test::ScopedEnv file("TUTTI_ALGO_FILE", ring4Plan().c_str());
  tutti_test::ScopedEnv algo("NCCL_ALGO", "allreduce:myring");
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int, ncclComm_t comm) {
            std::vector<float> x(100000, float(rank));
            ncclResult_t result = ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr);
            std::string message = ncclGetLastError(comm);
            tutti_test::check(result == ncclInvalidUsage,
                              "rank " + std::to_string(rank) + ": gave " + ncclGetErrorString(result));
            tutti_test::check(
                message.find("myring") != std::string::npos &&
                    message.find("written for 4 ranks, not 3") != std::string::npos,
                "rank " + std::to_string(rank) + ": the error does not say the plan serves 4 ranks: " + message);
          }) == "");
}
