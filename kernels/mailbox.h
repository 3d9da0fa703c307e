// Mailboxes: the one-shot all-reduce of small messages between the ranks of one host, without
// FIFOs. Every rank owns two mailboxes in its control block (shared memory that the host's other
// ranks map) and uses them in turn, one per operation. A rank writes its input, with the
// reduction's pre-operation applied, into its mailbox and then publishes the operation's number
// in the mailbox's first word; then it folds every rank's mailbox in rank order,
// ((x0 op x1) op x2) op ..., as each one's number appears. The smallest messages share the cache
// line of that number, so a rank sees a peer's input in one cache-line transfer.
//
// No rank waits for its mailbox to be free: a rank writes operation k's mailbox (the one operation
// k - 2 used) after finishing operation k - 1, which needed every peer's input of k - 1, which
// every peer wrote only after finishing k - 2, the last read of that mailbox.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kernels/bell.h"
#include "kernels/execution_context.h"
#include "kernels/host_reduce.h"

namespace tutti::kern {

// The largest input a mailbox holds: 8 KiB (a power of two, as message sizes often are) and the
// rest of the cache line its number and call start.
constexpr size_t kMailboxBytes = 8192 + 40;

struct alignas(64) Mailbox {
  std::atomic<uint64_t> seq{0};  // the operation whose input the mailbox holds (0: none yet)
  uint64_t signature = 0;        // its call (kernels/work.h, callSignature), compared by the readers
  uint64_t count = 0;
  char data[kMailboxBytes];  // the first 40 bytes share seq's cache line
};
static_assert(sizeof(Mailbox) == 8192 + 64);

// One all-reduce through the mailboxes, on every rank of the communicator (all on this host).
struct MailboxAllReduce {
  uint64_t seq = 0;  // the operation's number, 1, 2, ... in the order every rank runs them
  int rank = 0, nranks = 1;
  Mailbox* const* boxes = nullptr;  // by rank: each rank's mailbox for this operation (seq % 2)
  Bell* const* bells = nullptr;     // by rank: the bell its waiting thread sleeps on
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  RedOp redop;
  const char* name = "AllReduce";  // for errors, with opSeq
  uint64_t opSeq = 0;
  uint64_t signature = 0;  // callSignature of this rank's call; 0: not checked
};

// Runs it on the calling thread: waits spin, then yield, then sleep on ctx.bell (which must be
// op.bells[op.rank]), bounded by ctx's timeout and abort flag. Throws Error: Timeout naming the
// rank that never wrote its input, Aborted, InvalidArgument for a reduction it cannot apply, or
// InvalidUsage naming both calls when a peer's call differs (its signature or count).
void runMailboxAllReduce(const MailboxAllReduce& op, const ExecutionContext& ctx);

}  // namespace tutti::kern
