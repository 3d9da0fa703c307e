// The executor's form of a call's reduction: ncclRedOp_t (built-in, average, or a user's
// PreMulSum) resolved for the communicator and data type.
#pragma once

#include "kernels/redop.h"
#include "nccl.h"

struct ncclComm;

namespace tutti {

// The reduction for `op` on `type`. A device-resident PreMulSum scalar is read now on a host
// backend; on a device backend *deviceScalar is set to it, for the executor to read when the
// operation runs (otherwise *deviceScalar is null).
kern::RedOp resolveRedOp(ncclComm* comm, ncclDataType_t type, ncclRedOp_t op, const void** deviceScalar);

}  // namespace tutti
