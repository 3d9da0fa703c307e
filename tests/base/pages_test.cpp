// Tests of the setup-time page touches: contents kept or zeroed as documented, odd sizes.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include "base/pages.h"

namespace {

// An anonymous mapping of `bytes` (not always whole pages), filled with a pattern that differs
// from byte to byte.
struct Filled {
  explicit Filled(size_t bytes) : bytes(bytes) {
    base =
        static_cast<unsigned char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    for (size_t i = 0; i < bytes; i++) base[i] = static_cast<unsigned char>(i * 7 + 3);
  }
  ~Filled() { munmap(base, bytes); }
  size_t bytes;
  unsigned char* base;
};

}  // namespace

TEST_CASE("pages: touching every page keeps every byte", "[pages]") {
  for (size_t bytes : {size_t(4096), size_t(3 * 4096 + 100), size_t(1 << 20), size_t(5)}) {
    INFO(bytes << " bytes");
    Filled m(bytes);
    tutti::touchPages(m.base, bytes);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; i++) wrong += m.base[i] != static_cast<unsigned char>(i * 7 + 3);
    CHECK(wrong == 0);
  }
}

TEST_CASE("pages: preparing memory for the kernel zeroes all of it and nothing beyond", "[pages]") {
  for (size_t bytes : {size_t(4096), size_t(2 * 4096 + 17), size_t(4 << 20)}) {
    INFO(bytes << " bytes");
    Filled m(bytes + 64);
    tutti::zeroPagesForKernel(m.base, bytes, "test FIFO");
    size_t nonzero = 0;
    for (size_t i = 0; i < bytes; i++) nonzero += m.base[i] != 0;
    CHECK(nonzero == 0);
    size_t changed = 0;
    for (size_t i = bytes; i < bytes + 64; i++) changed += m.base[i] != static_cast<unsigned char>(i * 7 + 3);
    CHECK(changed == 0);
  }
}
