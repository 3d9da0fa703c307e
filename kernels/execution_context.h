// What a worker loop is given by whoever runs it (kernels/backend.h, Launch::context): its bell,
// abort flag, timeout and wait policy, the hooks its waits ask of the runtime, and where it
// publishes what it waits for. Shared by the executors and the host threads that wait on FIFOs or
// mailboxes (kernels/mailbox.h); the worker's rules are in kernels/README.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/bell.h"
#include "kernels/wait_hooks.h"
#include "kernels/wait_slot.h"

namespace tutti::kern {

struct ExecutionContext {
  Bell* bell = nullptr;  // this worker's bell
  const std::atomic<bool>* abortFlag = nullptr;
  double timeoutSeconds = 300;  // with no progress at all
  int spin = 200;               // busy polls before yielding
  int yields = 50;              // polls that yield the CPU before sleeping
  int rank = 0;
  // What the worker's waits ask of the runtime: peers' names, peers' calls, the network
  // (kernels/wait_hooks.h). A pointer to hooks that outlive the operation (the runtime's belong to
  // the communicator), so that making a context per operation costs nothing. Never null: unset,
  // the defaults (bare rank numbers, no probes, no network).
  const WaitHooks* hooks = &WaitHooks::none();
  std::string describePeer(int peer) const { return hooks->describePeer(peer); }
  // Where the worker publishes what it waits for while a wait sleeps (and clears it when it moves
  // on or the operation ends), for readers on other threads. Unset: nothing is published.
  WaitSlot* waitSlot = nullptr;
  // How long a wait stalls before it first asks hooks->probeCall (then each second).
  static constexpr double kProbeAfterSeconds = 0.5;
  // Counts the direct messages (zero-copy, lane_engine.h) the worker read in a peer's buffer,
  // in this process or another; unset: not counted.
  std::atomic<uint64_t>* directReads = nullptr;
};

// The idle poll number `idle` (from 0) of a wait: the first ctx.spin polls pause, the next
// ctx.yields yield the core (ranks often outnumber cores: the peer waited for may need this one,
// and a yield costs far less than a futex sleep and wake-up). Returns false once both are spent:
// the wait should sleep.
bool idlePoll(int idle, const ExecutionContext& ctx);

}  // namespace tutti::kern
