// Moving node graphs between ranks at init: to a string and back, and merging every rank's
// view into the global system.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace tutti::topo {

// NCCL's XML with the host's identity on <system>; warnings stay local.
std::string serializeSystem(const NodeSystem& system);
NodeSystem deserializeSystem(const std::string& text, const std::string& source = "peer topology");

// What each rank contributes: its node's serialised graph and the PCI bus id of its GPU (empty
// for a host process).
struct RankTopology {
  std::string topology;
  std::string gpuBusId;
};

// Ranks with the same hostname and boot id share a node (the first rank's graph is kept);
// nodes are numbered in order of their lowest rank. Throws tutti::Error naming the rank whose
// GPU is missing from its node's graph.
GlobalSystem mergeSystems(const std::vector<RankTopology>& ranks);
// The same, with each distinct graph given once: rank r's is texts[textOfRank[r]], its GPU
// gpuBusIds[r] (missing or empty: none). Each text is parsed once.
GlobalSystem mergeSystems(const std::vector<std::string>& texts, const std::vector<int>& textOfRank,
                          const std::vector<std::string>& gpuBusIds);

}  // namespace tutti::topo
