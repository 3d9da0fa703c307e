// The emulated CUDA driver's model of the machine (kernels/emulated/emulated_driver.h): its
// devices and what they can do, contexts and the calling thread's current one, every allocation
// it made or was shown (by address), and the detail of the last error on the calling thread.
// Process-wide, as a real driver's state is. Its memory is the host's; what it stands for is
// set by the environment, read at every question so that a test may change it between
// communicators:
//   TUTTI_EMULATED_MEMORY   host: the devices are integrated with the host (its pages are theirs);
//                           device: their memory counts as a GPU's
//   TUTTI_EMULATED_LACKS    capabilities the devices lack: vmm, posix-fd, dmabuf, gdr, pageable
//                           (reaching pageable host memory, which they do unless told, as the GPUs
//                           of systems with HMM or ATS do, so that tests may pass malloc'd buffers)
//   TUTTI_EMULATED_IPC      handle: as if posix-fd were lacking (CUDA's legacy IPC handles)
//   TUTTI_EMULATED_BUS_IDS, TUTTI_EMULATED_NO_PEER_ACCESS   the devices' PCI ids, pairs without
//                           peer access
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "kernels/word_copy.h"

namespace tutti::kern::emulated {

constexpr int kDevices = 8;                       // emulated devices 0..7
constexpr size_t kGranularity = size_t(2) << 20;  // virtual memory's, as a GPU's
constexpr int kMultiprocessors = 132;             // as an H100 SXM's
constexpr int kBlocksPerMultiprocessor = 4;       // of the executor's 512 threads

struct Capabilities {
  bool vmm = true, posixFd = true, dmabuf = true, gdr = true;
  bool pageable = true;  // reaches pageable host memory, as a GPU of a system with HMM or ATS does
};
// What the devices can do now (TUTTI_EMULATED_LACKS, TUTTI_EMULATED_IPC). Throws Error naming the
// variable when a value is unknown.
Capabilities capabilities();
// TUTTI_EMULATED_MEMORY=host: the devices' memory is the host's (CU_DEVICE_ATTRIBUTE_INTEGRATED,
// and pageable memory access).
bool integrated();
// Device `device`'s PCI bus id from TUTTI_EMULATED_BUS_IDS; "" where the list is shorter.
std::string busIdOf(int device);
// Whether the pair may have peer access (not listed in TUTTI_EMULATED_NO_PEER_ACCESS).
bool peerAccessPossible(int a, int b);
// Throws Error naming the variable when one of the above is malformed (checked when a context is
// made, so that a backend on the emulated driver fails at init, not at its first question).
void checkEnvironment();

// A device's primary context, the only kind the emulated driver makes.
struct Context {
  int device = 0;
  int refs = 0;
  std::mutex mutex;
  std::set<int> peers;  // devices whose memory it may reach (cuCtxEnablePeerAccess)
  // A kernel that would have faulted breaks the context, as on a GPU: later calls that wait on its
  // work return this error until the primary context is released by everyone.
  CUresult sticky = CUDA_SUCCESS;
  std::string stickyDetail;
  // Counts the resets (the last release of the primary context): what was loaded in an earlier
  // generation is gone, as a GPU's modules go with their context.
  uint64_t generation = 0;
  bool reaches(int owner) {
    std::lock_guard<std::mutex> lock(mutex);
    return owner == device || peers.count(owner) != 0;
  }
  void breakWith(CUresult code, const std::string& detail) {
    std::lock_guard<std::mutex> lock(mutex);
    if (sticky != CUDA_SUCCESS) return;
    sticky = code;
    stickyDetail = detail;
  }
  // CUDA_SUCCESS, or the sticky error (left for cuGetErrorString on this thread).
  CUresult health();
};
Context* primaryContext(int device);
Context* currentContext();
void setCurrentContext(Context* context);
inline CUcontext handleOf(Context* c) { return reinterpret_cast<CUcontext>(c); }
// The context behind a handle, or null when it is none of the driver's.
Context* contextOf(CUcontext handle);

// A physical allocation of virtual memory management (cuMemCreate, or imported from a
// descriptor): a memfd; its handle is its address.
struct Physical {
  int fd = -1;
  size_t bytes = 0;
  int device = 0;
  bool exportable = false;  // made with the POSIX descriptor handle type, or imported by one
  int refs = 1;             // the handle, and each mapping
  bool imported = false;    // another process's memory (not counted as this one's)
};

// One range of memory the driver knows.
struct Allocation {
  enum class Kind { Device, Host, Registered, Mapped, Imported };
  Kind kind = Kind::Device;
  size_t bytes = 0;
  int device = -1;               // the device whose memory it is; -1: the host's
  int fd = -1;                   // Device memory that counts as a GPU's: its memfd (IPC, dmabuf)
  Physical* physical = nullptr;  // Mapped: what is mapped here
};
// Adds [base, base + bytes); false when it overlaps a range already known.
bool addAllocation(void* base, const Allocation& allocation);
// The allocation that holds `p`, and its base; false when none does.
bool findAllocation(const void* p, uintptr_t* base, Allocation* allocation);
// Removes the allocation that starts at `base`, of one of the kinds in `kinds` (a bit per Kind).
bool takeAllocation(void* base, unsigned kinds, Allocation* allocation);
constexpr unsigned kindBit(Allocation::Kind kind) { return 1u << unsigned(kind); }
// The device whose memory holds `p`; -1 for host memory or memory the driver does not know.
int ownerOf(const void* p);
// Live allocations of device memory (cuMemAlloc, cuMemCreate): what a test counts.
size_t deviceAllocations();
// Bytes of device memory in use (cuMemAlloc's and cuMemCreate's), which cuMemGetInfo reports.
void countDeviceBytes(int64_t delta);
size_t deviceBytes();

// Returns `code`, after leaving `detail` for cuGetErrorString on this thread.
CUresult fail(CUresult code, const std::string& detail);
// The driver's words for `code`, with this thread's detail of it when the last failure was one.
const char* errorString(CUresult code);
const char* errorName(CUresult code);

// Copies as a copy engine does (kernels/word_copy.h).
inline void copyWords(void* dst, const void* src, size_t bytes) { copyWholeWords(dst, src, bytes); }

}  // namespace tutti::kern::emulated
