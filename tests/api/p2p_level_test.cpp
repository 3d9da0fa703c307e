// NCCL_P2P_LEVEL at work: ranks on emulated devices with PCI bus ids (TUTTI_EMULATED_BUS_IDS)
// placed in a topology file whose GPUs sit at every PCI distance (tests/common/
// p2p_topology_support.h). Each pair must connect peer to peer (p2p between processes, local
// between threads) exactly when its GPUs are no farther apart than the level, and through shared
// memory otherwise; the collectives must still match the float64 reference.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/connection_setup.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/p2p_topology_support.h"
#include "tests/common/ranks_support.h"
#include "tests/topology/topology_support.h"
#include "tutti/tutti.h"

using tutti::topo::PathType;
using tutti_test::check;

namespace {

constexpr int kRanks = 4;  // on GPUs 0..3 of the test node: PIX, PXB and SYS pairs

// A few collectives of each shape, at an LL size and beyond it (Simple slots).
std::vector<tutti_test::Case> cases() {
  using tutti_test::Coll;
  std::vector<tutti_test::Case> all;
  for (size_t count : {size_t(1023), (size_t(1) << 17) + 5}) {
    for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce}) {
      all.push_back({coll, ncclFloat32, ncclSum, count, false, 0});
      all.push_back({coll, ncclFloat64, ncclMax, count, true, 1});
    }
    for (Coll coll : {Coll::AllGather, Coll::Broadcast, Coll::SendRecv, Coll::AlltoAll})
      all.push_back({coll, ncclInt32, ncclSum, count, false, 2});
  }
  return all;
}

// Where the ranks run, with the environment every one of them shares: the topology file and the
// emulated devices' bus ids.
using P2pLevelSetup = tutti_test::EmulatedNodeSetup;

// Checks that `rank` reaches each peer through `near` where their GPUs are no farther apart than
// `level` and through shm otherwise, as the transport choice and tuttiCommTransports both say; then
// runs the cases.
void checkRank(int rank, int nranks, ncclComm_t comm, PathType level, const std::string& near) {
  const std::string who = "rank " + std::to_string(rank) + ": ";
  std::set<std::string> expected;
  for (int peer = 0; peer < nranks; peer++) {
    if (peer == rank) continue;
    const std::string want = int(tutti_test::p2pTestPath(rank, peer)) <= int(level) ? near : "shm";
    expected.insert(want);
    const std::string got = tutti::transportTo(comm, peer).name();
    check(got == want, who + "reaches rank " + std::to_string(peer) + " (GPUs " +
                           tutti::topo::pathTypeName(tutti_test::p2pTestPath(rank, peer)) + " apart, level " +
                           tutti::topo::pathTypeName(level) + ") through " + got + ", not " + want);
  }
  std::string joined;
  for (const std::string& name : expected) joined += (joined.empty() ? "" : "+") + name;
  char names[64];
  int nodes = 0;
  TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
  check(names == joined, who + "tuttiCommTransports says " + names + ", not " + joined);
  tutti_test::runAll(cases(), rank, nranks, comm);
}

// kRanks rank processes of one host, rank r on emulated device r.
std::string runProcesses(PathType level) {
  return tutti_test::runProcesses(
      kRanks, [&](int rank, int n, ncclComm_t comm) { checkRank(rank, n, comm, level, "p2p"); }, 240, 1,
      [](int process) { setenv("TUTTI_EMULATED_DEVICE", std::to_string(process).c_str(), 1); });
}

// kRanks rank threads of this process on emulated devices 0..kRanks-1 (ncclCommInitAll's list).
std::string runThreads(PathType level) {
  ncclComm_t comms[kRanks];
  int devices[kRanks] = {0, 1, 2, 3};
  const ncclResult_t made = ncclCommInitAll(comms, kRanks, devices);
  if (made != ncclSuccess)
    return std::string("ncclCommInitAll: ") + ncclGetErrorString(made) + ": " + ncclGetLastError(nullptr);
  std::string failures =
      tutti_test::runOnThreads(kRanks, [&](int i) { checkRank(i, kRanks, comms[i], level, "local"); });
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return failures;
}

}  // namespace

TEST_CASE("p2p level: rank processes use p2p only between GPUs within NCCL_P2P_LEVEL (PIX, PXB, SYS)",
          "[device][emulated][processes][p2p]") {
  P2pLevelSetup setup;
  for (const char* text : {"PIX", "PXB", "SYS"}) {
    SECTION(text) {
      tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", text);
      CHECK(runProcesses(tutti::topo::parsePathType(text)) == "");
    }
  }
}

TEST_CASE("p2p level: unset, rank processes on an Intel host use p2p up to PXB, as NCCL, legacy 1 means PIX",
          "[device][emulated][processes][p2p]") {
  P2pLevelSetup setup;
  SECTION("unset") {
    tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", nullptr);
    CHECK(runProcesses(PathType::PXB) == "");
  }
  SECTION("1") {
    tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", "1");
    CHECK(runProcesses(PathType::PIX) == "");
  }
}

TEST_CASE("p2p level: the INFO log says for each pair whether it connects peer to peer and why",
          "[device][emulated][processes][p2p]") {
  P2pLevelSetup setup;
  tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", "PIX");
  tutti_test::CapturedLog log("INFO", "P2P");
  REQUIRE(runProcesses(PathType::PIX) == "");
  const std::vector<std::string>& ids = tutti_test::p2pTestBusIds();
  // Rank 0 explains its pairs with rank 1 (PIX: yes) and rank 3 (SYS: no), naming both GPUs.
  bool yes = false, no = false;
  for (const std::string& line : log.linesWith("rank 0 and rank 1 connect peer to peer"))
    yes = yes || (line.find(ids[0]) != std::string::npos && line.find(ids[1]) != std::string::npos &&
                  line.find("PIX apart") != std::string::npos && line.find("NCCL_P2P_LEVEL=PIX") != std::string::npos);
  for (const std::string& line : log.linesWith("rank 0 and rank 3 do not connect peer to peer"))
    no = no || (line.find(ids[3]) != std::string::npos && line.find("SYS apart") != std::string::npos);
  CHECK(yes);
  CHECK(no);
}

TEST_CASE("p2p level: rank threads with GPUs of their own are held to NCCL_P2P_LEVEL too (local or shm)",
          "[device][emulated][p2p]") {
  P2pLevelSetup setup;
  for (const char* text : {"PIX", "PXB", "SYS"}) {
    SECTION(text) {
      tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", text);
      CHECK(runThreads(tutti::topo::parsePathType(text)) == "");
    }
  }
}

TEST_CASE("p2p level: a bus id that is not one is refused at init, naming the variable", "[device][emulated][p2p]") {
  tutti_test::ScopedEnv device("TUTTI_DEVICE", "emulated");
  tutti_test::ScopedEnv ids("TUTTI_EMULATED_BUS_IDS", "0000:12:00.0,gpu1");
  ncclComm_t comms[2];
  int devices[2] = {0, 1};
  CHECK(ncclCommInitAll(comms, 2, devices) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(nullptr)).find("TUTTI_EMULATED_BUS_IDS") != std::string::npos);
}
