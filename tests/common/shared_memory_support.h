// State that a test process and the rank processes it forks all see (MAP_SHARED memory), and a
// clock that every process of the host reads alike.
#pragma once

#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <stdexcept>

namespace tutti_test {

// A T in memory shared with the children forked after it is made (T: atomics and plain data).
template <typename T>
class SharedWithChildren {
 public:
  SharedWithChildren() {
    void* memory = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap of shared test state failed");
    value_ = new (memory) T();
  }
  ~SharedWithChildren() {
    value_->~T();
    munmap(value_, sizeof(T));
  }
  SharedWithChildren(const SharedWithChildren&) = delete;
  SharedWithChildren& operator=(const SharedWithChildren&) = delete;
  T* operator->() { return value_; }

 private:
  T* value_;
};

// steady_clock is CLOCK_MONOTONIC: one clock for every process of the host.
inline int64_t monotonicNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace tutti_test
