// One-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal) as the runtime carries them from
// the C entry point to the stream: checked in runtime/api/api_rma.cpp, kept until the outermost
// ncclGroupEnd inside a group, then queued on their streams through the executor backend's
// stream-ordered copies and host jobs (kern::Executor::enqueueCopy, enqueueHostJob). Decisions:
//   - Where the bytes go. The target's window part is known by its address in the target's
//     process (runtime/comm/windows.h). A target that is a thread of this process: a copy into it,
//     by the backend (a host copy; the copy engine on the cuda backend). A target in another
//     process of this host, on a backend whose memory is the host's: a cross-memory write
//     (process_vm_writev, base/cross_memory.h) into its window, so neither side stages the bytes
//     and the target's application takes no part. Other cases are refused by name (not supported
//     yet): targets on other hosts, and device memory between processes.
//   - A signal is one atomic add, with release ordering, on the counter the origin owns in the
//     target's signal segment for the call's (ctx, sigIdx), queued after the put's copy on the same
//     stream: whoever reads the counter with acquire ordering sees the data, and every earlier put
//     and signal of that origin on that stream, whatever their ctx and sigIdx.
//   - A wait is a host job that polls its counters (briefly spinning, then sleeping a little
//     longer each round, up to a fraction of a millisecond) until each has reached the total it
//     expects, which was fixed when the wait was queued (counts are cumulative, as NCCL's are). It
//     ends with an error at TUTTI_TIMEOUT, naming the peer and how many of the signals came, and
//     at ncclCommAbort; either fails the communicator, as a collective's timeout does.
//   - In a group, puts and signals run first (in call order), then waits: a ring or all-to-all
//     of puts and waits in one group never waits on a put it has not issued.
//   - Every operation is recorded in the flight recorder (queued, running, done or failed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nccl.h"
#include "runtime/comm/windows.h"

struct ncclComm;

namespace tutti {

struct RmaOp {
  enum class Kind : uint8_t { Put, Signal, Wait };
  Kind kind = Kind::Signal;
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  // Put: the local bytes and where they go in the peer's part of the window.
  const void* local = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclInt8;
  std::shared_ptr<const WindowParts> window;
  size_t offset = 0;
  // Put and Signal: the target; Wait: its descriptors.
  int peer = -1;
  int ctx = 0;
  int sigIdx = 0;
  std::vector<ncclWaitSignalDesc_t> waits;
};

// Runs the operation now (queued on its stream), or keeps it for the outermost ncclGroupEnd.
// Throws Error.
void enqueueRma(RmaOp op);
// The outermost ncclGroupEnd: runs the group's one-sided operations (puts and signals, then waits),
// or drops them when the group failed. Throws Error.
void endRmaGroup(bool drop);
// One-sided operations kept by the thread's group.
size_t rmaGroupSize();

}  // namespace tutti
