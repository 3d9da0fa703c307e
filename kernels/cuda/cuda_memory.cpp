// ncclMemAlloc's CUDA virtual memory (cuda_memory.h).
#include "kernels/cuda/cuda_memory.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/error.h"
#include "kernels/cuda/cuda_driver.h"

namespace tutti::kern::cuda {

namespace {

struct Mapping {
  CUmemGenericAllocationHandle handle;
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

// Maps `handle` (of `size`, a multiple of the granularity) at a fresh address range, readable and
// writable by `device`; releases the handle on failure.
CUdeviceptr mapHandle(const Driver& d, CUmemGenericAllocationHandle handle, size_t size, size_t granularity, CUdevice device,
                      const std::string& what) {
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
  std::lock_guard<std::mutex> lock(mutex());
  mappings()[ptr] = Mapping{handle, size};
  return ptr;
}

CUmemAllocationProp shareableProp(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

size_t granularityOf(const Driver& d, const CUmemAllocationProp& prop, const std::string& what) {
  size_t granularity = 0;
  check(d, d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity",
        what);
  return granularity;
}

}  // namespace

void* allocateShareable(size_t bytes) {
  std::string why;
  const Driver* d = driver(&why);
  const std::string what = "ncclMemAlloc(" + std::to_string(bytes) + " bytes)";
  if (d == nullptr) throw Error(ErrorCode::System, what + ": " + why);
  CUcontext ctx = nullptr;
  d->cuCtxGetCurrent(&ctx);
  if (ctx == nullptr) {
    CUdevice dev0 = 0;
    check(*d, d->cuDeviceGet(&dev0, 0), "cuDeviceGet", what);
    check(*d, d->cuDevicePrimaryCtxRetain(&ctx, dev0), "cuDevicePrimaryCtxRetain", what);
    check(*d, d->cuCtxSetCurrent(ctx), "cuCtxSetCurrent", what);
  }
  CUdevice device = 0;
  check(*d, d->cuCtxGetDevice(&device), "cuCtxGetDevice", what);
  return allocateExportable(device, bytes, what, nullptr);
}

void* allocateExportable(int device, size_t bytes, const std::string& what, int* fd) {
  const Driver* d = driver();
  const CUmemAllocationProp prop = shareableProp(device);
  const size_t granularity = granularityOf(*d, prop, what);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(*d, d->cuMemCreate(&handle, size, &prop, 0), "cuMemCreate", what);
  if (fd != nullptr) {
    int exported = -1;
    if (CUresult r = d->cuMemExportToShareableHandle(&exported, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0); r != CUDA_SUCCESS) {
      d->cuMemRelease(handle);
      check(*d, r, "cuMemExportToShareableHandle (POSIX file descriptor)", what);
    }
    *fd = exported;
  }
  return reinterpret_cast<void*>(mapHandle(*d, handle, size, granularity, device, what));
}

void* importExported(int device, int fd, size_t bytes, const std::string& what) {
  const Driver* d = driver();
  const CUmemAllocationProp prop = shareableProp(device);
  const size_t granularity = granularityOf(*d, prop, what);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle = 0;
  check(*d,
        d->cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle", what);
  return reinterpret_cast<void*>(mapHandle(*d, handle, size, granularity, device, what));
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
  const Driver* d = driver();
  const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
  d->cuMemUnmap(ptr, m.bytes);
  d->cuMemAddressFree(ptr, m.bytes);
  d->cuMemRelease(m.handle);
  return true;
}

}  // namespace tutti::kern::cuda
