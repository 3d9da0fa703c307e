// Every registered algorithm, run by the host executor for every collective it serves, against
// the float64 reference: ranks as threads (1 to 9) and as processes. The algorithm is forced per
// communicator, as NCCL_ALGO does, so each one runs whatever the selector would prefer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/ranks_support.h"

using tutti_test::Case;
using tutti_test::Coll;

namespace {

bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter; }

// Cases for one collective: representative types and ops (sum everywhere; the other ops on
// float32 and int32; avg on an integer type for the post-division), in and out of place, roots
// at both ends.
std::vector<Case> casesFor(Coll coll, int nranks, const std::vector<size_t>& counts) {
  std::vector<Case> cases;
  std::vector<std::pair<ncclDataType_t, ncclRedOp_t>> typed = {
      {ncclFloat32, ncclSum}, {ncclBfloat16, ncclSum}, {ncclFloat64, ncclAvg}};
  if (tutti_test::reduces(coll))
    for (ncclRedOp_t op : {ncclProd, ncclMax, ncclMin}) typed.push_back({ncclInt32, op});
  if (tutti_test::reduces(coll)) typed.push_back({ncclInt64, ncclAvg});
  std::vector<int> roots = rooted(coll) ? std::vector<int>{0, nranks - 1} : std::vector<int>{0};
  for (size_t count : counts)
    for (auto [type, op] : typed)
      for (bool inPlace : {false, true})
        for (int root : roots) {
          if (root > 0 && count > 64) continue;  // one root suffices at the larger counts
          cases.push_back(Case{coll, type, op, count, inPlace, root});
        }
  return cases;
}

// Runs every algorithm's collectives on this rank.
void runEveryAlgorithm(int rank, int nranks, ncclComm_t comm, const std::vector<size_t>& counts) {
  std::vector<std::string> names;
  for (const tutti::plan::Algorithm& a : comm->planning.algorithms.all()) names.push_back(a.name);
  for (const std::string& name : names) {
    const tutti::plan::Algorithm* a = comm->planning.algorithms.find(name);
    comm->planning.forcedAlgorithm = name;
    for (tutti::plan::Coll pc : a->colls) {
      Coll coll;
      if (!tutti_test::fromPlanColl(pc, &coll)) continue;
      for (const Case& c : casesFor(coll, nranks, counts)) {
        try {
          tutti_test::runCase(c, rank, nranks, comm);
        } catch (const std::exception& e) {
          throw tutti_test::RankFailure("algorithm " + name + ": " + e.what());
        }
      }
    }
  }
  comm->planning.forcedAlgorithm.clear();
}

}  // namespace

TEST_CASE("every algorithm, every collective it serves, ranks as threads (1 to 9)", "[algorithms][threads]") {
  int nranks = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9);
  INFO(nranks << " ranks");
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    runEveryAlgorithm(rank, n, comm, {0, 1, 7, 1023, 70001});
  });
  REQUIRE(failures == "");
}

TEST_CASE("every algorithm at 1M+3 elements over several channels and FIFO laps", "[algorithms][threads][large]") {
  int nranks = GENERATE(3, 8);
  INFO(nranks << " ranks");
  std::string failures = tutti_test::runThreads(
      nranks, [&](int rank, int n, ncclComm_t comm) { runEveryAlgorithm(rank, n, comm, {(1u << 20) + 3}); });
  REQUIRE(failures == "");
}

TEST_CASE("every algorithm, ranks as processes over shared memory", "[algorithms][processes]") {
  int nranks = GENERATE(2, 5);
  INFO(nranks << " ranks");
  std::string failures = tutti_test::runProcesses(nranks, [&](int rank, int n, ncclComm_t comm) {
    runEveryAlgorithm(rank, n, comm, {1, 1023, 70001});
  });
  REQUIRE(failures == "");
}
