// ncclMemAlloc's shareable memory for the emulated device (emulated_memory.h). The table of
// allocations is process-wide, as the CUDA driver's is: ncclMemAlloc has no communicator.
#include "kernels/device/emulated_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "base/error.h"

namespace tutti::kern::emulated {

namespace {

struct Allocation {
  size_t bytes = 0;
  int fd = -1;       // the memfd, or the named object's descriptor
  std::string name;  // the named object's (unlinked when freed), or ""
};

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, Allocation>& allocations() {
  static std::map<uintptr_t, Allocation> m;
  return m;
}

}  // namespace

void* allocateShareable(size_t bytes, bool named) {
  const std::string what = "ncclMemAlloc(" + std::to_string(bytes) + " bytes) on the emulated device";
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t size = (bytes + page - 1) / page * page;
  Allocation a;
  a.bytes = size;
  if (named) {
    static std::atomic<uint64_t> serial{0};
    a.name = "/tutti-emulated-mem-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
    a.fd = shm_open(a.name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } else {
    a.fd = memfd_create("tutti-emulated-user", MFD_CLOEXEC);
  }
  if (a.fd < 0) throwSystemError(what + ": making shareable memory", errno);
  void* p = MAP_FAILED;
  int err = 0;
  if (ftruncate(a.fd, off_t(size)) != 0) err = errno;
  if (err == 0 && (p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, 0)) == MAP_FAILED) err = errno;
  if (err != 0) {
    close(a.fd);
    if (!a.name.empty()) shm_unlink(a.name.c_str());
    throwSystemError(what + ": sizing and mapping shareable memory", err);
  }
  std::lock_guard<std::mutex> lock(mutex());
  allocations()[reinterpret_cast<uintptr_t>(p)] = std::move(a);
  return p;
}

bool freeShareable(void* p) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mutex());
    auto found = allocations().find(reinterpret_cast<uintptr_t>(p));
    if (found == allocations().end()) return false;
    a = std::move(found->second);
    allocations().erase(found);
  }
  munmap(p, a.bytes);
  close(a.fd);
  if (!a.name.empty()) shm_unlink(a.name.c_str());
  return true;
}

UserBufferExport exportShareable(const void* p, size_t bytes, const std::string& what) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex());
  auto after = allocations().upper_bound(at);
  if (after != allocations().begin()) {
    auto found = std::prev(after);
    const Allocation& a = found->second;
    if (at - found->first < a.bytes && bytes <= a.bytes - (at - found->first)) {
      UserBufferExport out;
      out.allocationBytes = a.bytes;
      out.offset = at - found->first;
      if (a.name.empty()) {
        out.handle.fd = fcntl(a.fd, F_DUPFD_CLOEXEC, 0);
        if (out.handle.fd < 0) throwSystemError(what + ": duplicating the buffer's memfd", errno);
      } else {
        std::memcpy(out.handle.bytes, a.name.data(), std::min(a.name.size(), ExportHandle::kBytes - 1));
      }
      return out;
    }
  }
  throw Error(ErrorCode::InvalidUsage, what + ": " + std::to_string(bytes) + " bytes at " + std::to_string(at) +
                                           " are not memory from ncclMemAlloc, which alone other processes can map");
}

}  // namespace tutti::kern::emulated
