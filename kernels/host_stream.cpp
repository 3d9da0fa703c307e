// Host streams and the registry that recognises their handles.
#include "kernels/host_stream.h"

#include <sched.h>

#include "base/live_handles.h"

namespace tutti::kern {
namespace {
// Busy polls, then polls that yield the core (ranks often outnumber cores: the thread we wait
// for may need this one), as the executor's waits do.
constexpr int kSpinPolls = 200;
constexpr int kYieldPolls = 50;
}  // namespace

template <typename Pred>
bool HostStream::pollFor(Pred pred) {
  for (int i = 0; i < kSpinPolls + kYieldPolls; i++) {
    if (pred()) return true;
    if (i < kSpinPolls) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
  return pred();
}

HostStream::HostStream() : ring_(kCapacity), thread_([this] { loop(); }) {
  LiveHandles<HostStream>::instance().insert(this);
}

HostStream::~HostStream() {
  LiveHandles<HostStream>::instance().erase(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

HostStream* HostStream::fromHandle(cudaStream_t stream) {
  auto* candidate = reinterpret_cast<HostStream*>(stream);
  return LiveHandles<HostStream>::instance().contains(candidate) ? candidate : nullptr;
}

void HostStream::enqueue(std::function<void()> job) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (count_ == kCapacity) {
      // Wait until half has drained: one wake-up per kCapacity / 2 jobs, not one per job.
      spaceWaiters_++;
      space_.wait(lock, [this] { return count_ <= kCapacity / 2; });
      spaceWaiters_--;
    }
    ring_[(head_ + count_) % kCapacity] = std::move(job);
    count_++;
    outstanding_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load(std::memory_order_acquire)) wake_.notify_all();
}

void HostStream::synchronize() {
  pollFor([this] { return idle(); });
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] { return outstanding_.load(std::memory_order_acquire) == 0; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (count_ == 0 && !stopping_) {
      lock.unlock();
      pollFor([this] { return outstanding_.load(std::memory_order_acquire) != 0; });
      lock.lock();
    }
    // sleeping_ is set under the lock before the predicate is checked, and enqueue publishes
    // under the same lock, so a job queued now either is seen here or wakes the wait.
    sleeping_.store(true, std::memory_order_release);
    wake_.wait(lock, [this] { return stopping_ || count_ != 0; });
    sleeping_.store(false, std::memory_order_release);
    if (count_ == 0) return;  // stopping, and everything queued has run
    std::function<void()> job = std::move(ring_[head_]);
    ring_[head_] = nullptr;
    head_ = (head_ + 1) % kCapacity;
    count_--;
    const bool roomNow = spaceWaiters_ > 0 && count_ == kCapacity / 2;
    lock.unlock();
    if (roomNow) space_.notify_all();
    try {
      job();
    } catch (...) {
      std::lock_guard<std::mutex> relock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    job = nullptr;
    lock.lock();
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) drained_.notify_all();
  }
}

}  // namespace tutti::kern
