// The built-in algorithms of the foundation: rings for the reducing and gathering collectives,
// direct exchanges for the all-to-all family and point-to-point.
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

}  // namespace tutti::plan
