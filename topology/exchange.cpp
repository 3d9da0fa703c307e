// Serialising node graphs and merging them into the global system.
#include "topology/exchange.h"

#include "base/error.h"
#include "topology/xml.h"

namespace tutti::topo {

std::string serializeSystem(const NodeSystem& system) { return writeXml(exportTopologyXml(system)); }

NodeSystem deserializeSystem(const std::string& text, const std::string& source) {
  NodeSystem system = importTopologyXml(parseXml(text, source), source);
  // The sender has already reported its own.
  system.warnings.clear();
  system.notes.clear();
  return system;
}

GlobalSystem mergeSystems(const std::vector<RankTopology>& ranks) {
  GlobalSystem global;
  for (size_t r = 0; r < ranks.size(); ++r) {
    NodeSystem system = deserializeSystem(ranks[r].topology, "topology of rank " + std::to_string(r));
    int node = -1;
    for (size_t n = 0; n < global.nodes.size(); ++n) {
      if (global.nodes[n].hostname == system.hostname && global.nodes[n].bootId == system.bootId) node = static_cast<int>(n);
    }
    if (node < 0) {
      node = static_cast<int>(global.nodes.size());
      global.nodes.push_back(std::move(system));
    }
    RankPlacement place{node, -1};
    if (!ranks[r].gpuBusId.empty()) {
      place.gpu = global.nodes[node].graph.find(NodeKind::Gpu, normalizeBusId(ranks[r].gpuBusId));
      if (place.gpu < 0) {
        throw Error(ErrorCode::Remote, "topology: rank " + std::to_string(r) + " uses GPU " + ranks[r].gpuBusId +
                                           ", which is not in the graph of host " + global.nodes[node].hostname);
      }
    }
    global.ranks.push_back(place);
  }
  return global;
}

}  // namespace tutti::topo
