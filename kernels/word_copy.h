// A copy as a copy engine makes it into memory that another thread polls at the same time (an LL
// line, whose flag shares each 8-byte word with its data): whole aligned 8-byte words, each in one
// access, where both ends and the size allow it, else bytes. Host code only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tutti::kern {

inline void copyWholeWords(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes) % sizeof(uint64_t) != 0) {
    std::memmove(dst, src, bytes);
    return;
  }
  auto* to = static_cast<uint64_t*>(dst);
  const auto* from = static_cast<const uint64_t*>(src);
  for (size_t i = 0; i < bytes / sizeof(uint64_t); i++)
    __atomic_store_n(&to[i], __atomic_load_n(&from[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

}  // namespace tutti::kern
