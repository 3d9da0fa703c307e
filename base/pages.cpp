// First touches at setup (see pages.h).
#include "base/pages.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "base/error.h"

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

void zeroPagesForKernel(void* base, size_t bytes, const char* what) {
  // read() from /dev/zero: the kernel clears the buffer through this process's mapping.
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throwSystemError(std::string(what) + ": open /dev/zero to prepare " + std::to_string(bytes) + " bytes", errno);
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = read(fd, static_cast<char*>(base) + done, bytes - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int err = got < 0 ? errno : EIO;
      close(fd);
      throwSystemError(std::string(what) + ": read /dev/zero into " + std::to_string(bytes) + " bytes", err);
    }
    done += static_cast<size_t>(got);
  }
  close(fd);
  touchPages(base, bytes);
}

}  // namespace tutti
