// What ncclCommShrink and ncclCommRevoke do to a communicator: the exclude list checked, the
// parent's operations stopped, the survivors' meeting on a new root without the excluded ranks,
// and the revoked state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace tutti {

// The parent's ranks that stay, in rank order, once the exclude list is checked: a count of 0 or
// more, every entry in range and named once, and not this rank (an excluded rank does not call
// ncclCommShrink). Throws InvalidArgument naming the entry.
std::vector<int> shrinkSurvivors(const ncclComm* parent, const int* excludeRanks, int excludeCount);

// "the shrunk communicator's ranks 0, 1, 2 are parent ranks 0, 2, 3", for errors of its join.
std::string describeShrunkRanks(const std::vector<int>& survivors);

// Throws InvalidUsage unless the parent's bootstrap is there to meet through: its init finished
// (a nonblocking one included) and joined every rank.
void checkShrinkable(const ncclComm* parent);

// NCCL_SHRINK_ABORT: stops the parent's operations, as ncclCommAbort would but leaving the handle
// to the caller. A healthy parent's peers are told, so that one still inside an operation with
// this rank stops now rather than at its timeout.
void abortForShrink(ncclComm* parent);

// The survivors agree on the new communicator's root. The lowest surviving rank makes a fresh
// root in its process; its id travels down a binomial tree of the survivors (log2 n hops), each
// hop straight from one survivor's bootstrap to another's listener, whose addresses every rank
// has held since the parent's init: no excluded rank, dead or alive, is on any path, and the
// parent's abort flag (set after a failure) is not watched. Each hop waits at most TUTTI_TIMEOUT
// plus TUTTI_BOOTSTRAP_TIMEOUT; a survivor whose exclude list differs from the lowest rank's fails
// with InvalidUsage.
ncclUniqueId meetSurvivors(ncclComm* parent, const std::vector<int>& survivors);

// Every rank's `bytes` at `data` (its own at data + rank * bytes), in rank order, for
// ncclCommSplit on a revoked communicator: through rank 0, straight between listeners, not
// watching the abort flag that the revoke set. 2 (n - 1) messages at rank 0; each wait at most
// TUTTI_TIMEOUT plus TUTTI_BOOTSTRAP_TIMEOUT. `round` tells two calls of one split apart.
void allGatherRevoked(ncclComm* comm, void* data, size_t bytes, uint32_t round);

// ncclCommRevoke: marks comm revoked, makes its running and queued operations stop (their callers
// get ncclInvalidUsage naming the revoke) and tells its peers, whose communicators then fail
// naming this rank. The handle stays for ncclCommShrink, ncclCommDestroy or ncclCommAbort.
void revokeComm(ncclComm* comm);

// Operations of comm still running or queued on a stream.
bool commBusy(const ncclComm* comm);

}  // namespace tutti
