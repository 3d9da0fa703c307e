// The host executor: runs the workers of a launch (kernels/work.h) on host threads, each lane
// through the lane engine (kernels/lane_engine.h) with host copies and the host reduction loops,
// moving bytes through FIFOs with the Simple protocol. A wait spins briefly, yields, then sleeps
// on the worker's bell with a bounded timeout. See lane_engine.h for how steps are sized and
// joined runs moved; the lane's chunk must be cut so that its widest joined run fits one slot
// (plan::joinedChunkBytes).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/lane.h"
#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "kernels/host_reduce.h"
#include "kernels/wait_hooks.h"
#include "kernels/wait_slot.h"
#include "kernels/work.h"
#include "nccl.h"

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

// Checks that every index a plan's steps use is in range (connections, chunks, blocks, scratch
// chunks) and that each step names the buffers it needs, so the executor can trust them.
// Throws tutti::Error (InvalidUsage) naming the algorithm, lane and step.
void checkPlanBounds(const plan::RankPlan& plan, int rank, int nranks);

// Runs worker `worker` of the launch (kernels/work.h) to completion on this thread: its queues
// side by side, each lane through the lane engine. ops: the launch's operations. Throws
// tutti::Error on a timeout (naming the peer waited for), an abort, or a size mismatch between
// the ranks' calls (describeFault's words).
void runWorker(LaunchWork& work, const OpWork* ops, uint32_t worker, const ExecutionContext& context);

// Persistent worker threads of one communicator: worker i > 0 runs on its own thread; worker 0
// is run by whoever launches (the caller, or a host stream's thread).
class HostWorkerPool {
 public:
  explicit HostWorkerPool(int threads);
  ~HostWorkerPool();
  HostWorkerPool(const HostWorkerPool&) = delete;
  HostWorkerPool& operator=(const HostWorkerPool&) = delete;

  int size() const { return int(threads_.size()); }
  // Starts job on thread i (0-based, i < size()); does not wait.
  void start(int i, std::function<void()> job);
  // Waits until every started job has finished; rethrows the first failure.
  void wait();

 private:
  struct Slot {
    std::function<void()> job;
    bool busy = false;
    std::exception_ptr error;
  };
  void loop(int i);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace tutti::kern
