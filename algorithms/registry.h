// The algorithm registry: every algorithm a communicator can run, by name, with the
// collectives it serves and how to build one rank's plan. The built-ins are registered by
// builtinAlgorithms(); custom plan files add theirs at init. The selector chooses among the
// registry's entries; NCCL_ALGO names them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/lane.h"
#include "algorithms/tree_shape.h"

namespace tutti::sim {
struct CostModel;
}

namespace tutti::plan {

struct PlanRequest {
  Coll coll = Coll::AllReduce;
  int rank = 0;
  int nranks = 1;
  int root = 0;          // root of rooted collectives, the peer of Send/Recv
  int ranksPerNode = 0;  // ranks of a node are contiguous; 0: all ranks on one node
  // The order the channel's ring visits the ranks (ring[i] sends to ring[i + 1], the last to the
  // first), the same on every rank; empty: rank order. Ring plans follow it (ring_order.h).
  std::vector<int> ring{};
  // The tree algorithm's two trees (the topology's node trees of the channel); empty: across
  // nodes of ranksPerNode contiguous ranks, node trees over those blocks; on one node, in-order
  // trees along the ring order.
  std::vector<TreeShape> trees{};
};

struct Algorithm {
  std::string name;                 // as NCCL_ALGO and logs name it: "ring", "direct", ...
  std::vector<Coll> colls;          // the collectives it implements
  bool deterministic = false;       // a fixed reduction order, independent of the message size
  std::string origin = "built-in";  // or the plan file it came from
  // Builds one rank's plan. Throws tutti::Error (InvalidUsage) when it cannot serve the request,
  // for example a plan file written for another number of ranks.
  std::function<RankPlan(const PlanRequest&)> build;
  // Its rounds move many blocks as one joined message (Bruck, PAT): on the host executor the
  // selector takes it only for small blocks (selector.cpp, kHostJoinedBlockBytes).
  bool joinsRounds = false;
  // The analytic cost model's estimate (sim.h, analyticUs), or nothing for a collective it does
  // not serve. None for a plan file's algorithm, which the selector times step by step.
  std::optional<double> (*analyticCost)(const sim::CostModel&) = nullptr;

  bool serves(Coll coll) const;
};

class AlgorithmRegistry {
 public:
  // Adds an algorithm; throws tutti::Error (InvalidUsage) if the name is taken.
  void add(Algorithm algorithm);
  const Algorithm* find(const std::string& name) const;  // nullptr if unknown
  const std::vector<Algorithm>& all() const { return algorithms_; }

 private:
  std::vector<Algorithm> algorithms_;
};

// A registry holding the built-in algorithms.
AlgorithmRegistry builtinAlgorithms();

}  // namespace tutti::plan
