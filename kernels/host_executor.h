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
#include "kernels/wait_slot.h"
#include "kernels/work.h"
#include "nccl.h"

namespace tutti::kern {

struct ExecutionContext {
  Bell* bell = nullptr;                        // this worker's bell
  const std::atomic<bool>* abortFlag = nullptr;
  double timeoutSeconds = 300;                 // with no progress at all
  int spin = 200;                              // busy polls before yielding
  int yields = 50;                             // polls that yield the CPU before sleeping
  int rank = 0;
  // Names a peer in errors, "rank 3 (host:pid)": peerNamer(peerNamerArg, peer). A plain function
  // pointer, so that making a context per operation costs nothing. Unset: "rank 3".
  std::string (*peerNamer)(const void* arg, int peer) = nullptr;
  const void* peerNamerArg = nullptr;
  std::string describePeer(int peer) const { return peerNamer ? peerNamer(peerNamerArg, peer) : "rank " + std::to_string(peer); }
  // Where the worker publishes what it waits for while a wait sleeps (and clears it when it moves
  // on or the operation ends), for readers on other threads. Unset: nothing is published.
  WaitSlot* waitSlot = nullptr;
  // Set where the worker moves network FIFOs itself while it waits: pollNetwork makes one
  // progress pass of the communicator's net proxy, true if a slot moved (NetProxy::tryProgress);
  // it runs on each busy poll of a wait, never once the wait sleeps. driveNetwork brackets the
  // stretch in which the worker does so: Start, then Stop (before a wait sleeps, or on an error:
  // the proxy thread takes the sockets at once) or Release (the operation is done and nothing is
  // left to send: NetProxy::releaseDriving).
  enum class Drive { Start, Stop, Release };
  bool (*pollNetwork)(void* arg) = nullptr;
  // Whether slots the executor published to network FIFOs are still to be sent (no system call:
  // NetProxy::sendsWaiting). An operation that ends with some makes one more pass for them;
  // unset, it makes none.
  bool (*networkSendsWaiting)(void* arg) = nullptr;
  void (*driveNetwork)(void* arg, Drive change) = nullptr;
  void* networkArg = nullptr;
  // Set where peers' calls can be looked up (ranks of this host): once a wait has stalled
  // kProbeAfterSeconds, and each second after, the waiting worker asks whether `peer`'s call with
  // the same collective number as `signature` differs; a non-empty answer is the mismatch, in
  // describeCallMismatch's words, and the operation fails with it at once instead of at the
  // timeout. Catches mismatches that leave the ranks waiting on different connections.
  std::string (*probeCall)(const void* arg, int peer, uint64_t signature, uint64_t count) = nullptr;
  const void* probeArg = nullptr;
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
