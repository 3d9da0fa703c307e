// Discovery on this machine and on a fake sysfs tree, and the tutti-topo tool.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "tests/common/env_support.h"
#include "tests/common/p2p_topology_support.h"
#include "tests/topology/topology_support.h"
#include "topology/discover.h"
#include "topology/xml.h"

using namespace tutti::topo;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}
std::string allWarnings(const NodeSystem& system) { return joined(system.warnings); }
std::string allNotes(const NodeSystem& system) { return joined(system.notes); }

std::string toolPath() {
#ifdef TUTTI_TOPO_BINARY
  return TUTTI_TOPO_BINARY;
#else
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / "tools" / "tutti-topo")
      .string();
#endif
}

// Runs tutti-topo with `args`; returns its exit status and its output (stdout and stderr).
int runTool(const std::string& args, std::string& output) {
  std::string command = toolPath() + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("discovery on this machine succeeds and finds a CPU") {
  NodeSystem system = discoverNode();
  INFO(allWarnings(system));
  INFO(allNotes(system));
  CHECK(!system.graph.nodesOf(NodeKind::Cpu).empty());
  CHECK(!system.hostname.empty());
  CHECK(!system.bootId.empty());
  for (const std::string& w : system.warnings) CHECK(!w.empty());
  for (const std::string& n : system.notes) CHECK(!n.empty());
  for (int net : system.graph.nets()) {
    CHECK(system.graph.node(net).name != "lo");
    CHECK(system.graph.node(net).netBandwidth() > 0);
    CHECK(system.graph.cpuOf(net) >= 0);
  }
  // What was discovered exports and reads back to the same devices.
  NodeSystem back = importTopologyXml(parseXml(writeXml(exportTopologyXml(system)), "discovered"), "discovered");
  CHECK(back.graph.nodes().size() == system.graph.nodes().size());
  CHECK(back.hostname == system.hostname);
}

TEST_CASE("discovery turns odd sysfs entries into fallbacks, with notes or warnings") {
  tutti_test::TempDir root;
  const std::string net = root.file("sys/class/net/");
  tutti_test::writeFile(net + "lo/speed", "-1\n");
  tutti_test::writeFile(net + "docker0/speed", "10000\n");
  tutti_test::writeFile(net + "eth0/speed", "-1\n");  // a VM's virtio NIC: speed unknown, no device link
  tutti_test::writeFile(net + "ens5/speed", "25000\n");
  tutti_test::writeFile(net + "bonding_masters", "\n");  // a file, not an interface
  const std::string pci = root.file("sys/devices/pci0000:7e/0000:7e:1d.0");
  tutti_test::writeFile(pci + "/numa_node", "0\n");
  tutti_test::writeFile(pci + "/class", "0x020000\n");
  std::filesystem::create_directory_symlink(pci, net + "ens5/device");
  DiscoveryOptions options;
  options.sysRoot = root.file("sys");
  options.procRoot = root.file("proc");  // no boot id there
  options.useCuda = false;
  NodeSystem system = discoverNode(options);
  std::string warnings = allWarnings(system), notes = allNotes(system);
  INFO(warnings);
  INFO(notes);
  std::vector<int> nets = system.graph.nets();
  REQUIRE(nets.size() == 2);
  const Node& ens5 = system.graph.node(nets[0]);
  const Node& eth0 = system.graph.node(nets[1]);
  CHECK(ens5.name == "ens5");
  CHECK(ens5.netBandwidth() == Approx(25000 / 8000.0));
  CHECK(system.graph.node(ens5.parent).name == "0000:7e:1d.0");
  CHECK(eth0.name == "eth0");
  CHECK(eth0.netBandwidth() > 0);
  // A VM's virtual NIC needs nothing from the user: notes. A missing boot id may merge hosts: a warning.
  CHECK(notes.find("interface eth0: speed -1") != std::string::npos);
  CHECK(notes.find("interface eth0: no PCI device") != std::string::npos);
  CHECK(warnings.find("interface eth0") == std::string::npos);
  CHECK(warnings.find("no boot id") != std::string::npos);
  CHECK(system.bootId == "unknown");
  CHECK(warnings.find("ens5") == std::string::npos);
  CHECK(notes.find("ens5") == std::string::npos);
  CHECK(!system.graph.nodesOf(NodeKind::Cpu).empty());
}

TEST_CASE("discovery with no sysfs at all still yields a CPU") {
  tutti_test::TempDir root;
  DiscoveryOptions options;
  options.sysRoot = root.file("missing");
  options.procRoot = root.file("missing");
  options.useCuda = false;
  options.useHwloc = false;
  NodeSystem system = discoverNode(options);
  CHECK(system.graph.nodesOf(NodeKind::Cpu).size() == 1);
  CHECK(system.graph.nets().empty());
  CHECK(allWarnings(system).find("no NICs") != std::string::npos);
}

TEST_CASE("the local system from NCCL_TOPO_FILE carries this host's identity and dumps to NCCL_TOPO_DUMP_FILE") {
  tutti_test::TempDir dir;
  std::string dump = dir.file("dump.xml");
  NodeSystem system = localSystem(tutti_test::topologyDataFile("dgx_a100_8gpu.xml"), dump);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(system.hostname == host);
  CHECK(system.graph.gpus().size() == 8);
  NodeSystem dumped = loadTopologyFile(dump);
  CHECK(dumped.hostname == host);
  CHECK(dumped.bootId == system.bootId);
  CHECK(writeXml(exportTopologyXml(dumped)) == writeXml(exportTopologyXml(system)));
  CHECK_THROWS_WITH(localSystem(dir.file("absent.xml"), ""), Catch::Contains("absent.xml: cannot open"));
}

TEST_CASE("tutti-topo --check accepts a good file and rejects a bad one") {
  std::string output;
  CHECK(runTool("--check " + tutti_test::topologyDataFile("dgx_a100_8gpu.xml"), output) == 0);
  CHECK(output.find("8 GPU(s), 4 NIC port(s)") != std::string::npos);

  tutti_test::TempDir dir;
  std::string bad = dir.file("bad.xml");
  tutti_test::writeFile(
      bad, "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\">\n  </cpu>\n</system>\n");
  output.clear();
  CHECK(runTool("--check " + bad, output) == 1);
  CHECK(output.find(bad + ":4: </cpu> closes <pci> opened on line 3") != std::string::npos);

  output.clear();
  CHECK(runTool("--check " + dir.file("absent.xml"), output) == 1);
  CHECK(output.find("cannot open") != std::string::npos);

  std::string written = dir.file("synthetic.xml");
  output.clear();
  CHECK(runTool("--synthetic 8,4 --xml " + written, output) == 0);
  output.clear();
  CHECK(runTool("--check " + written, output) == 0);
  CHECK(output.find("2 CPU(s), 8 GPU(s), 4 NIC port(s), 0 warning(s)") != std::string::npos);
  output.clear();
  CHECK(runTool("--topo " + written + " --nodes 2", output) == 0);
  CHECK(output.find("16 rank(s) on 2 node(s)") != std::string::npos);
}

TEST_CASE("tutti-topo says which GPU pairs connect peer to peer under NCCL_P2P_LEVEL") {
  tutti_test::TempDir dir;
  const std::string file = dir.file("p2p.xml");
  saveTopologyFile(tutti_test::p2pTestNode(), file);
  tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", "PXB");
  std::string output;
  REQUIRE(runTool("--topo " + file, output) == 0);
  INFO(output);
  CHECK(output.find("Peer-to-peer between GPUs (NCCL_P2P_LEVEL PXB)") != std::string::npos);
  // The test node's GPUs are numbered by <gpu dev>: GPU0-GPU1 PIX, GPU0-GPU2 PXB, GPU0-GPU4 PHB,
  // GPU0-GPU3 SYS.
  CHECK(output.find("GPU0-GPU1: p2p: ") != std::string::npos);
  CHECK(output.find("GPU0-GPU2: p2p: ") != std::string::npos);
  CHECK(output.find("GPU0-GPU4: no p2p: ") != std::string::npos);
  CHECK(output.find("GPU0-GPU3: no p2p: ") != std::string::npos);
}

TEST_CASE("tutti-topo --check rejects a bad attribute value and names its place") {
  tutti_test::TempDir dir;
  std::string bad = dir.file("bad.xml");
  tutti_test::writeFile(bad,
                        "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <nic><net name=\"ib0\" dev=\"0\" "
                        "speed=\"-5\"/></nic>\n  </cpu>\n</system>\n");
  std::string output;
  CHECK(runTool("--check " + bad, output) == 1);
  CHECK(output.find(bad + ":3: <net> attribute speed=\"-5\" is negative") != std::string::npos);

  std::string unknown = dir.file("unknown.xml");
  tutti_test::writeFile(unknown,
                        "<system version=\"1\">\n  <cpu numaid=\"-1\">\n    <nic><net name=\"eth0\" dev=\"0\" "
                        "speed=\"-1\"/></nic>\n  </cpu>\n</system>\n");
  output.clear();
  CHECK(runTool("--check " + unknown, output) == 0);
  CHECK(output.find("1 warning(s)") != std::string::npos);
  CHECK(output.find("speed \"-1\" is unknown; assuming 10000 Mb/s") != std::string::npos);
}
