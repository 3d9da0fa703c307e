// Random 64-bit values for identities and names that must differ between processes and runs
// (process tokens, shared-memory names). Not for secrets: the bootstrap draws those itself.
#pragma once

#include <cstdint>

namespace tutti {

// A bijective mix of x (splitmix64's finaliser): spreads counters and clock readings over 64 bits.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A fresh random value from the kernel, never 0; if getrandom is unavailable, pid and time still
// make it differ between processes and runs.
uint64_t drawRandom();

}  // namespace tutti
