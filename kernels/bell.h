// A doorbell: one 32-bit word that a host executor worker sleeps on and that every peer which
// moves one of the worker's FIFOs rings. It lives in a rank's control block, which may be
// shared memory mapped by other processes, so the futex is not process-private.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>

namespace tutti::kern {

struct alignas(64) Bell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline void ringBell(Bell* bell) {
  // seq_cst on both sides: either the ringer sees the sleeper, or the sleeper sees the new seq.
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while the bell's seq is `seen`, at most `timeoutNs`, for a caller already counted in
// sleepers (spurious wake-ups are allowed: callers re-check their condition).
inline void sleepOnBell(Bell* bell, uint32_t seen, long timeoutNs) {
  timespec ts{timeoutNs / 1000000000L, timeoutNs % 1000000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

// Sleeps until the bell's seq differs from `seen` or `timeoutNs` passes (spurious wake-ups are
// allowed: callers re-check their condition).
inline void waitBell(Bell* bell, uint32_t seen, long timeoutNs) {
  bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (bell->seq.load(std::memory_order_seq_cst) == seen) sleepOnBell(bell, seen, timeoutNs);
  bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace tutti::kern
