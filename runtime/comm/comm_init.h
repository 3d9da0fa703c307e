// A communicator's init: joining the job and building its resources (comm_init.cpp).
#pragma once

#include "nccl.h"

namespace tutti {

// Joins the job and builds the communicator's resources. Throws on failure.
void initCommunicator(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device);

}  // namespace tutti
