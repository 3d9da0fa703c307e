// One call (a collective or a point-to-point operation) as the runtime carries it from the C
// entry point to a launch.
#pragma once

#include <cstddef>

#include "algorithms/plan.h"
#include "nccl.h"

struct ncclComm;

namespace tutti {

struct Task {
  plan::Coll coll;
  const void* in;
  void* out;
  size_t count;  // as the user's call names it (per rank for the gathering collectives)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;  // root, or the peer of Send/Recv
  ncclComm* comm;
  cudaStream_t stream;
  bool partOfAllToAllv = false;  // a Send or Recv that is one block of an ncclAllToAllv (its signature says so)
  uint32_t allToAllvSeq = 0;     // that call's number on the communicator (ncclComm::executor.allToAllvSeq)
};

// The collectives that reduce (and so take a reduction operation).
inline bool reduces(plan::Coll c) {
  return c == plan::Coll::AllReduce || c == plan::Coll::ReduceScatter || c == plan::Coll::Reduce;
}

// Which of the user's buffers a collective reads and writes, and how many elements each holds.
struct BufferUse {
  bool readsIn;
  bool writesOut;
  size_t inCount;
  size_t outCount;
};

inline BufferUse bufferUse(plan::Coll kind, size_t count, int nranks, bool isRoot) {
  size_t n = size_t(nranks);
  switch (kind) {
    case plan::Coll::AllReduce: return {true, true, count, count};
    case plan::Coll::AllGather: return {true, true, count, count * n};
    case plan::Coll::ReduceScatter: return {true, true, count * n, count};
    case plan::Coll::Broadcast: return {isRoot, true, count, count};
    case plan::Coll::Reduce: return {true, isRoot, count, count};
    case plan::Coll::AlltoAll: return {true, true, count * n, count * n};
    case plan::Coll::Gather: return {true, isRoot, count, count * n};
    case plan::Coll::Scatter: return {isRoot, true, count * n, count};
    case plan::Coll::Send: return {true, false, count, 0};
    case plan::Coll::Recv: return {false, true, 0, count};
  }
  return {};
}

}  // namespace tutti
