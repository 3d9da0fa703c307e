// Ranks on 2 hosts of this machine connected by the IB net backend through the software verbs
// stand-in: every collective, type and op with NCCL_NET=IB, a misconfigured GID index failing
// init with an error that names it, and a port going down during traffic failing the collective.
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/log_support.h"
#include "tutti/tutti.h"

using tutti_test::allCases;
using tutti_test::CapturedLog;
using tutti_test::Case;
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
  for (Coll coll :
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::AlltoAll, Coll::SendRecv})
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
        auto portDown = tutti_test::loadedStandinSymbol<int (*)(const char*, int)>("tutti_standin_port_down");
        int reached = portDown ? portDown("standin_0", 1) : -1;
        check(reached >= 1, "rank 0 could not take the stand-in's port down (" + std::to_string(reached) +
                                (portDown ? "" : ", not loaded") + ")");
      }
      result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    std::string message = ncclGetLastError(comm);
    check(result != ncclSuccess, "rank " + std::to_string(rank) + ": the all-reduces never failed");
    if (rank == 0) {  // the rank whose port went down names it, the event and the peer
      check(result == ncclSystemError,
            std::string("rank 0: the all-reduce returned ") + ncclGetErrorString(result) + ": " + message);
      for (const char* part : {"standin_0:1", "port 1 went down", "IBV_EVENT_PORT_ERR", "port error", "rank 1"})
        check(message.find(part) != std::string::npos,
              std::string("rank 0's error lacks \"") + part + "\": " + message);
    }
  });
  REQUIRE(outcomes.size() == 2);
  for (auto& o : outcomes) {
    INFO("process of rank " << o.firstRank << ": " << o.failure);
    CHECK(o.failure == "");
  }
}

TEST_CASE(
    "net/ib: two IB ports are each host's NICs, the selector counts both, and the channels' rings go one per port",
    "[net][ib][processes][nics]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = ibEnvironment();
  // Two devices of one port each, at HDR x4: 4 lanes of 50 Gb/s, the stand-in's encoding 64.
  layout.environment.push_back({"TUTTI_IBVERBS_STANDIN_DEVICES", "2"});
  layout.environment.push_back({"TUTTI_IBVERBS_STANDIN_ACTIVE_SPEED", "64"});
  layout.environment.push_back({"NCCL_MIN_NCHANNELS", "2"});
  layout.environment.push_back({"NCCL_MAX_NCHANNELS", "2"});
  layout.environment.push_back({"NCCL_ALGO", "Ring"});
  const int portMbps = 4 * 50000;
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    const std::string me = "rank " + std::to_string(rank) + ": ";
    // (a) Each node's NIC ports are the backend's devices, with their names and speeds.
    for (int node = 0; node < 2; node++) {
      char host[256];
      int ranks = 0, numa = 0, cpus = 0, gpus = 0, nics = 0;
      TUTTI_NCCL_CHECK(tuttiCommNodeTopology(comm, node, host, sizeof host, &ranks, &numa, &cpus, &gpus, &nics));
      check(nics == 2,
            me + "node " + std::to_string(node) + " has " + std::to_string(nics) + " NIC port(s), not the 2 IB ports");
      for (int nic = 0; nic < nics; nic++) {
        char name[64] = "";
        int speed = -1;
        TUTTI_NCCL_CHECK(tuttiCommNodeNic(comm, node, nic, name, sizeof name, &speed));
        const std::string want = "standin_" + std::to_string(nic) + ":1";
        check(name == want && speed == portMbps,
              me + "node " + std::to_string(node) + " NIC " + std::to_string(nic) + " is \"" + name + "\" at " +
                  std::to_string(speed) + " Mb/s, not \"" + want + "\" at " + std::to_string(portMbps) + " Mb/s");
      }
    }
    // The selector's network: two ports of 200 Gb/s (25 GB/s) per host.
    const tutti::sim::Fabric& fabric = comm->planning.selector->fabric();
    check(fabric.nicsPerNode == 2 && fabric.network.gbps == portMbps / 8000.0,
          me + "the selector's network is " + std::to_string(fabric.nicsPerNode) + " NIC(s) of " +
              std::to_string(fabric.network.gbps) + " GB/s, not 2 of " + std::to_string(portMbps / 8000.0));

    // (b) A 2-channel ring all-reduce is right, and each channel's bytes went through its own port.
    auto deviceBytes = tutti_test::loadedStandinSymbol<uint64_t (*)(const char*)>("tutti_standin_device_bytes");
    check(deviceBytes != nullptr, me + "the stand-in's tutti_standin_device_bytes is not loaded");
    const uint64_t before[2] = {deviceBytes("standin_0"), deviceBytes("standin_1")};
    const Case allReduce{Coll::AllReduce, ncclFloat64, ncclSum, (size_t(1) << 20) + 3, false, 0};
    check(
        comm->planning.selector->select(tutti::plan::Coll::AllReduce, allReduce.count * sizeof(double)).nchannels == 2,
        me + "the all-reduce does not run on 2 channels");
    runAll({allReduce}, rank, n, comm);
    // A ring all-reduce of 2 ranks sends its whole buffer; each of the 2 channels about half of it.
    const uint64_t quarter = allReduce.count * sizeof(double) / 4;
    for (int d = 0; d < 2; d++) {
      const uint64_t sent = deviceBytes(d == 0 ? "standin_0" : "standin_1") - before[d];
      check(sent >= quarter, me + "standin_" + std::to_string(d) + " sent " + std::to_string(sent) +
                                 " bytes of the all-reduce, under " + std::to_string(quarter) +
                                 ": its channel did not go through it");
    }
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}
