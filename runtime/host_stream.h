// Host streams: ordered queues of work run by one thread each, standing in for CUDA streams on
// the host device backend. Handed to users as cudaStream_t values (tutti/tutti.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "nccl.h"

namespace tutti {

class HostStream {
 public:
  HostStream();
  ~HostStream();  // finishes queued work first
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  // Runs job after everything queued before it. A job that throws tutti::Error records it; the
  // stream keeps running later jobs.
  void enqueue(std::function<void()> job);
  // Waits until the queue is empty (jobs are bounded by their own timeouts), then throws the
  // first recorded error, if any, and clears it.
  void synchronize();
  bool idle();

  cudaStream_t handle() { return reinterpret_cast<cudaStream_t>(this); }
  // The live host stream behind a handle, or nullptr if the handle is not one.
  static HostStream* fromHandle(cudaStream_t stream);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tutti
