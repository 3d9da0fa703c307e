// A communicator's init: joining the job and building its resources (comm_init.cpp).
#pragma once

#include <vector>

#include "nccl.h"
#include "runtime/comm/conn_key.h"

namespace tutti {

// Joins the job and builds the communicator's resources. Throws on failure.
void initCommunicator(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device);

// The connections init makes: to the neighbours of every channel's ring (none for one rank).
// ncclCommResume makes them again.
std::vector<ConnKey> ringConnections(const ncclComm* comm);

}  // namespace tutti
