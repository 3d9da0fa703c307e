// Every collective x data type x reduction, in and out of place, at several counts, across
// ranks as threads and as processes, against a float64 reference (tests/common/collective_cases_support).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"

using tutti_test::allCases;
using tutti_test::Case;
using tutti_test::Coll;
using tutti_test::runAll;
using tutti_test::runCase;

TEST_CASE("every collective, type and op at small counts, ranks as threads", "[collectives][threads][device-path]") {
  int nranks = GENERATE(1, 2, 3, 4, 8);
  auto cases = allCases({0, 1, 7, 1023}, nranks);
  INFO(nranks << " ranks, " << cases.size() << " cases");
  std::string failures =
      tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(failures == "");
}

namespace {

// At 1M+3 elements checking every element dominates the run time, so the large matrix keeps
// every collective and type but the full set of reductions only for representative types.
bool largeCase(const Case& c) {
  bool allOps = c.type == ncclFloat32 || c.type == ncclBfloat16 || c.type == ncclInt8 || c.type == ncclFloat8e4m3;
  return (c.op == ncclSum || allOps) && (!c.inPlace || c.type == ncclFloat32 || c.type == ncclFloat16);
}

}  // namespace

TEST_CASE("every collective and type at 1M+3 elements, ranks as threads", "[collectives][threads][large]") {
  int nranks = GENERATE(3, 4);
  std::vector<Case> cases;
  for (const Case& c : allCases({(1u << 20) + 3}, nranks))
    if (largeCase(c) && (nranks == 3 || c.type == ncclFloat32 || c.type == ncclFloat8e5m2)) cases.push_back(c);
  std::string failures =
      tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(failures == "");
}

TEST_CASE("every collective, type and op, ranks as processes", "[collectives][processes][device-path]") {
  int nranks = GENERATE(2, 4);
  auto cases = allCases({0, 1, 7, 1023}, nranks);
  for (const Case& c : allCases({(1u << 20) + 3}, nranks))
    if (largeCase(c) && (c.type == ncclFloat32 || c.type == ncclBfloat16)) cases.push_back(c);
  std::string failures =
      tutti_test::runProcesses(nranks, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(failures == "");
}

TEST_CASE("large counts across several channels and FIFO laps", "[collectives][threads][large]") {
  // 48 MiB of float32 per rank: many tiles on each of the channels.
  const size_t count = 12u << 20;
  std::string failures = tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
    for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::AllGather})
      runCase(Case{coll, ncclFloat32, ncclSum, coll == Coll::AllReduce ? count : count / 3, false, 0}, rank, n, comm);
  });
  REQUIRE(failures == "");
}
