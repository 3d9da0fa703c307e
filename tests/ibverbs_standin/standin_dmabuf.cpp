// The stand-in's ibv_reg_dmabuf_mr: device memory registered by its dmabuf descriptor. The
// descriptor here is a memfd (the emulated device's memory with TUTTI_EMULATED_MEMORY=device): the
// region is reached through a mapping of the descriptor at the offset, never through the address
// the caller names (the iova), so that bytes land right only if descriptor and offset are right.
//
// Strict, as the kernel is: a descriptor that is not open (EBADF), not shared memory (EINVAL: the
// stand-in's dmabufs are memfds), a range beyond its end or of no bytes, an iova whose offset in
// its page differs from the dmabuf offset's, access flags a dmabuf region cannot have (memory
// windows, zero-based, on-demand paging) or remote write without local write (EINVAL).
// TUTTI_IBVERBS_STANDIN_DMABUF=0 refuses every call with EOPNOTSUPP, as a kernel or device without
// dmabuf support does. tutti_standin_dmabuf_counters() reports the registrations made and the
// RDMA reads placed (the GDR flush's).
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "standin_dmabuf.h"

namespace {

struct Mapping {
  void* base;
  size_t bytes;
};

struct DmabufState {
  std::mutex mutex;
  std::map<const ibv_mr*, Mapping> mappings;
  std::atomic<uint64_t> registrations{0};
  std::atomic<uint64_t> reads{0};
};

DmabufState& state() {
  static DmabufState s;
  return s;
}

constexpr int kAllowedAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;

ibv_mr* refuse(int error) {
  errno = error;
  return nullptr;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length,
                                                                 uint64_t iova, int fd, int access) {
  const char* enabled = std::getenv("TUTTI_IBVERBS_STANDIN_DMABUF");
  if (enabled && std::strcmp(enabled, "0") == 0) return refuse(EOPNOTSUPP);
  struct stat file {};
  if (fd < 0 || fstat(fd, &file) != 0) return refuse(EBADF);
  if (!pd || length == 0) return refuse(EINVAL);
  // Shared memory (memfd, shm_open) answers F_GET_SEALS; any other file does not.
  if (!S_ISREG(file.st_mode) || fcntl(fd, F_GET_SEALS) < 0) return refuse(EINVAL);
  if (offset > uint64_t(file.st_size) || length > uint64_t(file.st_size) - offset) return refuse(EINVAL);
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  if (iova % page != offset % page) return refuse(EINVAL);
  if ((access & ~kAllowedAccess) != 0) return refuse(EINVAL);
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return refuse(EINVAL);
  const uint64_t lead = offset % page;
  const size_t bytes = size_t(lead + length);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset - lead));
  if (base == MAP_FAILED) return refuse(errno);
  ibv_mr* mr = standin_register_region(pd, static_cast<char*>(base) + lead, length, iova, access);
  if (!mr) {
    int error = errno;
    munmap(base, bytes);
    return refuse(error);
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  state().mappings[mr] = Mapping{base, bytes};
  state().registrations++;
  return mr;
}

void standin_forget_dmabuf_mapping(const ibv_mr* mr) {
  Mapping gone{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto found = state().mappings.find(mr);
    if (found == state().mappings.end()) return;
    gone = found->second;
    state().mappings.erase(found);
  }
  munmap(gone.base, gone.bytes);
}

void standin_note_rdma_read() { state().reads++; }

// For tests: the dmabuf registrations this process made, those still registered, and the RDMA
// reads placed.
__attribute__((visibility("default"))) void tutti_standin_dmabuf_counters(uint64_t* registrations, uint64_t* live,
                                                                          uint64_t* reads) {
  if (registrations) *registrations = state().registrations.load();
  if (reads) *reads = state().reads.load();
  std::lock_guard<std::mutex> lock(state().mutex);
  if (live) *live = state().mappings.size();
}
}
