// The collective case runner shared by the multi-rank tests: every collective x data type x
// reduction, in and out of place, run on one rank and checked against a float64 reference.
#pragma once

#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"

namespace tutti_test {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter, SendRecv };
const char* collName(Coll c);
bool reduces(Coll c);

struct Case {
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  bool inPlace;
  int root;
};

std::string describe(const Case& c, int rank, int nranks);
// The runner's name for a collective of the plan IR; false for send and recv, which it runs
// as one SendRecv.
bool fromPlanColl(tutti::plan::Coll c, Coll* out);
// Runs one case on this rank and checks its output; throws RankFailure on a wrong element.
void runCase(const Case& c, int rank, int nranks, ncclComm_t comm);
// Every collective, type and op (all ops only for reducing collectives) at each count.
std::vector<Case> allCases(const std::vector<size_t>& counts, int nranks);
void runAll(const std::vector<Case>& cases, int rank, int nranks, ncclComm_t comm);

}  // namespace tutti_test
