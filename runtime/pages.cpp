// First touches at setup (see pages.h).
#include "runtime/pages.h"

#include <unistd.h>

#include <cstdint>

namespace tutti {

namespace {

size_t pageBytes() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

}  // namespace

void touchPages(void* base, size_t bytes) {
  const size_t step = pageBytes();
  for (size_t offset = 0; offset + sizeof(uint64_t) <= bytes; offset += step)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(static_cast<char*>(base) + offset), uint64_t{0}, __ATOMIC_RELAXED);
}

}  // namespace tutti
