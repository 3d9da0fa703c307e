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
  int root;      // root, or the peer of Send/Recv
  ncclComm* comm;
  cudaStream_t stream;
};

// The collectives that reduce (and so take a reduction operation).
inline bool reduces(plan::Coll c) { return c == plan::Coll::AllReduce || c == plan::Coll::ReduceScatter || c == plan::Coll::Reduce; }

}  // namespace tutti
