// The built-in algorithms: rings for the reducing and gathering collectives, direct exchanges
// for the all-to-all family and point-to-point, and the algorithm library (one file each, with
// its alpha-beta cost at the top).
#pragma once

#include "algorithms/lane.h"

namespace tutti::plan {

// Rings: rank r sends to (r + 1) % n and receives from (r + n - 1) % n on every channel.
RankPlan ringAllReduce(int rank, int nranks);
RankPlan ringAllGather(int rank, int nranks);
RankPlan ringReduceScatter(int rank, int nranks);
RankPlan ringBroadcast(int rank, int nranks, int root);  // a chain root -> root+1 -> ...
RankPlan ringReduce(int rank, int nranks, int root);     // a chain root+1 -> ... -> root

// Direct exchanges: one lane per peer and direction.
RankPlan directAlltoAll(int rank, int nranks);
RankPlan directGather(int rank, int nranks, int root);
RankPlan directScatter(int rank, int nranks, int root);
RankPlan directSend(int rank, int peer);
RankPlan directRecv(int rank, int peer);

// The algorithm library. Every generator serves any rank count >= 1 and any root.
RankPlan treeAllReduce(int rank, int nranks);          // double binary tree
RankPlan recdoublingAllReduce(int rank, int nranks);   // recursive doubling (deterministic)
RankPlan rabenseifnerAllReduce(int rank, int nranks);  // halving reduce-scatter + doubling all-gather
RankPlan hierarchicalAllReduce(int rank, int nranks, int ranksPerNode);
RankPlan chainAllReduce(int rank, int nranks);         // fixed order 0, 1, ..., n-1 (deterministic)
RankPlan bruckAlltoAll(int rank, int nranks);
RankPlan bruckAllGather(int rank, int nranks);
RankPlan pairwiseAlltoAll(int rank, int nranks);
RankPlan patAllGather(int rank, int nranks);
RankPlan patReduceScatter(int rank, int nranks);
RankPlan binomialBroadcast(int rank, int nranks, int root);
RankPlan binomialReduce(int rank, int nranks, int root);

}  // namespace tutti::plan
