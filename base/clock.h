// Steady-clock deadlines: every bounded wait in tutti is written against these.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace tutti {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

// The longest a wait sleeps before it looks at its abort flag again.
inline constexpr std::chrono::milliseconds kPollSlice{100};

// `seconds` after `time` (fractions kept).
inline SteadyTime later(SteadyTime time, double seconds) {
  return time + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// A deadline `seconds` from now; negative values mean now, and anything beyond a year a year, which is
// "forever" without overflowing time_point arithmetic.
inline SteadyTime deadlineAfter(double seconds) {
  constexpr double kForeverSeconds = 365.0 * 24 * 3600;
  return later(SteadyClock::now(), std::clamp(seconds, 0.0, kForeverSeconds));
}

// Whole milliseconds left until `deadline`, clamped to [0, UINT32_MAX] (as wire formats carry them).
inline uint32_t millisecondsUntil(SteadyTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(left, 0, UINT32_MAX));
}

// Seconds from `since` to now.
inline double secondsSince(SteadyTime since) {
  return std::chrono::duration<double>(SteadyClock::now() - since).count();
}

}  // namespace tutti
