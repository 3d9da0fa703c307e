// Topology at communicator init: how discovery's and a topology file's findings and an
// unwritable NCCL_TOPO_DUMP_FILE are reported.
#include <catch2/catch.hpp>

#include <string>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/ranks_support.h"
#include "tests/topology/topology_support.h"
#include "topology/discover.h"
#include "topology/xml.h"

namespace {

// Two ranks as threads of one forked process, so that discovery runs afresh (once) there.
std::string initTwoRanks() {
  return tutti_test::runProcesses(
      2, [](int, int, ncclComm_t) {}, 120, 2);
}

}  // namespace

TEST_CASE("an unwritable NCCL_TOPO_DUMP_FILE is a warning naming the file and the OS error, and init succeeds") {
  tutti_test::TempDir dir;
  std::string dump = dir.file("no-such-directory/topo.xml");
  tutti_test::CapturedLog log("WARN", "ALL");
  tutti_test::ScopedEnv dumpFile("NCCL_TOPO_DUMP_FILE", dump.c_str());
  CHECK(initTwoRanks() == "");
  std::vector<std::string> lines = log.linesWith("NCCL_TOPO_DUMP_FILE");
  REQUIRE(lines.size() == 1);  // one writer per host
  CHECK(lines[0].find("NCCL WARN") != std::string::npos);
  CHECK(lines[0].find(dump) != std::string::npos);
  CHECK(lines[0].find("No such file or directory") != std::string::npos);
}

TEST_CASE("a writable NCCL_TOPO_DUMP_FILE receives this node's topology") {
  tutti_test::TempDir dir;
  std::string dump = dir.file("topo.xml");
  tutti_test::ScopedEnv dumpFile("NCCL_TOPO_DUMP_FILE", dump.c_str());
  CHECK(initTwoRanks() == "");
  tutti::topo::NodeSystem dumped = tutti::topo::loadTopologyFile(dump);
  CHECK(!dumped.graph.nodesOf(tutti::topo::NodeKind::Cpu).empty());
}

TEST_CASE("a topology file's warnings are logged at WARN, once per host") {
  tutti_test::TempDir dir;
  std::string file = dir.file("vm.xml");
  tutti_test::writeFile(file,
                        "<system version=\"1\">\n<cpu numaid=\"0\">\n<nic><net name=\"eth0\" dev=\"0\" "
                        "speed=\"-1\"/></nic>\n</cpu>\n</system>\n");
  tutti_test::CapturedLog log("WARN", "ALL");
  tutti_test::ScopedEnv topoFile("NCCL_TOPO_FILE", file.c_str());
  CHECK(initTwoRanks() == "");
  std::vector<std::string> lines = log.linesWith("speed \"-1\" is unknown");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("NCCL WARN") != std::string::npos);
  CHECK(lines[0].find(file + ":3") != std::string::npos);
}

TEST_CASE("discovery's warnings are logged at WARN and its notes at INFO, once per process") {
  tutti::topo::NodeSystem node = tutti::topo::discoverNode();
  if (node.warnings.empty() && node.notes.empty())
    WARN("discovery found nothing odd on this machine: nothing to check");
  {
    tutti_test::CapturedLog log("WARN", "ALL");
    CHECK(initTwoRanks() == "");
    for (const std::string& w : node.warnings) {
      INFO(w);
      std::vector<std::string> lines = log.linesWith(w);
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].find("NCCL WARN") != std::string::npos);
    }
    // A VM's NIC without a speed or a PCI device is no cause for a warning.
    for (const std::string& n : node.notes) {
      INFO(n);
      CHECK(log.linesWith(n).empty());
    }
  }
  tutti_test::CapturedLog log("INFO", "GRAPH");
  CHECK(initTwoRanks() == "");
  for (const std::string& n : node.notes) {
    INFO(n);
    std::vector<std::string> lines = log.linesWith(n);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("NCCL INFO") != std::string::npos);
  }
}
