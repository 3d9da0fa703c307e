// Random values from the kernel, with a fallback that still differs between processes.
#include "base/random.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>

namespace tutti {

uint64_t drawRandom() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    value = splitmix64(static_cast<uint64_t>(now) ^ (static_cast<uint64_t>(getpid()) << 32));
  }
  return value == 0 ? 1 : value;
}

}  // namespace tutti
