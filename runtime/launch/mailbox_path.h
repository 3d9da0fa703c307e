// The mailbox path: one-shot all-reduces of small messages between the ranks of one host run
// through the ranks' control blocks (kernels/mailbox.h) without a launch, on the host backend.
#pragma once

#include <cstdint>

#include "kernels/redop.h"
#include "runtime/launch/task.h"

namespace tutti {

// Runs one all-reduce through the mailboxes on this thread, which must be the one of the
// communicator's worker 0 (it sleeps on that worker's bell). Takes the next mailbox number.
// signature: the call's (nextCallSignature), which the peers compare with theirs.
void runMailboxAllReduce(ncclComm* comm, const Task& t, const kern::RedOp& redop, const char* name, uint64_t opSeq,
                         uint64_t signature);

// A blocking all-reduce that the selector sends through the mailboxes runs here and now, without
// a launch: nothing is bound, so a loop of them costs only the exchange. Returns false when the
// call is not one.
bool mailboxNow(ncclComm* comm, const Task& t);

// A mailbox all-reduce on a host stream, queued without a launch. Returns false when the call is
// not one, or its slot is still busy.
bool queueMailbox(ncclComm* comm, const Task& t);

}  // namespace tutti
