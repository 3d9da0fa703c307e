// The words for why an executor stopped an operation (kernels/work.h, ExecFault): the same
// message whichever executor stopped it, the host's on a worker thread or a kernel through its
// fault record.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"
#include "kernels/wait_slot.h"
#include "kernels/work.h"

namespace tutti::kern {

// "AllReduce #12: rank 3 received 64 bytes from rank 2 (host pid) where it expected 128 (...)".
// peerName(peer) names a peer ("rank 2 (host pid 1234)"); timeoutSeconds is quoted by timeouts.
std::string describeFault(const ExecFault& fault, int rank, const std::function<std::string(int)>& peerName,
                          double timeoutSeconds);

// What a lane stopped by a Timeout or Aborted fault (or blocked right now) waits for, as the
// wait record that describeWaitingOp and describeWaitedFor word (sinceNs left 0).
WaitRecord waitRecordOf(const ExecFault& fault);

// A call as its signature (kern::callSignature) and count tell it: "AllReduce(count 4096,
// float32, sum) as collective #17", "a send or receive of 64 bytes", "ncclAllToAllv #3 with a block
// of 64 bytes between the two".
std::string describeCall(uint64_t signature, uint64_t count);
// "<peer> called <theirs> where rank <rank> called <ours> (...)": the words of every call mismatch
// (an executor's fault, the mailboxes' check).
std::string describeCallMismatch(const std::string& peer, uint64_t theirs, uint64_t theirCount, int rank, uint64_t ours,
                                 uint64_t ourCount);

// The error code a fault maps to: Timeout, Aborted, InvalidUsage (the ranks' calls disagree) or
// InvalidArgument (a reduction that cannot be applied).
ErrorCode faultCode(const ExecFault& fault);

}  // namespace tutti::kern
