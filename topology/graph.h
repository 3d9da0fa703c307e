// The system graph of one node: CPUs, PCI switches, GPUs, NICs, NVSwitches, network ports;
// the links between them with bandwidths; and paths classified like NCCL's path types.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tutti::topo {

// XML attributes in document order (key, value).
using Attributes = std::vector<std::pair<std::string, std::string>>;
const std::string* findAttribute(const Attributes& attributes, const std::string& key);  // null when absent
void setAttribute(Attributes& attributes, const std::string& key, const std::string& value);

enum class NodeKind { Cpu, PciSwitch, Gpu, Nic, Net, NvSwitch };
enum class LinkKind { NvLink, Pci, Smp, Local };

// Ordered from closest to farthest, with NCCL's meanings:
// LOC same device; NVL direct NVLink (or through NVSwitch); NVB NVLink through another GPU;
// PIX through at most one PCIe switch; PXB through several PCIe switches but no host bridge;
// PHB through a PCIe host bridge (the CPU); SYS across the SMP interconnect between CPU
// sockets; NET through the network (another node).
enum class PathType { LOC, NVL, NVB, PIX, PXB, PHB, SYS, NET };

const char* nodeKindName(NodeKind kind);
const char* linkKindName(LinkKind kind);
const char* pathTypeName(PathType type);
// Accepts NCCL's names (case-insensitive); throws tutti::Error on anything else.
PathType parsePathType(const std::string& name);

// Bandwidths in GB/s, per direction. Figures are signalling rates rounded to what a copy sees;
// the cost model only needs their ratios to be right.
inline constexpr double kLocalBandwidth = 5000.0;
inline constexpr double kSmpBandwidth = 20.0;         // one UPI/Infinity Fabric hop
inline constexpr double kDefaultPciBandwidth = 24.0;  // when a file gives no speed/width
// Mb/s of a port whose speed is unknown (absent, 0, or the -1 some NICs report): NCCL's guess.
inline constexpr double kUnknownNetSpeed = 10000.0;
double nvlinkBandwidthPerLink(int sm);
// From NCCL's attributes: link_speed "16.0 GT/s PCIe" (or "16 GT/s") and link_width "16".
double pciBandwidth(const std::string& linkSpeed, const std::string& linkWidth);

struct NvLinkSpec {
  std::string target;       // the peer's PCI bus id (a GPU, an NVSwitch, a CPU)
  int count = 1;            // number of links
  std::string targetClass;  // PCI class of the target: 0x030200 GPU, 0x068000 NVSwitch
};

struct Node {
  NodeKind kind = NodeKind::Cpu;
  std::string name;             // PCI bus id for PCI devices, "cpu<numaid>" for CPUs, interface for nets
  int parent = -1;              // the element that holds this one in NCCL's XML
  Attributes attributes;        // the <cpu>, <pci> or <net> element's attributes
  Attributes deviceAttributes;  // a GPU's <gpu> element; empty otherwise
  std::vector<NvLinkSpec> nvlinks;

  const std::string* attribute(const std::string& key) const;
  std::string attributeOr(const std::string& key, const std::string& fallback) const;
  int gpuDev() const;           // <gpu dev>, -1 when absent
  int sm() const;               // <gpu sm>, 0 when absent
  double netBandwidth() const;  // <net speed> in Mb/s, as GB/s; kUnknownNetSpeed when unknown
};

struct Link {
  int from = -1;
  int to = -1;
  LinkKind kind = LinkKind::Pci;
  double bandwidth = 0.0;
};

struct Path {
  PathType type = PathType::SYS;
  double bandwidth = 0.0;  // the bottleneck; 0 when the nodes are not connected
  std::vector<int> nodes;  // from .. to; empty when not connected
};

class TopologyGraph {
 public:
  int addNode(Node node);
  const std::vector<Node>& nodes() const { return nodes_; }
  Node& node(int index) { return nodes_.at(index); }
  const Node& node(int index) const { return nodes_.at(index); }
  std::vector<int> nodesOf(NodeKind kind) const;
  int find(NodeKind kind, const std::string& name) const;  // -1 when absent

  // Numbers the nodes depth-first down the containment tree (XML order), then rebuilds every
  // link from that tree, the CPUs and the NVLink lists. Indices held from before change. Problems
  // (an NVLink to an unknown device) are appended to `warnings`.
  void buildLinks(std::vector<std::string>& warnings);
  const std::vector<Link>& links() const { return links_; }

  Path path(int from, int to) const;
  int cpuOf(int index) const;  // the CPU above a node, -1 when none
  std::vector<int> children(int index) const;
  // GPUs ordered by their CUDA device number (then bus id); nets ordered by <net dev>.
  std::vector<int> gpus() const;
  std::vector<int> nets() const;

 private:
  void sortDepthFirst();
  void addLink(int from, int to, LinkKind kind, double bandwidth);
  void linkToParent(int index, const std::vector<double>& widestPort);
  void linkNvLinks(int gpu, const std::map<std::string, int>& gpuByBusId, std::vector<std::string>& warnings);
  int nvSwitch();

  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> outgoing_;
};

// What one node knows about itself.
struct NodeSystem {
  std::string hostname;
  std::string bootId;
  TopologyGraph graph;
  // What went wrong in a way the user should act on (hwloc or the CUDA driver unusable, a malformed
  // topology file): logged at WARN.
  std::vector<std::string> warnings;
  // Findings and the fallbacks taken for them that need nothing from the user (a VM's NIC without
  // a speed or a PCI device): logged at INFO, as NCCL does.
  std::vector<std::string> notes;
};

// Several nodes' graphs, and where each rank lives: the view rings and trees are built from.
struct RankPlacement {
  int node = 0;  // index into GlobalSystem::nodes
  int gpu = -1;  // graph index of the rank's GPU on that node; -1 for a host process
};

struct GlobalSystem {
  std::vector<NodeSystem> nodes;
  std::vector<RankPlacement> ranks;
};

// A PCI bus id as sysfs, NCCL and NVML write it: domain (4 to 8 hex digits):bus:device.function.
bool isBusId(const std::string& text);
std::string normalizeBusId(const std::string& busId);

}  // namespace tutti::topo
