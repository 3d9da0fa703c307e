// Collectives across 2 hosts over the IB net backend (through the software verbs stand-in) with four
// QPs per connection: every message split over the QPs, large ones by data write plus completion
// write (adaptive routing forced on), and a lagging QP reordering completions; results checked
// against the float64 host reference of the collective cases.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/log_support.h"

using tutti_test::allCases;
using tutti_test::CapturedLog;
using tutti_test::Case;
using tutti_test::Coll;
using tutti_test::HostLayout;
using tutti_test::runAll;
using tutti_test::runOnHosts;

namespace {

std::vector<std::pair<std::string, std::string>> ibEnvironment(const char* split) {
  return {{"NCCL_SOCKET_IFNAME", "lo"},
          {"NCCL_NET", "IB"},
          {"TUTTI_IBVERBS_LIB", TUTTI_TEST_IBVERBS_STANDIN},
          {"NCCL_IB_QPS_PER_CONNECTION", "4"},
          {"NCCL_IB_SPLIT_DATA_ON_QPS", split},
          {"NCCL_IB_ADAPTIVE_ROUTING", "1"}};
}

std::vector<Case> cases() {
  std::vector<Case> all = allCases({0, 1, 7, 1023}, 4);
  for (Coll coll :
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::AlltoAll, Coll::SendRecv})
    all.push_back(Case{coll, ncclFloat64, ncclSum, (1u << 18) + 3, false, 1});
  return all;
}

}  // namespace

TEST_CASE("net/ib: every collective across 2 hosts x 2 ranks over IB with 4 QPs per connection, data split over them",
          "[net][ib][processes][qps]") {
  CapturedLog log("INFO", "NET");
  HostLayout layout;
  layout.environment = ibEnvironment("1");
  std::vector<Case> all = cases();
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(all, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
  CHECK(log.linesWith("NET: using backend IB").size() == 4);
  CHECK(log.linesWith("relaxed ordering on").size() == 4);
}

TEST_CASE("net/ib: collectives over 4 round-robin QPs stay correct when one QP of each pair lags behind",
          "[net][ib][processes][qps]") {
  HostLayout layout;
  layout.environment = ibEnvironment("0");
  layout.environment.push_back({"TUTTI_IBVERBS_STANDIN_DELAY_QP_MS", "1"});
  std::vector<Case> some;
  for (Coll coll :
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::AlltoAll, Coll::SendRecv})
    for (size_t count : {size_t(7), size_t(1u << 16) + 1})
      some.push_back(Case{coll, ncclFloat64, ncclSum, count, false, 1});
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(some, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}
