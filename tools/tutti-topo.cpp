// tutti-topo: this node's topology as tutti sees it (devices, links, path types), the rings and
// trees it would build, NCCL-format XML export, and validation of topology files.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/tunables.h"
#include "topology/channels.h"
#include "topology/discover.h"
#include "topology/p2p_level.h"
#include "topology/synthetic.h"
#include "topology/xml.h"

namespace {

namespace topo = tutti::topo;

void printUsage(FILE* out) {
  std::fprintf(
      out,
      "Usage: tutti-topo [--topo FILE | --synthetic G,K] [--nodes N] [--channels MIN,MAX] [--xml [FILE]]\n"
      "       tutti-topo --check FILE\n"
      "  (no option)        discover this node; print devices, links, warnings and notes, the path-type matrix,\n"
      "                     which GPU pairs connect peer to peer (NCCL_P2P_LEVEL), and the rings and trees\n"
      "                     tutti would build\n"
      "  --topo FILE        read an NCCL topology XML file instead of discovering (default: NCCL_TOPO_FILE)\n"
      "  --synthetic G,K    a synthetic DGX-like node with G GPUs and K NICs\n"
      "  --nodes N          build rings and trees over N copies of the node (default 1)\n"
      "  --channels MIN,MAX bounds on the channel count (default 1,32)\n"
      "  --xml [FILE]       write the node as NCCL topology XML to FILE (default: standard output)\n"
      "  --check FILE       validate a topology file: exit 0 when it loads, 1 with the error otherwise\n"
      "  --help             this text\n");
}

struct Options {
  std::string topoFile;
  std::string checkFile;
  std::string xmlFile;
  bool xml = false;
  int syntheticGpus = -1;
  int syntheticNics = 0;
  int nodes = 1;
  int minChannels = 1;
  int maxChannels = 32;
};

bool parsePair(const char* text, int& first, int& second) {
  return text && std::sscanf(text, "%d,%d", &first, &second) == 2;
}

// Returns false on a usage error (already reported).
bool parseOptions(int argc, char** argv, Options& options) {
  options.topoFile = tutti::tunables::kTopoFile.get();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (arg == "--topo" && next) {
      options.topoFile = argv[++i];
    } else if (arg == "--check" && next) {
      options.checkFile = argv[++i];
    } else if (arg == "--xml") {
      options.xml = true;
      if (next && next[0] != '-') options.xmlFile = argv[++i];
    } else if (arg == "--synthetic") {
      ok = parsePair(next, options.syntheticGpus, options.syntheticNics) && ++i;
    } else if (arg == "--nodes") {
      ok = next && (options.nodes = std::atoi(argv[++i])) >= 1;
    } else if (arg == "--channels") {
      ok = parsePair(next, options.minChannels, options.maxChannels) && ++i;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "tutti-topo: bad or incomplete option '%s'\n", arg.c_str());
      printUsage(stderr);
      return false;
    }
  }
  return true;
}

std::string label(const topo::TopologyGraph& graph, int index) {
  const topo::Node& node = graph.node(index);
  switch (node.kind) {
    case topo::NodeKind::Gpu: return "GPU" + std::to_string(node.gpuDev());
    case topo::NodeKind::Net: return node.name;
    case topo::NodeKind::Cpu: return "CPU" + node.attributeOr("numaid", "?");
    default: return std::string(topo::nodeKindName(node.kind)) + "#" + std::to_string(index);
  }
}

void printDevices(const topo::NodeSystem& system) {
  const topo::TopologyGraph& graph = system.graph;
  std::printf("Node %s (boot id %s)\n\nDevices:\n", system.hostname.c_str(), system.bootId.c_str());
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const topo::Node& node = graph.node(static_cast<int>(i));
    std::string extra;
    if (node.kind == topo::NodeKind::Gpu) extra = " sm " + std::to_string(node.sm());
    if (node.kind == topo::NodeKind::Net) extra = " " + node.attributeOr("speed", "?") + " Mb/s";
    std::printf("  [%2zu] %-4s %-12s %-16s under %s%s\n", i, topo::nodeKindName(node.kind),
                label(graph, static_cast<int>(i)).c_str(), node.name.c_str(),
                node.parent < 0 ? "-" : label(graph, node.parent).c_str(), extra.c_str());
  }
  std::printf("\nLinks (GB/s per direction):\n");
  for (const topo::Link& link : graph.links()) {
    if (link.from < link.to || link.kind == topo::LinkKind::NvLink) {
      std::printf("  %-12s -> %-12s %-6s %8.1f\n", label(graph, link.from).c_str(), label(graph, link.to).c_str(),
                  topo::linkKindName(link.kind), link.bandwidth);
    }
  }
  std::printf("\nWarnings:%s\n", system.warnings.empty() ? " none" : "");
  for (const std::string& warning : system.warnings) std::printf("  %s\n", warning.c_str());
  std::printf("\nNotes:%s\n", system.notes.empty() ? " none" : "");
  for (const std::string& note : system.notes) std::printf("  %s\n", note.c_str());
}

