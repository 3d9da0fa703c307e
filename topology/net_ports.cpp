// A node's NICs from its net backend's devices (net_ports.h).
#include "topology/net_ports.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "topology/discover.h"

namespace tutti::topo {
namespace {

namespace fs = std::filesystem;

std::string readLine(const fs::path& file) { return readFirstLine(file.string()); }

// Where a port's PCI function is: its bus id, the function's sysfs directory, and the bus ids
// above it on the way down from the root (shallowest first). Empty when the path shows none.
struct PciPlace {
  std::string busId;
  fs::path directory;
  std::vector<std::string> above;
};

PciPlace pciPlaceOf(const std::string& pciPath) {
  PciPlace place;
  if (pciPath.empty()) return place;
  std::error_code error;
  fs::path resolved = fs::canonical(pciPath, error);
  if (error) resolved = fs::path(pciPath);  // a path of another machine's tree: read as written
  fs::path at;
  for (const fs::path& part : resolved) {
    at /= part;
    if (!isBusId(part.string())) continue;
    if (!place.busId.empty()) place.above.push_back(place.busId);
    place.busId = normalizeBusId(part.string());
    place.directory = at;
  }
  return place;
}

int cpuByNuma(const TopologyGraph& graph, int numa) {
  std::vector<int> cpus = graph.nodesOf(NodeKind::Cpu);
  int first = cpus.front();
  for (int cpu : cpus) {
    int id = std::atoi(graph.node(cpu).attributeOr("numaid", "0").c_str());
    if (id == numa) return cpu;
    if (id < std::atoi(graph.node(first).attributeOr("numaid", "0").c_str())) first = cpu;
  }
  return first;
}

// The <nic> of a port's PCI function, made on first use.
int nicFor(NodeSystem& system, TopologyGraph& graph, const NetPort& port) {
  PciPlace place = pciPlaceOf(port.pciPath);
  if (place.busId.empty()) {
    Node nic;
    nic.kind = NodeKind::Nic;
    nic.parent = cpuByNuma(graph, -1);
    system.notes.push_back("NIC port " + port.name + ": no PCI device" +
                           (port.pciPath.empty() ? "" : " on " + port.pciPath) + " (virtual?); placed under CPU " +
                           graph.node(nic.parent).name);
    return graph.addNode(std::move(nic));
  }
  if (int existing = graph.find(NodeKind::Nic, place.busId); existing >= 0) return existing;
  int parent = -1;
  for (auto it = place.above.rbegin(); it != place.above.rend() && parent < 0; ++it)
    parent = graph.find(NodeKind::PciSwitch, *it);
  if (parent < 0) {
    std::string numa = readLine(place.directory / "numa_node");
    parent = cpuByNuma(graph, numa.empty() ? -1 : std::atoi(numa.c_str()));
  }
  Node nic;
  nic.kind = NodeKind::Nic;
  nic.name = place.busId;
  nic.parent = parent;
  nic.attributes = pciAttributes(place.busId, place.directory.string());
  return graph.addNode(std::move(nic));
}

}  // namespace

void adoptNetPorts(NodeSystem& system, const std::vector<NetPort>& ports) {
  const TopologyGraph& old = system.graph;
  TopologyGraph graph;
  std::vector<int> renamed(old.nodes().size(), -1);
  for (size_t i = 0; i < old.nodes().size(); ++i) {
    const Node& node = old.node(int(i));
    if (node.kind != NodeKind::Nic && node.kind != NodeKind::Net) renamed[i] = graph.addNode(node);
  }
  for (size_t i = 0; i < old.nodes().size(); ++i) {
    if (renamed[i] < 0) continue;
    int parent = old.node(int(i)).parent;
    graph.node(renamed[i]).parent = parent >= 0 ? renamed[size_t(parent)] : -1;
  }
  if (graph.nodesOf(NodeKind::Cpu).empty()) {  // a graph without a CPU still needs somewhere to hang NICs
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.name = "cpu0";
    cpu.attributes = {{"numaid", "0"}};
    graph.addNode(std::move(cpu));
  }
  for (size_t dev = 0; dev < ports.size(); ++dev) {
    const NetPort& port = ports[dev];
    long speed = port.speedMbps;
    if (speed <= 0) {
      speed = static_cast<long>(kUnknownNetSpeed);
      system.notes.push_back("NIC port " + port.name + ": speed unknown; assuming " + std::to_string(speed) + " Mb/s");
    }
    char guid[32];
    std::snprintf(guid, sizeof guid, "0x%llx", static_cast<unsigned long long>(port.guid));
    Node net;
    net.kind = NodeKind::Net;
    net.name = port.name;
    net.parent = nicFor(system, graph, port);
    net.attributes = {{"name", port.name},
                      {"dev", std::to_string(dev)},
                      {"speed", std::to_string(speed)},
                      {"port", std::to_string(port.port)},
                      {"guid", guid},
                      {"maxconn", std::to_string(port.maxComms)},
                      {"gdr", port.gdr ? "1" : "0"}};
    graph.addNode(std::move(net));
  }
  graph.buildLinks(system.warnings);
  system.graph = std::move(graph);
}

}  // namespace tutti::topo
