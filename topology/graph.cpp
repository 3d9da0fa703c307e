// The system graph: links derived from NCCL's containment tree, and path classification.
#include "topology/graph.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>

#include "base/error.h"

namespace tutti::topo {

const char* nodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::Cpu: return "CPU";
    case NodeKind::PciSwitch: return "PCI";
    case NodeKind::Gpu: return "GPU";
    case NodeKind::Nic: return "NIC";
    case NodeKind::Net: return "NET";
    case NodeKind::NvSwitch: return "NVS";
  }
  return "?";
}

const char* linkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::NvLink: return "NVLink";
    case LinkKind::Pci: return "PCI";
    case LinkKind::Smp: return "SMP";
    case LinkKind::Local: return "local";
  }
  return "?";
}

const char* pathTypeName(PathType type) {
  static const char* const names[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"};
  return names[static_cast<int>(type)];
}

PathType parsePathType(const std::string& name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int t = 0; t <= static_cast<int>(PathType::NET); ++t) {
    if (upper == pathTypeName(static_cast<PathType>(t))) return static_cast<PathType>(t);
  }
  throw Error(ErrorCode::InvalidArgument,
              "unknown path type '" + name + "' (expected LOC, NVL, NVB, PIX, PXB, PHB, SYS or NET)");
}

double nvlinkBandwidthPerLink(int sm) { return sm > 0 && sm < 70 ? 20.0 : 25.0; }

double pciBandwidth(const std::string& linkSpeed, const std::string& linkWidth) {
  // Per-lane payload rate after line coding, by transfer rate in GT/s.
  static const std::pair<double, double> lanes[] = {{2.5, 0.25},   {5.0, 0.5},    {8.0, 0.985},
                                                    {16.0, 1.969}, {32.0, 3.938}, {64.0, 7.563}};
  char* end = nullptr;
  double rate = std::strtod(linkSpeed.c_str(), &end);
  int width = std::atoi(linkWidth.c_str());
  if (end == linkSpeed.c_str() || rate <= 0 || width <= 0) return kDefaultPciBandwidth;
  double perLane = lanes[0].second;
  for (const auto& [gts, gbs] : lanes) {
    if (rate >= gts - 0.01) perLane = gbs;
  }
  return perLane * width;
}

bool isBusId(const std::string& text) {
  size_t colon = text.find(':');
  if (colon < 4 || colon > 8 || text.size() != colon + 8) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char expected = i == colon || i == colon + 3 ? ':' : i == colon + 6 ? '.' : 'x';
    if (expected == 'x' ? !std::isxdigit(static_cast<unsigned char>(text[i])) : text[i] != expected) return false;
  }
  return true;
}

std::string normalizeBusId(const std::string& busId) {
  std::string out;
  for (char c : busId) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // NCCL writes 0000:07:00.0; nvidia-smi and NVML write 00000000:07:00.0.
  if (out.size() == 16 && out.compare(0, 4, "0000") == 0 && out[8] == ':') out = out.substr(4);
  return out;
}

const std::string* findAttribute(const Attributes& attributes, const std::string& key) {
  for (const auto& [k, v] : attributes) {
    if (k == key) return &v;
  }
  return nullptr;
}

void setAttribute(Attributes& attributes, const std::string& key, const std::string& value) {
  for (auto& [k, v] : attributes) {
    if (k == key) {
      v = value;
      return;
    }
  }
  attributes.emplace_back(key, value);
}

const std::string* Node::attribute(const std::string& key) const {
  const std::string* value = findAttribute(attributes, key);
  return value ? value : findAttribute(deviceAttributes, key);
}

std::string Node::attributeOr(const std::string& key, const std::string& fallback) const {
  const std::string* value = attribute(key);
  return value ? *value : fallback;
}

int Node::gpuDev() const {
  const std::string* dev = findAttribute(deviceAttributes, "dev");
  return dev ? std::atoi(dev->c_str()) : -1;
}

int Node::sm() const {
  const std::string* sm = findAttribute(deviceAttributes, "sm");
  return sm ? std::atoi(sm->c_str()) : 0;
}

double Node::netBandwidth() const {
  const std::string* speed = attribute("speed");
  double mbps = speed ? std::atof(speed->c_str()) : 0.0;
  return (mbps > 0 ? mbps : kUnknownNetSpeed) / 8000.0;
}

int TopologyGraph::addNode(Node node) {
  nodes_.push_back(std::move(node));
  outgoing_.emplace_back();
  return static_cast<int>(nodes_.size()) - 1;
}

std::vector<int> TopologyGraph::nodesOf(NodeKind kind) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == kind) out.push_back(static_cast<int>(i));
  }
  return out;
}

int TopologyGraph::find(NodeKind kind, const std::string& name) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].kind == kind && nodes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> TopologyGraph::children(int index) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].parent == index) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> TopologyGraph::gpus() const {
  std::vector<int> out = nodesOf(NodeKind::Gpu);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    return std::make_pair(nodes_[a].gpuDev(), nodes_[a].name) < std::make_pair(nodes_[b].gpuDev(), nodes_[b].name);
  });
  return out;
}

