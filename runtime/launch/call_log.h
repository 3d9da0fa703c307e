// The collectives a rank has started, in its control block where the peers of its host read them:
// a mismatch that makes two ranks take different algorithms or paths (AllReduce against
// Broadcast, a mailbox all-reduce against one through the FIFOs) leaves them waiting on different
// connections, where no message ever carries a signature to compare. A wait that stalls looks up
// the awaited peer's call of the same number here instead (runtime/launch/comm_wait_hooks.cpp,
// CommWaitHooks::probeCall).
#pragma once

#include <atomic>
#include <cstdint>

namespace tutti {

class CallLog {
 public:
  static constexpr uint32_t kEntries = 16;  // the calls a peer may be ahead and still be compared

  // Called by the rank's launching thread for each collective, in order. `seq`: the signature's
  // collective number (kernels/work.h, signatureSeq).
  void record(uint32_t seq, uint64_t signature, uint64_t count) {
    Entry& e = entries_[seq % kEntries];
    e.stamp.store(0, std::memory_order_relaxed);  // a reader that overlaps this write sees a changed stamp
    std::atomic_thread_fence(std::memory_order_release);
    e.signature.store(signature, std::memory_order_relaxed);
    e.count.store(count, std::memory_order_relaxed);
    e.stamp.store(uint64_t(seq) + 1, std::memory_order_release);
  }

  // The call numbered `seq`, if it is still in the log; false while the rank has not reached it
  // (or has moved kEntries calls past it).
  bool find(uint32_t seq, uint64_t* signature, uint64_t* count) const {
    const Entry& e = entries_[seq % kEntries];
    const uint64_t stamp = e.stamp.load(std::memory_order_acquire);
    if (stamp != uint64_t(seq) + 1) return false;
    *signature = e.signature.load(std::memory_order_relaxed);
    *count = e.count.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return e.stamp.load(std::memory_order_relaxed) == stamp;
  }

 private:
  struct Entry {
    std::atomic<uint64_t> stamp{0};  // seq + 1 once written; 0 while being written
    std::atomic<uint64_t> signature{0};
    std::atomic<uint64_t> count{0};
  };
  Entry entries_[kEntries];
};

}  // namespace tutti
