// The registry and the built-in algorithms' entries.
#include "algorithms/registry.h"

#include <algorithm>

#include "algorithms/builtin.h"
#include "algorithms/ring_order.h"
#include "base/error.h"
#include "topology/channels.h"

namespace tutti::plan {

bool Algorithm::serves(Coll coll) const { return std::find(colls.begin(), colls.end(), coll) != colls.end(); }

void AlgorithmRegistry::add(Algorithm algorithm) {
  if (find(algorithm.name))
    throw Error(ErrorCode::InvalidUsage, "algorithm \"" + algorithm.name + "\" (" + algorithm.origin +
                                             ") is already defined by " + find(algorithm.name)->origin);
  algorithms_.push_back(std::move(algorithm));
}

const Algorithm* AlgorithmRegistry::find(const std::string& name) const {
  for (const Algorithm& a : algorithms_)
    if (a.name == name) return &a;
  return nullptr;
}

namespace {

[[noreturn]] void noPlan(const char* algorithm, Coll coll) {
  throw Error(ErrorCode::Internal, std::string(algorithm) + ": no plan for " + collName(coll));
}

// Node trees over blocks of `perNode` contiguous ranks (the last may be short), each block's
// first rank its head; none on one node.
std::vector<TreeShape> blockTrees(int nranks, int perNode) {
  if (perNode <= 0 || nranks <= perNode) return {};
  std::vector<std::vector<int>> chains;
  for (int r = 0; r < nranks; r++) {
    if (r % perNode == 0) chains.emplace_back();
    chains.back().push_back(r);
  }
  std::vector<TreeShape> trees;
  for (bool mirrored : {false, true}) {
    topo::Tree t = topo::treeOverChains(chains, nranks, mirrored);
    trees.push_back({std::move(t.parent), std::move(t.children)});
  }
  return trees;
}

// An algorithm serving one collective with a generator that needs only the rank and the count.
Algorithm simple(const char* name, Coll coll, bool deterministic, RankPlan (*generate)(int, int),
                 std::optional<double> (*cost)(const sim::CostModel&)) {
  return {name,
          {coll},
          deterministic,
          "built-in",
          [name, coll, generate](const PlanRequest& q) {
            if (q.coll != coll) noPlan(name, q.coll);
            return generate(q.rank, q.nranks);
          },
          false,
          cost};
}

void addLibrary(AlgorithmRegistry& r) {
  r.add({"tree",
         {Coll::AllReduce},
         false,
         "built-in",
         [](const PlanRequest& q) {
           if (q.coll != Coll::AllReduce) noPlan("tree", q.coll);
           return treeAllReduce(q.rank, RingOrder(q.nranks, q.ring),
                                q.trees.empty() ? blockTrees(q.nranks, q.ranksPerNode) : q.trees);
         },
         false,
         treeCost});
  // Deterministic: see recdoubling.cpp for why its order does not depend on size or rank.
  r.add(simple("recdoubling", Coll::AllReduce, true, recdoublingAllReduce, recdoublingCost));
  r.add(simple("rabenseifner", Coll::AllReduce, false, rabenseifnerAllReduce, rabenseifnerCost));
  r.add({"hierarchical",
         {Coll::AllReduce},
         false,
         "built-in",
         [](const PlanRequest& q) {
           if (q.coll != Coll::AllReduce) noPlan("hierarchical", q.coll);
           return hierarchicalAllReduce(q.rank, q.nranks, q.ranksPerNode);
         },
         false,
         hierarchicalCost});
  r.add({"bruck",
         {Coll::AlltoAll, Coll::AllGather},
         false,
         "built-in",
         [](const PlanRequest& q) {
           if (q.coll == Coll::AlltoAll) return bruckAlltoAll(q.rank, q.nranks);
           if (q.coll == Coll::AllGather) return bruckAllGather(q.rank, q.nranks);
           noPlan("bruck", q.coll);
         },
         true,
         bruckCost});
  r.add(simple("pairwise", Coll::AlltoAll, false, pairwiseAlltoAll, pairwiseCost));
  // PAT and binomial are deterministic for the collectives they reduce in (reduce-scatter, reduce):
  // each element is summed along trees fixed by the rank count (and root), not by the size, the
  // channel or the ring order, so TUTTI_DETERMINISTIC has one of each to keep to.
  r.add({"pat",
         {Coll::AllGather, Coll::ReduceScatter},
         true,
         "built-in",
         [](const PlanRequest& q) {
           if (q.coll == Coll::AllGather) return patAllGather(q.rank, q.nranks);
           if (q.coll == Coll::ReduceScatter) return patReduceScatter(q.rank, q.nranks);
           noPlan("pat", q.coll);
         },
         true,
         patCost});
  r.add({"binomial",
         {Coll::Broadcast, Coll::Reduce},
         true,
         "built-in",
         [](const PlanRequest& q) {
           if (q.coll == Coll::Broadcast) return binomialBroadcast(q.rank, q.nranks, q.root);
           if (q.coll == Coll::Reduce) return binomialReduce(q.rank, q.nranks, q.root);
           noPlan("binomial", q.coll);
         },
         false,
         binomialCost});
  // Chain keeps rank order rather than the topology's ring: its fold order is its contract, so
  // a result must not change with where the ranks were placed.
  r.add(simple("chain", Coll::AllReduce, true, chainAllReduce, chainCost));
  // The same fold order as chain, computed by every rank from every rank's input.
  r.add(simple("oneshot", Coll::AllReduce, true, oneshotAllReduce, oneshotCost));
}

}  // namespace

AlgorithmRegistry builtinAlgorithms() {
  AlgorithmRegistry r;
  r.add({"ring",
         {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce},
         false,
         "built-in",
         [](const PlanRequest& q) {
           RingOrder ring(q.nranks, q.ring);
           switch (q.coll) {
             case Coll::AllReduce: return ringAllReduce(q.rank, ring);
             case Coll::AllGather: return ringAllGather(q.rank, ring);
             case Coll::ReduceScatter: return ringReduceScatter(q.rank, ring);
             case Coll::Broadcast: return ringBroadcast(q.rank, ring, q.root);
             case Coll::Reduce: return ringReduce(q.rank, ring, q.root);
             default: throw Error(ErrorCode::Internal, std::string("ring: no plan for ") + collName(q.coll));
           }
         },
         false,
         ringCost});
  r.add({"direct",
         {Coll::AlltoAll, Coll::Gather, Coll::Scatter, Coll::Send, Coll::Recv},
         false,
         "built-in",
         [](const PlanRequest& q) {
           switch (q.coll) {
             case Coll::AlltoAll: return directAlltoAll(q.rank, q.nranks);
             case Coll::Gather: return directGather(q.rank, q.nranks, q.root);
             case Coll::Scatter: return directScatter(q.rank, q.nranks, q.root);
             case Coll::Send: return directSend(q.rank, q.root);
             case Coll::Recv: return directRecv(q.rank, q.root);
             default: throw Error(ErrorCode::Internal, std::string("direct: no plan for ") + collName(q.coll));
           }
         },
         false,
         directCost});
  addLibrary(r);
  return r;
}

}  // namespace tutti::plan
