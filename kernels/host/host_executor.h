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
#include "kernels/execution_context.h"
#include "kernels/fifo.h"
#include "kernels/host_reduce.h"
#include "kernels/wait_slot.h"
#include "kernels/work.h"
#include "nccl.h"

namespace tutti::kern::host {

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

}  // namespace tutti::kern::host
