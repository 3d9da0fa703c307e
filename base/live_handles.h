// The handles of one kind that are alive (communicators, host streams), so that a destroyed
// handle passed back in is recognised rather than dereferenced.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace tutti {

template <typename T>
class LiveHandles {
 public:
  // The one set of T's handles in the process.
  static LiveHandles& instance() {
    static LiveHandles handles;
    return handles;
  }

  void insert(const T* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(handle);
  }
  void erase(const T* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(handle);
    generation_.fetch_add(1, std::memory_order_release);
  }
  bool contains(const T* handle) {
    // A thread's last positive answer stays valid until the next removal: every call checks its
    // handle, and ranks that are threads of one process would otherwise pass the lock (one cache
    // line) between cores on every call.
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (handle != nullptr && last_.handle == handle && last_.generation == generation) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    if (live_.count(handle) == 0) return false;
    last_ = {handle, generation_.load(std::memory_order_relaxed)};
    return true;
  }

 private:
  struct LastAnswer {
    const T* handle = nullptr;
    uint64_t generation = 0;
  };
  static inline thread_local LastAnswer last_;
  std::mutex mutex_;
  std::unordered_set<const T*> live_;
  std::atomic<uint64_t> generation_{0};  // bumped by every removal
};

}  // namespace tutti