std::vector<int> TopologyGraph::nets() const {
  std::vector<int> out = nodesOf(NodeKind::Net);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    return std::atoi(nodes_[a].attributeOr("dev", "0").c_str()) < std::atoi(nodes_[b].attributeOr("dev", "0").c_str());
  });
  return out;
}

int TopologyGraph::cpuOf(int index) const {
  for (int at = index; at >= 0; at = nodes_.at(at).parent) {
    if (nodes_[at].kind == NodeKind::Cpu) return at;
  }
  return -1;
}

void TopologyGraph::addLink(int from, int to, LinkKind kind, double bandwidth) {
  links_.push_back({from, to, kind, bandwidth});
  outgoing_[from].push_back(static_cast<int>(links_.size()) - 1);
}

int TopologyGraph::nvSwitch() {
  std::vector<int> existing = nodesOf(NodeKind::NvSwitch);
  if (!existing.empty()) return existing.front();
  Node node;
  node.kind = NodeKind::NvSwitch;
  node.name = "nvswitch";
  return addNode(std::move(node));
}

void TopologyGraph::linkToParent(int index, const std::vector<double>& widestPort) {
  const Node& child = nodes_[index];
  if (child.parent < 0 || child.kind == NodeKind::NvSwitch) return;
  double bandwidth;
  LinkKind kind = LinkKind::Pci;
  if (child.kind == NodeKind::Net) {
    kind = LinkKind::Local;
    bandwidth = child.netBandwidth();
  } else if (child.kind == NodeKind::Nic && child.name.empty()) {
    // A <nic> straight under a <cpu>: no PCI facts, so its ports' speed is the best guess.
    bandwidth = widestPort[index] > 0 ? widestPort[index] : kDefaultPciBandwidth;
  } else {
    bandwidth = pciBandwidth(child.attributeOr("link_speed", ""), child.attributeOr("link_width", ""));
  }
  addLink(index, child.parent, kind, bandwidth);
  addLink(child.parent, index, kind, bandwidth);
}

void TopologyGraph::linkNvLinks(int gpu, const std::map<std::string, int>& gpuByBusId,
                                std::vector<std::string>& warnings) {
  // NCCL lists each NVSwitch a GPU reaches separately; together they are one fabric, so the
  // links add up into one.
  std::vector<std::pair<int, int>> peers;  // (peer node, link count)
  auto addCount = [&](int peer, int count) {
    for (auto& [node, total] : peers) {
      if (node == peer) {
        total += count;
        return;
      }
    }
    peers.emplace_back(peer, count);
  };
  for (const NvLinkSpec& spec : nodes_[gpu].nvlinks) {
    auto found = gpuByBusId.find(normalizeBusId(spec.target));
    int peer = found == gpuByBusId.end() ? -1 : found->second;
    if (peer < 0 && spec.targetClass == "0x068000") peer = nvSwitch();
    if (peer >= 0) {
      addCount(peer, std::max(spec.count, 1));
    } else {
      warnings.push_back("GPU " + nodes_[gpu].name + ": NVLink to " + spec.target + " (class " + spec.targetClass +
                         ") is not a known GPU or NVSwitch; ignored");
    }
  }
  double perLink = nvlinkBandwidthPerLink(nodes_[gpu].sm());
  for (auto [peer, count] : peers) {
    addLink(gpu, peer, LinkKind::NvLink, perLink * count);  // a peer GPU lists its own direction
    if (nodes_[peer].kind == NodeKind::NvSwitch) addLink(peer, gpu, LinkKind::NvLink, perLink * count);
  }
}

// Producers add nodes in whatever order suits them; numbering them depth-first down the
// containment tree (the order of NCCL's XML) makes a graph and its XML round trip agree on
// every node's index.
void TopologyGraph::sortDepthFirst() {
  std::vector<int> order;
  std::vector<std::vector<int>> below(nodes_.size());
  std::vector<int> roots;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    int parent = nodes_[i].parent;
    (parent >= 0 && parent < static_cast<int>(nodes_.size()) ? below[parent] : roots).push_back(static_cast<int>(i));
  }
  std::vector<int> stack(roots.rbegin(), roots.rend());
  while (!stack.empty()) {
    int at = stack.back();
    stack.pop_back();
    order.push_back(at);
    stack.insert(stack.end(), below[at].rbegin(), below[at].rend());
  }
  std::vector<int> renamed(nodes_.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) renamed[order[i]] = static_cast<int>(i);
  std::vector<Node> sorted;
  for (int old : order) {
    sorted.push_back(std::move(nodes_[old]));
    if (sorted.back().parent >= 0) sorted.back().parent = renamed[sorted.back().parent];
  }
  nodes_ = std::move(sorted);
}

