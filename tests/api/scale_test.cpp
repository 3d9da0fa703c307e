// Many ranks as threads of one process: init through the same-process bootstrap, one graph of the
// node for all, and collectives past the mailboxes' limit, checked against float64 references.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"

namespace {

using tutti_test::check;
using tutti_test::runThreads;

// An all-reduce (by recursive doubling or ring: past 64 ranks the mailboxes are off), an
// all-gather of every rank's number and a broadcast, each against what the ranks put in.
void checkCollectives(int rank, int nranks, ncclComm_t comm) {
  const size_t count = 5;
  std::vector<float> in(count), out(count, -1.0f);
  tutti_test::fillInput(ncclFloat32, ncclSum, nranks, rank, in.data(), count);
  TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  std::string wrong = tutti_test::checkReduced(ncclFloat32, ncclSum, nranks, out.data(), count);
  check(wrong.empty(), "rank " + std::to_string(rank) + ": all-reduce: " + wrong);

  int32_t mine = rank * 7 + 1;
  std::vector<int32_t> all(size_t(nranks), -1);
  TUTTI_NCCL_CHECK(ncclAllGather(&mine, all.data(), 1, ncclInt32, comm, nullptr));
  for (int r = 0; r < nranks; r++)
    check(all[size_t(r)] == r * 7 + 1, "rank " + std::to_string(rank) + ": all-gather slot " + std::to_string(r) +
                                           " holds " + std::to_string(all[size_t(r)]));

  double value = rank == nranks - 1 ? 2.5 : 0.0;
  TUTTI_NCCL_CHECK(ncclBroadcast(&value, &value, 1, ncclFloat64, nranks - 1, comm, nullptr));
  check(value == 2.5, "rank " + std::to_string(rank) + ": broadcast from the last rank gave " + std::to_string(value));
}

}  // namespace

TEST_CASE("256 ranks as threads initialise and run collectives with correct results", "[comm][scale]") {
  const int nranks = GENERATE(65, 256);
  INFO(nranks << " ranks");
  std::string failures = runThreads(nranks, checkCollectives);
  REQUIRE(failures == "");
}
