// ncclMemAlloc's memory and the p2p transport's exported FIFOs (cuda_memory.h).
#include "kernels/cuda/cuda_memory.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/error.h"
#include "base/log.h"

namespace tutti::kern::cuda {

namespace {

struct Mapping {
  const Driver* d;
  CUmemGenericAllocationHandle handle;  // 0: cuMemAlloc'd memory
  size_t bytes;
};

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<CUdeviceptr, Mapping>& mappings() {
  static std::map<CUdeviceptr, Mapping> m;
  return m;
}

void remember(const Driver& d, CUdeviceptr ptr, CUmemGenericAllocationHandle handle, size_t size) {
  std::lock_guard<std::mutex> lock(mutex());
  mappings()[ptr] = Mapping{&d, handle, size};
}

// Maps `handle` (of `size`, a multiple of the granularity) at a fresh address range, readable and
// writable by `device`; releases the handle on failure.
CUdeviceptr mapHandle(const Driver& d, CUmemGenericAllocationHandle handle, size_t size, size_t granularity,
                      CUdevice device, const std::string& what) {
  CUdeviceptr ptr = 0;
  CUresult r = d.cuMemAddressReserve(&ptr, size, granularity, 0, 0);
  bool mapped = false;
  if (r == CUDA_SUCCESS) mapped = (r = d.cuMemMap(ptr, size, 0, handle, 0)) == CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = d.cuMemSetAccess(ptr, size, &access, 1);
  }
  if (r != CUDA_SUCCESS) {
    if (mapped) d.cuMemUnmap(ptr, size);
    if (ptr) d.cuMemAddressFree(ptr, size);
    d.cuMemRelease(handle);
    check(d, r, "mapping the allocation (cuMemAddressReserve/cuMemMap/cuMemSetAccess)", what);
  }
  remember(d, ptr, handle, size);
  return ptr;
}

CUmemAllocationProp allocationProp(CUdevice device, bool exportable, bool gdr) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.allocFlags.gpuDirectRDMACapable = gdr ? 1 : 0;
  return prop;
}

size_t granularityOf(const Driver& d, const CUmemAllocationProp& prop, const std::string& what) {
  size_t granularity = 0;
  check(d, d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity", what);
  return granularity;
}

bool attribute(const Driver& d, CUdevice device, CUdevice_attribute which) {
  int value = 0;
  return d.cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS && value != 0;
}

// Says once per process and reason why ncclMemAlloc's memory is not what peers map best.
void sayOnce(std::atomic<bool>& said, const char* what) {
  if (!said.exchange(true)) TUTTI_INFO(log::Init, "ncclMemAlloc: %s", what);
}

}  // namespace

void* allocateShareable(const Driver& d, size_t bytes) {
  const std::string what = "ncclMemAlloc(" + std::to_string(bytes) + " bytes)";
  CUcontext ctx = nullptr;
  d.cuCtxGetCurrent(&ctx);
  if (ctx == nullptr) {
    CUdevice dev0 = 0;
    check(d, d.cuDeviceGet(&dev0, 0), "cuDeviceGet", what);
    // Kept for the process, as the CUDA runtime keeps the primary context it makes current.
    check(d, d.cuDevicePrimaryCtxRetain(&ctx, dev0), "cuDevicePrimaryCtxRetain", what);
  }
  ContextScope scope(d, ctx);
  CUdevice device = 0;
  check(d, d.cuCtxGetDevice(&device), "cuCtxGetDevice", what);
  // Virtual memory with a POSIX descriptor, as NCCL allocates it, where the device has both; else
  // cuMemAlloc's memory, which peers in other processes still map by its legacy IPC handle.
  static std::atomic<bool> said{false};
  const bool vmm = attribute(d, device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
  if (!vmm || !attribute(d, device, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)) {
    sayOnce(said, vmm ? "the device cannot export virtual memory as a POSIX descriptor: memory from cuMemAlloc, which "
                        "peers in other "
                        "processes map by its legacy IPC handle"
                      : "the device has no virtual memory management: memory from cuMemAlloc, which peers in other "
                        "processes map by "
                        "its legacy IPC handle");
    CUdeviceptr p = 0;
    check(d, d.cuMemAlloc(&p, bytes), "cuMemAlloc", what);
    remember(d, p, 0, bytes);
    return reinterpret_cast<void*>(p);
  }
  const CUmemAllocationProp prop =
      allocationProp(device, true, attribute(d, device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED));
  const size_t granularity = granularityOf(d, prop, what);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(d, d.cuMemCreate(&handle, size, &prop, 0), "cuMemCreate", what);
  return reinterpret_cast<void*>(mapHandle(d, handle, size, granularity, device, what));
}

void* allocateExportable(const Driver& d, int device, size_t bytes, const std::string& what, int* fd) {
  const CUmemAllocationProp prop =
      allocationProp(device, true, attribute(d, device, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED));
  const size_t granularity = granularityOf(d, prop, what);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(d, d.cuMemCreate(&handle, size, &prop, 0), "cuMemCreate", what);
  if (fd != nullptr) {
    int exported = -1;
    if (CUresult r = d.cuMemExportToShareableHandle(&exported, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        r != CUDA_SUCCESS) {
      d.cuMemRelease(handle);
      check(d, r, "cuMemExportToShareableHandle (POSIX file descriptor)", what);
    }
    *fd = exported;
  }
  return reinterpret_cast<void*>(mapHandle(d, handle, size, granularity, device, what));
}

void* importExported(const Driver& d, int device, int fd, size_t bytes, const std::string& what) {
  const CUmemAllocationProp prop = allocationProp(device, true, false);
  const size_t granularity = granularityOf(d, prop, what);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(d,
        d.cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle", what);
  return reinterpret_cast<void*>(mapHandle(d, handle, size, granularity, device, what));
}

bool freeShareable(void* p) {
  Mapping m{};
  {
    std::lock_guard<std::mutex> lock(mutex());
    auto it = mappings().find(reinterpret_cast<CUdeviceptr>(p));
    if (it == mappings().end()) return false;
    m = it->second;
    mappings().erase(it);
  }
  const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
  if (m.handle == 0) {
    m.d->cuMemFree(ptr);
    return true;
  }
  m.d->cuMemUnmap(ptr, m.bytes);
  m.d->cuMemAddressFree(ptr, m.bytes);
  m.d->cuMemRelease(m.handle);
  return true;
}

}  // namespace tutti::kern::cuda
