// Host streams: ordered queues of work run by one thread each, standing in for CUDA streams on
// the host device backend. Handed to users as cudaStream_t values (tutti/tutti.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace tutti::kern {

class HostStream {
 public:
  // At most this many jobs wait on a stream; enqueue blocks while it is full, as a CUDA launch
  // blocks when the device's launch queue is. The queue never grows (no allocation per job),
  // and a communicator keeps enough finished launches to refill it (runtime/launch/launch.cpp).
  static constexpr size_t kCapacity = 64;

  HostStream();
  ~HostStream();  // finishes queued work first
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  // Runs job after everything queued before it. A job that throws tutti::Error records it; the
  // stream keeps running later jobs. Waits while kCapacity jobs are queued (each job is bounded
  // by its own timeouts, so the wait is too).
  void enqueue(std::function<void()> job);
  // Waits until the queue is empty (jobs are bounded by their own timeouts), then throws the
  // first recorded error, if any, and clears it.
  void synchronize();
  bool idle() const { return outstanding_.load(std::memory_order_acquire) == 0; }
  // Jobs waiting, not counting the one running.
  size_t queued() {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }

  cudaStream_t handle() { return reinterpret_cast<cudaStream_t>(this); }
  // The live host stream behind a handle, or nullptr if the handle is not one.
  static HostStream* fromHandle(cudaStream_t stream);

 private:
  void loop();
  // Polls until pred() holds or the polls run out (then the caller sleeps): a job that follows
  // closely, or a stream that drains soon, then costs no futex sleep and wake-up.
  template <typename Pred>
  static bool pollFor(Pred pred);

  std::mutex mutex_;
  std::condition_variable wake_, drained_, space_;
  std::vector<std::function<void()>> ring_;  // kCapacity slots
  size_t head_ = 0, count_ = 0;              // under mutex_
  int spaceWaiters_ = 0;                     // under mutex_: enqueue calls waiting for room
  std::atomic<size_t> outstanding_{0};       // queued plus running
  std::atomic<bool> sleeping_{false};        // the stream's thread waits on wake_
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tutti::kern
