// Ranks on 2 hosts of this machine connected by the IB net backend through the software verbs
// stand-in: every collective, type and op with NCCL_NET=IB, a misconfigured GID index failing
// init with an error that names it, and a port going down during traffic failing the collective.
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/log_support.h"

using tutti_test::allCases;
using tutti_test::Case;
using tutti_test::CapturedLog;
using tutti_test::check;
using tutti_test::Coll;
using tutti_test::HostLayout;
using tutti_test::runAll;
using tutti_test::runOnHosts;

namespace {

std::vector<std::pair<std::string, std::string>> ibEnvironment() {
  return {{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_NET", "IB"}, {"TUTTI_IBVERBS_LIB", TUTTI_TEST_IBVERBS_STANDIN}};
}

}  // namespace

TEST_CASE("net/ib: every collective, type and op across 2 hosts x 2 rank processes over IB through the verbs stand-in",
          "[net][ib][processes]") {
  CapturedLog log("INFO", "NET");
  HostLayout layout;
  layout.environment = ibEnvironment();
  std::vector<Case> cases = allCases({0, 1, 7, 1023}, 4);
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::AlltoAll, Coll::SendRecv})
    cases.push_back(Case{coll, ncclFloat32, ncclSum, (1u << 20) + 3, false, 1});
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
  // Every rank's network was the IB backend on the stand-in's device.
  CHECK(log.linesWith("NET: using backend IB").size() == 4);
  CHECK(log.linesWith("NET/IB: standin_0:1, RoCE").size() == 4);
}

TEST_CASE("net/ib: a GID index the port lacks fails init on every rank, naming the index and the device",
          "[net][ib][processes][misconfig]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = ibEnvironment();
  layout.environment.push_back({"NCCL_IB_GID_INDEX", "9"});
  layout.environment.push_back({"TUTTI_BOOTSTRAP_TIMEOUT", "10"});
  auto outcomes = runOnHosts(layout, [](int, int, ncclComm_t) {});
  REQUIRE(outcomes.size() == 2);
  for (auto& o : outcomes) {
    INFO(o.failure);
    CHECK(o.failure.find("NCCL_IB_GID_INDEX=9 does not exist") != std::string::npos);
    CHECK(o.failure.find("standin_0:1") != std::string::npos);
  }
}

TEST_CASE("net/ib: a port going down during all-reduces fails them, naming the device, port and event",
          "[net][ib][processes][faults]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = ibEnvironment();
  layout.environment.push_back({"TUTTI_TIMEOUT", "5"});
  layout.timeoutSeconds = 60;
  auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> buf(1 << 16, 1.0f);
    ncclResult_t result = ncclSuccess;
    for (int i = 0; i < 100000 && result == ncclSuccess; i++) {
      if (rank == 0 && i == 20) {
        // The stand-in's test-only switch: this process's port of standin_0 goes down.
        void* library = dlopen(TUTTI_TEST_IBVERBS_STANDIN, RTLD_NOW | RTLD_NOLOAD);
        auto portDown = library ? reinterpret_cast<int (*)(const char*, int)>(dlsym(library, "tutti_standin_port_down")) : nullptr;
        int reached = portDown ? portDown("standin_0", 1) : -1;
        check(reached >= 1, "rank 0 could not take the stand-in's port down (" + std::to_string(reached) + (library ? "" : ", not loaded") + ")");
      }
      result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    std::string message = ncclGetLastError(comm);
    check(result != ncclSuccess, "rank " + std::to_string(rank) + ": the all-reduces never failed");
    if (rank == 0) {  // the rank whose port went down names it, the event and the peer
      check(result == ncclSystemError, std::string("rank 0: the all-reduce returned ") + ncclGetErrorString(result) + ": " + message);
      for (const char* part : {"standin_0:1", "port 1 went down", "IBV_EVENT_PORT_ERR", "port error", "rank 1"})
        check(message.find(part) != std::string::npos, std::string("rank 0's error lacks \"") + part + "\": " + message);
    }
  });
  REQUIRE(outcomes.size() == 2);
  for (auto& o : outcomes) {
    INFO("process of rank " << o.firstRank << ": " << o.failure);
    CHECK(o.failure == "");
  }
}