void TopologyGraph::buildLinks(std::vector<std::string>& warnings) {
  sortDepthFirst();
  links_.clear();
  outgoing_.assign(nodes_.size(), {});
  std::vector<double> widestPort(nodes_.size(), 0.0);  // per NIC, its fastest port
  for (const Node& node : nodes_) {
    if (node.kind == NodeKind::Net && node.parent >= 0)
      widestPort[node.parent] = std::max(widestPort[node.parent], node.netBandwidth());
  }
  for (size_t i = 0; i < nodes_.size(); ++i) linkToParent(static_cast<int>(i), widestPort);
  std::vector<int> cpus = nodesOf(NodeKind::Cpu);
  for (int a : cpus) {
    for (int b : cpus) {
      if (a != b) addLink(a, b, LinkKind::Smp, kSmpBandwidth);
    }
  }
  std::map<std::string, int> gpuByBusId;
  for (int gpu : nodesOf(NodeKind::Gpu)) gpuByBusId.emplace(nodes_[gpu].name, gpu);
  for (int gpu : nodesOf(NodeKind::Gpu)) linkNvLinks(gpu, gpuByBusId, warnings);
}

namespace {

// Breadth-first search for the fewest hops; among equally short paths, the widest bottleneck.
Path widestShortestPath(const std::vector<Node>& nodes, const std::vector<Link>& links,
                        const std::vector<std::vector<int>>& outgoing, int from, int to,
                        bool (*usable)(const Link&, const std::vector<Node>&, int to)) {
  const size_t n = nodes.size();
  std::vector<int> hops(n, -1), previous(n, -1);
  std::vector<double> width(n, 0.0);
  hops[from] = 0;
  width[from] = std::numeric_limits<double>::infinity();
  std::deque<int> queue{from};
  while (!queue.empty()) {
    int at = queue.front();
    queue.pop_front();
    if (at == to) continue;  // the destination relays nothing
    for (int li : outgoing[at]) {
      const Link& link = links[li];
      if (!usable(link, nodes, to)) continue;
      double w = std::min(width[at], link.bandwidth);
      if (hops[link.to] < 0) {
        hops[link.to] = hops[at] + 1;
        queue.push_back(link.to);
      } else if (hops[link.to] != hops[at] + 1 || w <= width[link.to]) {
        continue;
      }
      width[link.to] = w;
      previous[link.to] = at;
    }
  }
  Path path;
  if (hops[to] < 0) return path;
  for (int at = to; at >= 0; at = previous[at]) path.nodes.insert(path.nodes.begin(), at);
  path.bandwidth = width[to];
  return path;
}

bool nvlinkOnly(const Link& link, const std::vector<Node>&, int) { return link.kind == LinkKind::NvLink; }

// GPUs relay only over NVLink; over PCI a GPU or a NIC port is an endpoint, never a hop.
bool hostFabric(const Link& link, const std::vector<Node>& nodes, int to) {
  if (link.kind == LinkKind::NvLink) return false;
  NodeKind kind = nodes[link.to].kind;
  return link.to == to || kind == NodeKind::Cpu || kind == NodeKind::PciSwitch || kind == NodeKind::Nic;
}

PathType classifyPcie(const std::vector<Node>& nodes, const Path& path) {
  // A CPU at either end counts too: reaching it means crossing its host bridge.
  int cpus = 0, switches = 0;
  for (int index : path.nodes) {
    cpus += nodes[index].kind == NodeKind::Cpu;
    switches += nodes[index].kind == NodeKind::PciSwitch && index != path.nodes.front() && index != path.nodes.back();
  }
  if (cpus >= 2) return PathType::SYS;
  if (cpus == 1) return PathType::PHB;
  return switches <= 1 ? PathType::PIX : PathType::PXB;
}

}  // namespace

Path TopologyGraph::path(int from, int to) const {
  if (from < 0 || to < 0 || from >= static_cast<int>(nodes_.size()) || to >= static_cast<int>(nodes_.size())) {
    throw Error(ErrorCode::InvalidArgument, "topology path: node index out of range");
  }
  if (from == to) return {PathType::LOC, kLocalBandwidth, {from}};
  auto nvlinkCapable = [&](int i) { return nodes_[i].kind == NodeKind::Gpu || nodes_[i].kind == NodeKind::NvSwitch; };
  if (nvlinkCapable(from) && nvlinkCapable(to)) {
    Path path = widestShortestPath(nodes_, links_, outgoing_, from, to, nvlinkOnly);
    if (!path.nodes.empty()) {
      path.type = PathType::NVL;
      for (size_t i = 1; i + 1 < path.nodes.size(); ++i) {
        if (nodes_[path.nodes[i]].kind == NodeKind::Gpu) path.type = PathType::NVB;
      }
      return path;
    }
  }
  Path path = widestShortestPath(nodes_, links_, outgoing_, from, to, hostFabric);
  if (!path.nodes.empty()) path.type = classifyPcie(nodes_, path);
  return path;
}

}  // namespace tutti::topo
