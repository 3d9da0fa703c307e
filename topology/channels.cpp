// Ring and double-binary-tree construction over the global topology.
#include "topology/channels.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/error.h"

namespace tutti::topo {

namespace {

// What one channel can move, in GB/s: the unit that turns a bandwidth into a channel count.
constexpr double kChannelBandwidth = 20.0;

void validate(const GlobalSystem& system) {
  for (size_t r = 0; r < system.ranks.size(); ++r) {
    const RankPlacement& place = system.ranks[r];
    if (place.node < 0 || place.node >= static_cast<int>(system.nodes.size())) {
      throw Error(ErrorCode::InvalidArgument, "topology: rank " + std::to_string(r) + " is on node " +
                                                  std::to_string(place.node) + " of " +
                                                  std::to_string(system.nodes.size()));
    }
    const TopologyGraph& graph = system.nodes[place.node].graph;
    if (place.gpu >= 0 &&
        (place.gpu >= static_cast<int>(graph.nodes().size()) || graph.node(place.gpu).kind != NodeKind::Gpu)) {
      throw Error(ErrorCode::InvalidArgument, "topology: rank " + std::to_string(r) + " names graph node " +
                                                  std::to_string(place.gpu) + ", which is not a GPU on " +
                                                  system.nodes[place.node].hostname);
    }
  }
}

std::vector<int> ranksOn(const GlobalSystem& system, int node) {
  std::vector<int> out;
  for (size_t r = 0; r < system.ranks.size(); ++r) {
    if (system.ranks[r].node == node) out.push_back(static_cast<int>(r));
  }
  return out;
}

// Nodes that hold at least one rank, in order: the units rings and trees cross between.
std::vector<int> usedNodes(const GlobalSystem& system) {
  std::vector<int> out;
  for (size_t n = 0; n < system.nodes.size(); ++n) {
    if (!ranksOn(system, static_cast<int>(n)).empty()) out.push_back(static_cast<int>(n));
  }
  return out;
}

// Smaller is closer: path type first, then wider bandwidth.
std::tuple<int, double> distance(const TopologyGraph& graph, int a, int b) {
  Path path = graph.path(a, b);
  if (path.nodes.empty()) return {static_cast<int>(PathType::NET) + 1, 0.0};
  return {static_cast<int>(path.type), -path.bandwidth};
}

int netFor(const GlobalSystem& system, int node, int channel) {
  std::vector<int> nets = system.nodes[node].graph.nets();
  return nets.empty() ? -1 : nets[channel % nets.size()];
}

// The in-order binary tree over chain[lo, hi): the middle hangs from `parent`.
void hangInOrder(const std::vector<int>& chain, size_t lo, size_t hi, int parent, Tree& tree) {
  if (lo >= hi) return;
  size_t mid = (lo + hi) / 2;
  tree.parent[chain[mid]] = parent;
  tree.children[parent].push_back(chain[mid]);
  hangInOrder(chain, lo, mid, chain[mid], tree);
  hangInOrder(chain, mid + 1, hi, chain[mid], tree);
}

}  // namespace

Path rankPath(const GlobalSystem& system, int a, int b) {
  const RankPlacement& pa = system.ranks.at(a);
  const RankPlacement& pb = system.ranks.at(b);
  if (pa.node != pb.node) {
    double bandwidth = 0;
    for (int net : system.nodes[pa.node].graph.nets())
      bandwidth = std::max(bandwidth, system.nodes[pa.node].graph.node(net).netBandwidth());
    return {PathType::NET, bandwidth, {}};
  }
  if (pa.gpu < 0 || pb.gpu < 0) return {PathType::LOC, kLocalBandwidth, {}};  // processes sharing a host
  return system.nodes[pa.node].graph.path(pa.gpu, pb.gpu);
}

std::vector<int> nodeChain(const GlobalSystem& system, int node, int net) {
  std::vector<int> ranks = ranksOn(system, node);
  const TopologyGraph& graph = system.nodes.at(node).graph;
  bool gpus = std::all_of(ranks.begin(), ranks.end(), [&](int r) { return system.ranks[r].gpu >= 0; });
  if (ranks.size() <= 1 || !gpus) return ranks;
  auto gpuOf = [&](int r) { return system.ranks[r].gpu; };
  auto closestTo = [&](int target, const std::vector<int>& from) {
    return *std::min_element(from.begin(), from.end(), [&](int x, int y) {
      return std::make_tuple(distance(graph, gpuOf(x), target), x) <
             std::make_tuple(distance(graph, gpuOf(y), target), y);
    });
  };
  std::vector<int> left = ranks;
  auto take = [&](int r) {
    left.erase(std::find(left.begin(), left.end(), r));
    return r;
  };
  std::vector<int> chain{take(net >= 0 ? closestTo(net, left) : left.front())};
  int last = take(net >= 0 ? closestTo(net, left) : left.back());
  // Greedy nearest neighbour through the rest, so consecutive GPUs share the fastest links.
  while (!left.empty()) chain.push_back(take(closestTo(gpuOf(chain.back()), left)));
  chain.push_back(last);
  return chain;
}

int chooseChannelCount(const GlobalSystem& system, int minChannels, int maxChannels, std::string* reason) {
  if (minChannels < 1 || maxChannels < minChannels) {
    throw Error(ErrorCode::InvalidArgument, "topology: channel bounds [" + std::to_string(minChannels) + ", " +
                                                std::to_string(maxChannels) + "] are empty or below 1");
  }
  validate(system);
  std::vector<int> nodes = usedNodes(system);
  int wanted = 1;
  std::string why = "one channel";
  if (nodes.size() > 1) {
    size_t ports = SIZE_MAX;
    double bandwidth = 0;
    for (int n : nodes) ports = std::min(ports, system.nodes[n].graph.nets().size());
    for (int net : system.nodes[nodes[0]].graph.nets())
      bandwidth += system.nodes[nodes[0]].graph.node(net).netBandwidth();
    int perPort = std::max(1, static_cast<int>(std::ceil(bandwidth / kChannelBandwidth / std::max<size_t>(ports, 1))));
    wanted = static_cast<int>(std::max<size_t>(ports, 1)) * perPort;
    why = std::to_string(ports == 0 ? 0 : ports) + " network ports x " + std::to_string(perPort) + " channels each";
  } else if (system.ranks.size() > 1 && system.ranks[0].gpu >= 0) {
    std::vector<int> chain = nodeChain(system, nodes[0], -1);
    double bandwidth = kLocalBandwidth;
    for (size_t i = 0; i < chain.size(); ++i)
      bandwidth = std::min(bandwidth, rankPath(system, chain[i], chain[(i + 1) % chain.size()]).bandwidth);
    wanted = std::max(1, static_cast<int>(std::ceil(bandwidth / kChannelBandwidth)));
    why = "ring bottleneck " + std::to_string(static_cast<int>(bandwidth)) + " GB/s";
  }
  int chosen = std::clamp(wanted, minChannels, maxChannels);
  if (reason)
    *reason = why + " -> " + std::to_string(wanted) + ", clamped to [" + std::to_string(minChannels) + ", " +
              std::to_string(maxChannels) + "]";
  return chosen;
}

int binaryTreeParent(int position, int n) {
  int root = 1;
  while (root * 2 <= n) root *= 2;
  if (position == root) return 0;
  for (int i = position;;) {
    int bit = i & -i;
    int up = (i & (bit << 1)) ? i - bit : i + bit;
    if (up <= n) return up;
    i = up;  // that ancestor is past the end: climb on from it
  }
}

// Positions are 1-based. The second tree mirrors (even counts) or shifts (odd counts) the
// positions, which swaps odd and even and so leaves with interior nodes.
int nodeTreePosition(int node, int nodes, bool mirrored) {
  return !mirrored ? node + 1 : nodes % 2 == 0 ? nodes - node : (node + 1) % nodes + 1;
}

int nodeAtTreePosition(int position, int nodes, bool mirrored) {
  return !mirrored ? position - 1 : nodes % 2 == 0 ? nodes - position : (position - 2 + nodes) % nodes;
}

int nodeTreeParent(int node, int nodes, bool mirrored) {
  int up = binaryTreeParent(nodeTreePosition(node, nodes, mirrored), nodes);
  return up == 0 ? -1 : nodeAtTreePosition(up, nodes, mirrored);
}

Tree treeOverChains(const std::vector<std::vector<int>>& chains, int nranks, bool mirrored) {
  Tree tree;
  tree.mirrored = mirrored;
  tree.parent.assign(static_cast<size_t>(std::max(nranks, 0)), -1);
  tree.children.assign(tree.parent.size(), {});
  std::vector<int> seen(tree.parent.size(), 0);
  size_t total = 0;
  for (const std::vector<int>& chain : chains) {
    if (chain.empty()) throw Error(ErrorCode::InvalidArgument, "tree over nodes: a node has no ranks");
    for (int r : chain) {
      if (r < 0 || r >= nranks || seen[static_cast<size_t>(r)]++)
        throw Error(ErrorCode::InvalidArgument, "tree over nodes: rank " + std::to_string(r) + " is out of range (" +
                                                    std::to_string(nranks) + " ranks) or on two nodes");
    }
    total += chain.size();
  }
  if (total != tree.parent.size())
    throw Error(ErrorCode::InvalidArgument, "tree over nodes: the nodes hold " + std::to_string(total) + " of " +
                                                std::to_string(nranks) + " ranks");
  for (const std::vector<int>& chain : chains) hangInOrder(chain, 1, chain.size(), chain.front(), tree);
  const int count = static_cast<int>(chains.size());
  for (int i = 0; i < count; ++i) {
    int up = nodeTreeParent(i, count, mirrored);
    if (up < 0) {
      tree.root = chains[i].front();
      continue;
    }
    tree.parent[chains[i].front()] = chains[up].front();
    tree.children[chains[up].front()].push_back(chains[i].front());
  }
  return tree;
}

namespace {

Ring buildRing(const GlobalSystem& system, const std::vector<int>& nodes, int channel) {
  Ring ring;
  ring.nets.assign(system.nodes.size(), -1);
  for (int n : nodes) {
    ring.nets[n] = netFor(system, n, channel);
    std::vector<int> chain = nodeChain(system, n, ring.nets[n]);
    ring.ranks.insert(ring.ranks.end(), chain.begin(), chain.end());
  }
  return ring;
}

Tree buildTree(const GlobalSystem& system, const std::vector<int>& nodes, int channel, bool mirrored) {
  std::vector<std::vector<int>> chains(nodes.size());
  std::vector<int> nets(system.nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nets[nodes[i]] = netFor(system, nodes[i], channel);
    chains[i] = nodeChain(system, nodes[i], nets[nodes[i]]);
  }
  Tree tree = treeOverChains(chains, static_cast<int>(system.ranks.size()), mirrored);
  tree.nets = std::move(nets);
  return tree;
}

}  // namespace

Tree channelTree(const GlobalSystem& system, int channel, bool mirrored) {
  validate(system);
  std::vector<int> nodes = usedNodes(system);
  if (nodes.empty()) return Tree{};
  return buildTree(system, nodes, channel, mirrored);
}

ChannelLayout buildChannels(const GlobalSystem& system, int minChannels, int maxChannels) {
  ChannelLayout layout;
  layout.channels = chooseChannelCount(system, minChannels, maxChannels, &layout.reason);
  std::vector<int> nodes = usedNodes(system);
  if (nodes.empty()) return layout;
  for (int c = 0; c < layout.channels; ++c) {
    layout.rings.push_back(buildRing(system, nodes, c));
    layout.trees.push_back(buildTree(system, nodes, c, c % 2 == 1));
  }
  return layout;
}

}  // namespace tutti::topo
