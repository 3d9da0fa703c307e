// The built-in algorithms: rings for the reducing and gathering collectives, direct exchanges
// for the all-to-all family and point-to-point, and the algorithm library. One file each holds
// the plan generators, their alpha-beta cost at the top, and the analytic cost model's estimate.
#pragma once

#include <optional>
#include <vector>

#include "algorithms/lane.h"
#include "algorithms/tree_shape.h"

namespace tutti::sim {
struct CostModel;
}

namespace tutti::plan {

// Rings: a rank sends to the next rank of the ring order and receives from the one before
// (ring_order.h); with a count instead of an order, rank order: r sends to (r + 1) % n.
class RingOrder;
RankPlan ringAllReduce(int rank, const RingOrder& ring);
RankPlan ringAllGather(int rank, const RingOrder& ring);
RankPlan ringReduceScatter(int rank, const RingOrder& ring);
RankPlan ringBroadcast(int rank, const RingOrder& ring, int root);  // a chain root -> next -> ...
RankPlan ringReduce(int rank, const RingOrder& ring, int root);     // a chain next of root -> ... -> root
RankPlan ringAllReduce(int rank, int nranks);
RankPlan ringAllGather(int rank, int nranks);
RankPlan ringReduceScatter(int rank, int nranks);
RankPlan ringBroadcast(int rank, int nranks, int root);
RankPlan ringReduce(int rank, int nranks, int root);

// Direct exchanges: one lane per peer and direction.
RankPlan directAlltoAll(int rank, int nranks);
RankPlan directGather(int rank, int nranks, int root);
RankPlan directScatter(int rank, int nranks, int root);
RankPlan directSend(int rank, int peer);
RankPlan directRecv(int rank, int peer);

// The algorithm library. Every generator serves any rank count >= 1 and any root.
// Double binary tree: two trees given as shapes (the topology's node trees), or with none given,
// in-order trees over places along the ring order.
RankPlan treeAllReduce(int rank, const RingOrder& ring, const std::vector<TreeShape>& trees = {});
// The tree's chunks per tree in a tile. 1 (no pipelining) by measurement: on a 2-core host with
// 4 ranks, 4 chunks made a forced tree 20% faster at 2-16 MiB but 18% slower at 256 KiB, still
// slower than ring, while the cost model rated it above ring at 16 MiB (perf/RESULTS.md).
constexpr int kTreeChunks = 1;
RankPlan recdoublingAllReduce(int rank, int nranks);   // recursive doubling (deterministic)
RankPlan rabenseifnerAllReduce(int rank, int nranks);  // halving reduce-scatter + doubling all-gather
RankPlan hierarchicalAllReduce(int rank, int nranks, int ranksPerNode);
RankPlan chainAllReduce(int rank, int nranks);    // fixed order 0, 1, ..., n-1 (deterministic)
RankPlan oneshotAllReduce(int rank, int nranks);  // every rank folds all inputs, order 0, 1, ..., n-1
RankPlan bruckAlltoAll(int rank, int nranks);
RankPlan bruckAllGather(int rank, int nranks);
RankPlan pairwiseAlltoAll(int rank, int nranks);
RankPlan patAllGather(int rank, int nranks);
RankPlan patReduceScatter(int rank, int nranks);
RankPlan binomialBroadcast(int rank, int nranks, int root);
RankPlan binomialReduce(int rank, int nranks, int root);

// The analytic cost model's estimates (sim.h, analyticUs), in microseconds, each beside its
// algorithm's generators; nothing for a collective the algorithm does not serve. The registry
// attaches them to the algorithms' entries (Algorithm::analyticCost).
std::optional<double> ringCost(const sim::CostModel& model);
std::optional<double> directCost(const sim::CostModel& model);
std::optional<double> treeCost(const sim::CostModel& model);
std::optional<double> recdoublingCost(const sim::CostModel& model);
std::optional<double> rabenseifnerCost(const sim::CostModel& model);
std::optional<double> hierarchicalCost(const sim::CostModel& model);  // the ring's where its plan is the ring's
std::optional<double> bruckCost(const sim::CostModel& model);
std::optional<double> pairwiseCost(const sim::CostModel& model);
std::optional<double> patCost(const sim::CostModel& model);
std::optional<double> binomialCost(const sim::CostModel& model);
std::optional<double> chainCost(const sim::CostModel& model);
std::optional<double> oneshotCost(const sim::CostModel& model);

}  // namespace tutti::plan
