// The node with GPUs at every PCI distance (see p2p_topology_support.h).
#include "tests/common/p2p_topology_support.h"

namespace tutti_test {
namespace {

using tutti::topo::Node;
using tutti::topo::NodeKind;
using tutti::topo::PathType;

int addPci(tutti::topo::TopologyGraph& graph, NodeKind kind, const std::string& busId, int parent, int gpu = -1) {
  Node node;
  node.kind = kind;
  node.name = busId;
  node.parent = parent;
  const char* pciClass = kind == NodeKind::Gpu ? "0x030200" : "0x060400";
  const char* vendor = kind == NodeKind::Gpu ? "0x10de" : "0x1000";
  node.attributes = {{"busid", busId},           {"class", pciClass},     {"vendor", vendor},   {"device", "0x2330"},
                     {"subsystem_vendor", vendor}, {"subsystem_device", "0x0000"}, {"link_speed", "32.0 GT/s PCIe"},
                     {"link_width", "16"}};
  if (gpu >= 0) node.deviceAttributes = {{"dev", std::to_string(gpu)}, {"sm", "90"}, {"rank", std::to_string(gpu)}, {"gdr", "1"}};
  return graph.addNode(std::move(node));
}

int addCpu(tutti::topo::TopologyGraph& graph, int numa, const std::string& vendor) {
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.name = "cpu" + std::to_string(numa);
  cpu.attributes = {{"numaid", std::to_string(numa)}, {"affinity", numa == 0 ? "0000000f" : "000000f0"},
                    {"arch", "x86_64"},               {"vendor", vendor},
                    {"familyid", "6"},                {"modelid", "143"}};
  return graph.addNode(std::move(cpu));
}

}  // namespace

const std::vector<std::string>& p2pTestBusIds() {
  static const std::vector<std::string> ids = {"0000:12:00.0", "0000:13:00.0", "0000:15:00.0", "0000:81:00.0", "0000:21:00.0"};
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

PathType p2pTestPath(int a, int b) {
  if (a == b) return PathType::LOC;
  if (a == 3 || b == 3) return PathType::SYS;
  if (a == 4 || b == 4) return PathType::PHB;
  if (a == 2 || b == 2) return PathType::PXB;
  return PathType::PIX;  // GPUs 0 and 1, under switch A1
}

}  // namespace tutti_test
