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

// Where a case's buffers live when not in host memory (device memory for the cuda backend): the
// runner mirrors its host buffers there, runs the call on stream(), waits, and copies back.
struct CaseBuffers {
  virtual ~CaseBuffers() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual cudaStream_t stream() = 0;
  virtual void synchronize() = 0;
};
// The runner's name for a collective of the plan IR; false for send and recv, which it runs
// as one SendRecv.
bool fromPlanColl(tutti::plan::Coll c, Coll* out);
// Runs one case on this rank and checks its output; throws RankFailure on a wrong element. With
// buffers, on those (and their stream); with output, its result's bytes are copied there.
void runCase(const Case& c, int rank, int nranks, ncclComm_t comm, CaseBuffers* buffers = nullptr,
             std::vector<char>* output = nullptr);
// Every collective, type and op (all ops only for reducing collectives) at each count.
std::vector<Case> allCases(const std::vector<size_t>& counts, int nranks);
void runAll(const std::vector<Case>& cases, int rank, int nranks, ncclComm_t comm, CaseBuffers* buffers = nullptr);

}  // namespace tutti_test
