// The registry and the built-in algorithms' entries.
#include "algorithms/registry.h"

#include <algorithm>

#include "algorithms/builtin.h"
#include "runtime/error.h"

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

AlgorithmRegistry builtinAlgorithms() {
  AlgorithmRegistry r;
  r.add({"ring",
         {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce},
         false,
         "built-in",
         [](const PlanRequest& q) {
           switch (q.coll) {
             case Coll::AllReduce: return ringAllReduce(q.rank, q.nranks);
             case Coll::AllGather: return ringAllGather(q.rank, q.nranks);
             case Coll::ReduceScatter: return ringReduceScatter(q.rank, q.nranks);
             case Coll::Broadcast: return ringBroadcast(q.rank, q.nranks, q.root);
             case Coll::Reduce: return ringReduce(q.rank, q.nranks, q.root);
             default: throw Error(ErrorCode::Internal, std::string("ring: no plan for ") + collName(q.coll));
           }
         }});
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
         }});
  return r;
}

}  // namespace tutti::plan