void printPathMatrix(const topo::TopologyGraph& graph) {
  std::vector<int> endpoints = graph.gpus();
  for (int net : graph.nets()) endpoints.push_back(net);
  for (int cpu : graph.nodesOf(topo::NodeKind::Cpu)) endpoints.push_back(cpu);
  std::printf("\nPath types (bottleneck GB/s):\n%-10s", "");
  for (int b : endpoints) std::printf(" %-11s", label(graph, b).c_str());
  std::printf("\n");
  for (int a : endpoints) {
    std::printf("%-10s", label(graph, a).c_str());
    for (int b : endpoints) {
      topo::Path path = graph.path(a, b);
      std::string cell = path.nodes.empty() ? "-"
                                            : std::string(topo::pathTypeName(path.type)) + " " +
                                                  std::to_string(static_cast<int>(path.bandwidth));
      std::printf(" %-11s", cell.c_str());
    }
    std::printf("\n");
  }
}

// Which GPU pairs may connect peer to peer under this environment's NCCL_P2P_LEVEL (and
// NCCL_P2P_DISABLE, NCCL_P2P_READ_ENABLE), as a communicator on this node would decide.
void printP2p(const topo::TopologyGraph& graph) {
  const std::vector<int> gpus = graph.gpus();
  if (gpus.size() < 2) return;
  const topo::P2pSettings settings = topo::p2pSettingsFromEnvironment();
  std::printf("\nPeer-to-peer between GPUs (NCCL_P2P_LEVEL %s):\n",
              settings.level ? settings.levelText.c_str() : "unset");
  for (size_t i = 0; i < gpus.size(); ++i)
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      const topo::P2pDecision d = topo::decideP2p(topo::gpuPair(graph, gpus[i], gpus[j]), settings);
      std::printf("  %s-%s: %s: %s\n", label(graph, gpus[i]).c_str(), label(graph, gpus[j]).c_str(),
                  d.allowed ? (d.read ? "p2p (read mode)" : "p2p") : "no p2p", d.reason.c_str());
    }
}

void printChannels(const topo::GlobalSystem& global, const Options& options) {
  topo::ChannelLayout layout = topo::buildChannels(global, options.minChannels, options.maxChannels);
  std::printf("\n%zu rank(s) on %zu node(s): %d channel(s) (%s)\n", global.ranks.size(), global.nodes.size(),
              layout.channels, layout.reason.c_str());
  for (int c = 0; c < layout.channels; ++c) {
    const topo::Ring& ring = layout.rings[c];
    std::printf("  ring %2d:", c);
    for (int r : ring.ranks) std::printf(" %d", r);
    std::printf("   via");
    for (size_t n = 0; n < ring.nets.size(); ++n) {
      std::printf(" %s", ring.nets[n] < 0 ? "-" : global.nodes[n].graph.node(ring.nets[n]).name.c_str());
    }
    const topo::Tree& tree = layout.trees[c];
    std::printf("\n  tree %2d: root %d%s; parent of each rank:", c, tree.root, tree.mirrored ? " (second tree)" : "");
    for (int p : tree.parent) std::printf(" %d", p);
    std::printf("\n");
  }
}

int check(const std::string& file) {
  topo::NodeSystem system = topo::loadTopologyFile(file);
  const topo::TopologyGraph& graph = system.graph;
  std::printf("%s: OK: %zu CPU(s), %zu GPU(s), %zu NIC port(s), %zu warning(s)\n", file.c_str(),
              graph.nodesOf(topo::NodeKind::Cpu).size(), graph.gpus().size(), graph.nets().size(),
              system.warnings.size());
  for (const std::string& warning : system.warnings) std::printf("  warning: %s\n", warning.c_str());
  return 0;
}

int run(const Options& options) {
  if (!options.checkFile.empty()) return check(options.checkFile);
  topo::NodeSystem system = options.syntheticGpus >= 0
                                ? topo::syntheticNode(options.syntheticGpus, options.syntheticNics)
                                : topo::localSystem(options.topoFile, "");
  if (options.xml) {
    std::string text = tutti::topo::writeXml(topo::exportTopologyXml(system));
    if (options.xmlFile.empty()) {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    topo::saveTopologyFile(system, options.xmlFile);
    std::printf("wrote %s\n", options.xmlFile.c_str());
    return 0;
  }
  printDevices(system);
  printPathMatrix(system.graph);
  printP2p(system.graph);
  printChannels(topo::replicateNode(system, options.nodes), options);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      printUsage(stdout);
      return 0;
    }
  }
  if (!parseOptions(argc, argv, options)) return 2;
  try {
    return run(options);
  } catch (const tutti::Error& error) {
    std::fprintf(stderr, "tutti-topo: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tutti-topo: %s\n", error.what());
    return 1;
  }
}
