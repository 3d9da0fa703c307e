// Serialising node graphs and merging them into the global system.
#include "topology/exchange.h"

#include <algorithm>

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

GlobalSystem mergeSystems(const std::vector<std::string>& texts, const std::vector<int>& textOfRank,
                          const std::vector<std::string>& gpuBusIds) {
  GlobalSystem global;
  // Each text is parsed once, however many ranks share it (all the ranks of a host, at scale).
  std::vector<int> nodeOfText(texts.size(), -1);
  for (size_t r = 0; r < textOfRank.size(); ++r) {
    int text = textOfRank[r];
    if (text < 0 || size_t(text) >= texts.size())
      throw Error(ErrorCode::Internal, "topology: rank " + std::to_string(r) + " names graph " + std::to_string(text) +
                                           " of " + std::to_string(texts.size()));
    int& node = nodeOfText[size_t(text)];
    if (node < 0) {
      NodeSystem system = deserializeSystem(texts[size_t(text)], "topology of rank " + std::to_string(r));
      for (size_t n = 0; n < global.nodes.size(); ++n)
        if (global.nodes[n].hostname == system.hostname && global.nodes[n].bootId == system.bootId)
          node = static_cast<int>(n);
      if (node < 0) {
        node = static_cast<int>(global.nodes.size());
        global.nodes.push_back(std::move(system));
      }
    }
    RankPlacement place{node, -1};
    const std::string busId = r < gpuBusIds.size() ? gpuBusIds[r] : std::string();
    if (!busId.empty()) {
      place.gpu = global.nodes[size_t(node)].graph.find(NodeKind::Gpu, normalizeBusId(busId));
      if (place.gpu < 0) {
        throw Error(ErrorCode::Remote, "topology: rank " + std::to_string(r) + " uses GPU " + busId +
                                           ", which is not in the graph of host " +
                                           global.nodes[size_t(node)].hostname);
      }
    }
    global.ranks.push_back(place);
  }
  return global;
}

GlobalSystem mergeSystems(const std::vector<RankTopology>& ranks) {
  std::vector<std::string> texts;
  std::vector<int> textOfRank;
  std::vector<std::string> gpuBusIds;
  for (const RankTopology& rank : ranks) {
    auto same = std::find(texts.begin(), texts.end(), rank.topology);
    textOfRank.push_back(int(same - texts.begin()));
    if (same == texts.end()) texts.push_back(rank.topology);
    gpuBusIds.push_back(rank.gpuBusId);
  }
  return mergeSystems(texts, textOfRank, gpuBusIds);
}

}  // namespace tutti::topo
