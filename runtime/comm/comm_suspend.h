// What ncclCommSuspend and ncclCommResume do to a communicator, and the figures of
// ncclCommMemStats: the memory it holds, as what a suspend releases and what stays.
//
// A suspend with NCCL_SUSPEND_MEM releases the memory the communicator makes again on demand: its
// connections (FIFOs, the staging FIFOs of copy mode, the shm segments and net FIFOs it mapped),
// its scratch blocks, its cached launches and plans. What stays is its control block (which its
// host's peers map) and what the user registered. Resume makes the ring connections of init again;
// the rest comes back as operations need it. Both are collective: every rank calls them, and they
// meet in bootstrap barriers (each bounded by TUTTI_BOOTSTRAP_TIMEOUT, and ended by an abort), so
// that no rank releases a FIFO a peer still uses or makes one while a peer still holds the old.
#pragma once

#include <cstdint>

#include "nccl.h"

namespace tutti {

// ncclCommSuspend (flags checked by the caller): refuses (InvalidUsage) while operations are queued
// or running on the communicator, or inside a group. A failed barrier fails the communicator.
void suspendComm(ncclComm* comm, int flags);
// ncclCommResume: refuses (InvalidUsage) a communicator that is not suspended.
void resumeComm(ncclComm* comm);

// In bytes of the backend's memory (host memory on the host backend).
struct CommMemoryFigures {
  uint64_t suspendable = 0;  // FIFOs (and staging) this rank holds + scratch blocks
  uint64_t persistent = 0;   // this rank's control block
  bool suspended = false;    // a suspend released the memory, and no resume has run
};
CommMemoryFigures memoryFigures(const ncclComm* comm);

}  // namespace tutti
