// The node with GPUs at every PCI distance (see p2p_topology_support.h).
#include "tests/common/p2p_topology_support.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

#include "topology/xml.h"

namespace tutti_test {
namespace {

using tutti::topo::Node;
using tutti::topo::NodeKind;
using tutti::topo::PathType;

int addPci(tutti::topo::TopologyGraph& graph, NodeKind kind, const std::string& busId, int parent, int gpu = -1,
           int sm = 90, std::vector<tutti::topo::NvLinkSpec> nvlinks = {}) {
  Node node;
  node.kind = kind;
  node.name = busId;
  node.parent = parent;
  const char* pciClass = kind == NodeKind::Gpu ? "0x030200" : "0x060400";
  const char* vendor = kind == NodeKind::Gpu ? "0x10de" : "0x1000";
  node.attributes = {{"busid", busId},
                     {"class", pciClass},
                     {"vendor", vendor},
                     {"device", "0x2330"},
                     {"subsystem_vendor", vendor},
                     {"subsystem_device", "0x0000"},
                     {"link_speed", "32.0 GT/s PCIe"},
                     {"link_width", "16"}};
  if (gpu >= 0)
    node.deviceAttributes = {
        {"dev", std::to_string(gpu)}, {"sm", std::to_string(sm)}, {"rank", std::to_string(gpu)}, {"gdr", "1"}};
  node.nvlinks = std::move(nvlinks);
  return graph.addNode(std::move(node));
}

int addCpu(tutti::topo::TopologyGraph& graph, int numa, const std::string& vendor) {
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.name = "cpu" + std::to_string(numa);
  cpu.attributes = {{"numaid", std::to_string(numa)},
                    {"affinity", numa == 0 ? "0000000f" : "000000f0"},
                    {"arch", "x86_64"},
                    {"vendor", vendor},
                    {"familyid", "6"},
                    {"modelid", "143"}};
  return graph.addNode(std::move(cpu));
}

}  // namespace

const std::vector<std::string>& p2pTestBusIds() {
  static const std::vector<std::string> ids = {"0000:12:00.0", "0000:13:00.0", "0000:15:00.0", "0000:81:00.0",
                                               "0000:21:00.0"};
  return ids;
}

tutti::topo::NodeSystem p2pTestNode(const std::string& cpuVendor) {
  tutti::topo::NodeSystem system;
  system.hostname = "p2p-test-node";
  system.bootId = "p2p-test-node";
  tutti::topo::TopologyGraph& graph = system.graph;
  const std::vector<std::string>& gpu = p2pTestBusIds();
  const int cpu0 = addCpu(graph, 0, cpuVendor);
  const int cpu1 = addCpu(graph, 1, cpuVendor);
  const int a = addPci(graph, NodeKind::PciSwitch, "0000:10:00.0", cpu0);
  const int a1 = addPci(graph, NodeKind::PciSwitch, "0000:11:00.0", a);
  addPci(graph, NodeKind::Gpu, gpu[0], a1, 0);
  addPci(graph, NodeKind::Gpu, gpu[1], a1, 1);
  const int a2 = addPci(graph, NodeKind::PciSwitch, "0000:14:00.0", a);
  addPci(graph, NodeKind::Gpu, gpu[2], a2, 2);
  const int c = addPci(graph, NodeKind::PciSwitch, "0000:20:00.0", cpu0);
  addPci(graph, NodeKind::Gpu, gpu[4], c, 4);
  const int b = addPci(graph, NodeKind::PciSwitch, "0000:80:00.0", cpu1);
  addPci(graph, NodeKind::Gpu, gpu[3], b, 3);
  graph.buildLinks(system.warnings);
  return system;
}

const std::vector<std::string>& nvlinkTestBusIds() {
  static const std::vector<std::string> ids = {"0000:32:00.0", "0000:33:00.0"};
  return ids;
}

tutti::topo::NodeSystem nvlinkTestNode(int sm) {
  tutti::topo::NodeSystem system;
  system.hostname = "nvlink-test-node";
  system.bootId = "nvlink-test-node";
  tutti::topo::TopologyGraph& graph = system.graph;
  const std::vector<std::string>& gpu = nvlinkTestBusIds();
  const int cpu = addCpu(graph, 0, "GenuineIntel");
  const int sw = addPci(graph, NodeKind::PciSwitch, "0000:30:00.0", cpu);
  for (int g = 0; g < 2; g++)
    addPci(graph, NodeKind::Gpu, gpu[size_t(g)], sw, g, sm, {{gpu[size_t(1 - g)], 4, "0x030200"}});
  graph.buildLinks(system.warnings);
  return system;
}

EmulatedNodeSetup::EmulatedNodeSetup(const tutti::topo::NodeSystem& node, const std::vector<std::string>& busIds,
                                     const char* memory) {
  memory_.emplace("TUTTI_EMULATED_MEMORY", memory);
  std::string pattern = (std::filesystem::temp_directory_path() / "tutti-node-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  dir_ = pattern;
  const std::string file = dir_ + "/node.xml";
  tutti::topo::saveTopologyFile(node, file);
  std::string ids;
  for (const std::string& id : busIds) ids += (ids.empty() ? "" : ",") + id;
  topo_.emplace("NCCL_TOPO_FILE", file.c_str());
  busIds_.emplace("TUTTI_EMULATED_BUS_IDS", ids.c_str());
}

EmulatedNodeSetup::~EmulatedNodeSetup() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

PathType p2pTestPath(int a, int b) {
  if (a == b) return PathType::LOC;
  if (a == 3 || b == 3) return PathType::SYS;
  if (a == 4 || b == 4) return PathType::PHB;
  if (a == 2 || b == 2) return PathType::PXB;
  return PathType::PIX;  // GPUs 0 and 1, under switch A1
}

}  // namespace tutti_test
