// Synthetic DGX-like nodes and clusters.
#include "topology/synthetic.h"

#include <cstdio>

#include "base/error.h"

namespace tutti::topo {

namespace {

std::string busId(int bus, int device) {
  char text[16];
  std::snprintf(text, sizeof text, "0000:%02x:%02x.0", bus & 0xff, device & 0x1f);
  return text;
}

Node pciNode(NodeKind kind, const std::string& id, const char* pciClass, const char* vendor, const char* device,
             int parent) {
  Node node;
  node.kind = kind;
  node.name = id;
  node.parent = parent;
  node.attributes = {{"busid", id},
                     {"class", pciClass},
                     {"vendor", vendor},
                     {"device", device},
                     {"subsystem_vendor", vendor},
                     {"subsystem_device", device},
                     {"link_speed", "32.0 GT/s PCIe"},
                     {"link_width", "16"}};
  return node;
}

int addCpu(TopologyGraph& graph, int numa) {
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.name = "cpu" + std::to_string(numa);
  cpu.attributes = {{"numaid", std::to_string(numa)},
                    {"affinity", numa == 0 ? "00000000,ffffffff" : "ffffffff,00000000"},
                    {"arch", "x86_64"},
                    {"vendor", "GenuineIntel"},
                    {"familyid", "6"},
                    {"modelid", "143"}};
  return graph.addNode(std::move(cpu));
}

void addNic(TopologyGraph& graph, int k, int parent, const std::string& id) {
  Node nic = id.empty() ? Node{} : pciNode(NodeKind::Nic, id, "0x020700", "0x15b3", "0x1021", parent);
  nic.kind = NodeKind::Nic;
  nic.parent = parent;
  int index = graph.addNode(std::move(nic));
  Node net;
  net.kind = NodeKind::Net;
  net.name = "mlx5_" + std::to_string(k);
  net.parent = index;
  char guid[32];
  std::snprintf(guid, sizeof guid, "0x%x00000000c0ffee", k + 1);
  net.attributes = {{"name", net.name}, {"dev", std::to_string(k)}, {"speed", "400000"}, {"port", "1"},
                    {"guid", guid},     {"maxconn", "131072"},      {"gdr", "1"}};
  graph.addNode(std::move(net));
}

}  // namespace

NodeSystem syntheticNode(int gpus, int nics, const std::string& hostname) {
  if (gpus < 0 || gpus > 64 || nics < 0 || nics > 14) {
    throw Error(ErrorCode::InvalidArgument, "synthetic node: " + std::to_string(gpus) + " GPUs and " +
                                                std::to_string(nics) + " NICs (allowed: 0..64 GPUs, 0..14 NICs)");
  }
  NodeSystem system;
  system.hostname = hostname;
  system.bootId = "synthetic-" + hostname;
  TopologyGraph& graph = system.graph;
  int cpus[2] = {addCpu(graph, 0), addCpu(graph, 1)};
  if (gpus == 0) {
    for (int k = 0; k < nics; ++k) addNic(graph, k, cpus[k * 2 / std::max(nics, 1)], "");
    graph.buildLinks(system.warnings);
    return system;
  }
  const int switches = std::max(nics, 1);
  std::vector<int> switchNodes;
  for (int s = 0; s < switches; ++s) {
    int cpu = cpus[switches == 1 ? 0 : s * 2 / switches];
    switchNodes.push_back(
        graph.addNode(pciNode(NodeKind::PciSwitch, busId(0x10 * (s + 1), 0), "0x060400", "0x1000", "0xc030", cpu)));
  }
  for (int g = 0; g < gpus; ++g) {
    int s = g * switches / gpus;
    Node gpu = pciNode(NodeKind::Gpu, busId(0x10 * (s + 1) + 1, g), "0x030200", "0x10de", "0x2330", switchNodes[s]);
    gpu.deviceAttributes = {{"dev", std::to_string(g)}, {"sm", "90"}, {"rank", std::to_string(g)}, {"gdr", "1"}};
    if (gpus > 1) gpu.nvlinks.push_back({busId(0xa0, 0), 18, "0x068000"});
    graph.addNode(std::move(gpu));
  }
  for (int k = 0; k < nics; ++k) addNic(graph, k, switchNodes[k % switches], busId(0x10 * (k % switches + 1) + 2, k));
  graph.buildLinks(system.warnings);
  return system;
}

GlobalSystem replicateNode(const NodeSystem& node, int copies) {
  GlobalSystem global;
  for (int n = 0; n < copies; ++n) {
    NodeSystem copy = node;
    copy.hostname = (node.hostname.empty() ? "node" : node.hostname) + "-" + std::to_string(n);
    copy.bootId = node.bootId + "-" + std::to_string(n);
    std::vector<int> gpus = copy.graph.gpus();
    if (gpus.empty()) global.ranks.push_back({n, -1});
    for (int gpu : gpus) global.ranks.push_back({n, gpu});
    global.nodes.push_back(std::move(copy));
  }
  return global;
}

GlobalSystem syntheticCluster(int nodes, int gpus, int nics) {
  GlobalSystem global;
  for (int n = 0; n < nodes; ++n) {
    global.nodes.push_back(syntheticNode(gpus, nics, "node" + std::to_string(n)));
    std::vector<int> gpuNodes = global.nodes.back().graph.gpus();
    if (gpuNodes.empty()) global.ranks.push_back({n, -1});
    for (int gpu : gpuNodes) global.ranks.push_back({n, gpu});
  }
  return global;
}

}  // namespace tutti::topo
