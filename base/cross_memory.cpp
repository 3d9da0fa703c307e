// Cross-memory reads and writes between processes of a host (base/cross_memory.h).
#include "base/cross_memory.h"

#include <sys/prctl.h>
#include <sys/uio.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tutti::cma {

namespace {

using CrossMemoryCall = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long, unsigned long);

// Moves `bytes` between this process's `local` and `remote` in `pid` by `call` (process_vm_readv
// or process_vm_writev, whose arguments are alike); 0, or the errno.
int transfer(CrossMemoryCall call, pid_t pid, char* local, char* remote, size_t bytes) {
  while (bytes > 0) {
    // One call moves at most about 2 GiB (MAX_RW_COUNT); a short count means part is unmapped.
    const iovec l{local, bytes}, r{remote, bytes};
    const ssize_t n = call(pid, &l, 1, &r, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    local += n;
    remote += n;
    bytes -= size_t(n);
  }
  return 0;
}

}  // namespace

int read(pid_t pid, const void* remote, void* local, size_t bytes) {
  return transfer(process_vm_readv, pid, static_cast<char*>(local), const_cast<char*>(static_cast<const char*>(remote)),
                  bytes);
}

int write(pid_t pid, void* remote, const void* local, size_t bytes) {
  return transfer(process_vm_writev, pid, const_cast<char*>(static_cast<const char*>(local)),
                  static_cast<char*>(remote), bytes);
}

std::string errnoName(int error) {
  const char* name = error == ESRCH    ? "ESRCH"
                     : error == EFAULT ? "EFAULT"
                     : error == EPERM  ? "EPERM"
                     : error == ENOMEM ? "ENOMEM"
                     : error == ENOSYS ? "ENOSYS"
                                       : nullptr;
  const std::string what = std::strerror(error);
  return name != nullptr ? std::string(name) + " (" + what + ")" : "errno " + std::to_string(error) + " (" + what + ")";
}

int ptraceScope() {
  FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f == nullptr) return -1;
  int scope = -1;
  if (std::fscanf(f, "%d", &scope) != 1) scope = -1;
  std::fclose(f);
  return scope;
}

namespace {
// The process's named ptracer mirrors kernel state that is per process by nature (prctl), so it
// lives per process here too: 0 while none is named.
std::atomic<pid_t> namedReader{0};
}  // namespace

bool nameReader(pid_t reader, std::string* whyNot) {
  pid_t expected = 0;
  if (!namedReader.compare_exchange_strong(expected, reader) && expected != reader) {
    *whyNot = "Yama ptrace_scope 1 lets a process name one reader, and this one named pid " + std::to_string(expected) +
              " already";
    return false;
  }
  if (expected == reader) return true;
  if (prctl(PR_SET_PTRACER, static_cast<unsigned long>(reader), 0, 0, 0) != 0) {
    *whyNot = std::string("prctl(PR_SET_PTRACER) failed: ") + errnoName(errno);
    namedReader.store(0);
    return false;
  }
  return true;
}

}  // namespace tutti::cma
