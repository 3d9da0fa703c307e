// The emulated CUDA driver's memory (emulated_entries.h): device memory, pinned and registered host
// memory, virtual memory management, exports to other processes (POSIX descriptors, legacy IPC
// handles, dmabufs), copies and sets. All of it is host memory. Device memory that counts as a
// GPU's (TUTTI_EMULATED_MEMORY=device) is a memfd mapped shared, so that another process can map it
// from a descriptor, a dmabuf can hand it to the verbs stand-in, and a legacy IPC handle can name it
// (the exporting process's descriptor, opened through /proc). Stricter than a GPU where that finds
// mistakes: host memory to register must be whole pages.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emulated/emulated_entries.h"
#include "kernels/emulated/emulated_gpu.h"

namespace tutti::kern::emulated {

namespace {

using Kind = Allocation::Kind;
constexpr size_t kPage = 4096;
constexpr uint32_t kIpcMagic = 0x74757469;  // "tuti"

// What a legacy IPC handle carries: the exporter's descriptor of the allocation, to open through
// /proc, and its size.
struct IpcHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t bytes;
};
static_assert(sizeof(IpcHandle) <= sizeof(CUipcMemHandle::reserved));

size_t pages(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

int deviceOfCurrent() {
  Context* c = currentContext();
  return c == nullptr ? -1 : c->device;
}

// `bytes` of shared memory backed by a fresh memfd: the mapping, and the memfd in *fd.
void* mapFresh(size_t bytes, int* fd) {
  const int made = memfd_create("tutti-emulated-gpu", MFD_CLOEXEC);
  if (made < 0) return nullptr;
  if (ftruncate(made, off_t(bytes)) != 0) {
    close(made);
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, made, 0);
  if (p == MAP_FAILED) {
    close(made);
    return nullptr;
  }
  *fd = made;
  return p;
}

CUresult memAlloc(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const int device = deviceOfCurrent();
  if (device < 0) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuMemAlloc without a current context");
  Allocation a;
  a.kind = Kind::Device;
  a.device = device;
  a.bytes = pages(bytes);
  void* p = nullptr;
  if (integrated()) {
    if (posix_memalign(&p, kPage, a.bytes) != 0)
      return fail(CUDA_ERROR_OUT_OF_MEMORY, std::to_string(bytes) + " bytes");
    std::memset(p, 0, a.bytes);
  } else if ((p = mapFresh(a.bytes, &a.fd)) == nullptr) {
    return fail(CUDA_ERROR_OUT_OF_MEMORY, std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  addAllocation(p, a);
  countDeviceBytes(int64_t(a.bytes));
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

void releasePages(void* p, const Allocation& a) {
  if (a.fd >= 0) {
    munmap(p, a.bytes);
    close(a.fd);
  } else {
    std::free(p);
  }
}

CUresult memFree(CUdeviceptr dptr) {
  Allocation a;
  if (dptr == 0) return CUDA_SUCCESS;
  if (!takeAllocation(reinterpret_cast<void*>(dptr), kindBit(Kind::Device), &a))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFree of an address that is not the start of cuMemAlloc's memory");
  releasePages(reinterpret_cast<void*>(dptr), a);
  countDeviceBytes(-int64_t(a.bytes));
  return CUDA_SUCCESS;
}

CUresult memHostAlloc(void** pp, size_t bytes, unsigned int) {
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  if (posix_memalign(&p, kPage, pages(bytes)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0, pages(bytes));
  Allocation a;
  a.kind = Kind::Host;
  a.bytes = pages(bytes);
  addAllocation(p, a);
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult memFreeHost(void* p) {
  if (!takeAllocation(p, kindBit(Kind::Host), nullptr))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost of memory not from cuMemHostAlloc");
  std::free(p);
  return CUDA_SUCCESS;
}

CUresult memHostGetDevicePointer(CUdeviceptr* dptr, void* p, unsigned int) {
  Allocation a;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!findAllocation(p, nullptr, &a) || (a.kind != Kind::Host && a.kind != Kind::Registered))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostGetDevicePointer of host memory neither pinned nor registered");
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing
  return CUDA_SUCCESS;
}

CUresult memHostRegister(void* p, size_t bytes, unsigned int) {
  if (p == nullptr || bytes == 0 || reinterpret_cast<uintptr_t>(p) % kPage != 0)
    return fail(CUDA_ERROR_INVALID_VALUE,
                "host memory to register must be whole pages (tutti registers its FIFOs so), not " +
                    std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(p)));
  Allocation a;
  a.kind = Kind::Registered;
  a.bytes = bytes;
  if (!addAllocation(p, a))
    return fail(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "registered twice, or overlapping memory the driver knows");
  return CUDA_SUCCESS;
}

CUresult memHostUnregister(void* p) {
  return takeAllocation(p, kindBit(Kind::Registered), nullptr) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult memcpyAny(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  copyWords(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult memcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  copyWords(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult memcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  copyWords(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult memcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return onStream(stream, [=] { copyWords(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes); });
}
// From pageable memory the source is taken at the call, as the driver stages it.
CUresult memcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (runsInline(stream)) return onStream(stream, [=] { copyWords(reinterpret_cast<void*>(dst), src, bytes); });
  auto staged =
      std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
  return onStream(stream, [=] { copyWords(reinterpret_cast<void*>(dst), staged->data(), bytes); });
}
// Into pageable memory the call returns once the copy is done, as the driver's does.
CUresult memcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Allocation a;
  const bool pinned = findAllocation(dst, nullptr, &a) && (a.kind == Kind::Host || a.kind == Kind::Registered);
  auto copied = std::make_shared<std::atomic<bool>>(false);
  const CUresult r = onStream(stream, [=] {
    copyWords(dst, reinterpret_cast<const void*>(src), bytes);
    copied->store(true, std::memory_order_release);
  });
  if (r != CUDA_SUCCESS || pinned) return r;
  while (!copied->load(std::memory_order_acquire)) std::this_thread::yield();
  return r;
}
CUresult memsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  std::memset(reinterpret_cast<void*>(dst), value, n);
  return CUDA_SUCCESS;
}
CUresult memsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  return onStream(stream, [=] { std::memset(reinterpret_cast<void*>(dst), value, n); });
}

CUresult memGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total = size_t(80) << 30;
  *free = *total - std::min(*total, deviceBytes());
  return CUDA_SUCCESS;
}

CUresult pointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  Allocation a;
  const bool known = findAllocation(reinterpret_cast<const void*>(ptr), nullptr, &a);
  if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
    unsigned int type = 0;
    if (known)
      type = a.device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    else
      return fail(CUDA_ERROR_INVALID_VALUE, "pageable host memory, which the driver does not know");
    *static_cast<unsigned int*>(data) = type;
    return CUDA_SUCCESS;
  }
  if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
    if (!known || a.device < 0) return CUDA_ERROR_INVALID_VALUE;
    *static_cast<int*>(data) = a.device;
    return CUDA_SUCCESS;
  }
  return fail(CUDA_ERROR_NOT_SUPPORTED, "pointer attribute " + std::to_string(int(attribute)));
}

CUresult memGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  Allocation a;
  uintptr_t at = 0;
  if (!findAllocation(reinterpret_cast<const void*>(ptr), &at, &a) || a.device < 0)
    return fail(CUDA_ERROR_NOT_FOUND, "no device allocation holds the address");
  if (base) *base = CUdeviceptr(at);
  if (size) *size = a.bytes;
  return CUDA_SUCCESS;
}

// Virtual memory management.

CUresult memGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                     CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!capabilities().vmm)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "the device lacks virtual memory management (TUTTI_EMULATED_LACKS)");
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult memCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                   unsigned long long) {
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  const Capabilities caps = capabilities();
  if (!caps.vmm)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "the device lacks virtual memory management (TUTTI_EMULATED_LACKS)");
  const bool exportable = (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0;
  if (exportable && !caps.posixFd)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "the device cannot export POSIX descriptors (TUTTI_EMULATED_LACKS)");
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 || prop->location.id >= kDevices)
    return fail(CUDA_ERROR_INVALID_DEVICE, "cuMemCreate's location is not an emulated device");
  const int fd = memfd_create("tutti-emulated-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(size)) != 0) {
    if (fd >= 0) close(fd);
    return fail(CUDA_ERROR_OUT_OF_MEMORY, std::to_string(size) + " bytes: " + std::strerror(errno));
  }
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(new Physical{fd, size, prop->location.id, exportable, 1});
  countDeviceBytes(int64_t(size));
  return CUDA_SUCCESS;
}

std::mutex& physicalMutex() {
  static std::mutex m;
  return m;
}

void dropPhysical(Physical* p) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(physicalMutex());
    last = --p->refs == 0;
  }
  if (!last) return;
  close(p->fd);
  countDeviceBytes(p->imported ? 0 : -int64_t(p->bytes));
  delete p;
}

CUresult memRelease(CUmemGenericAllocationHandle handle) {
  if (handle == 0) return CUDA_ERROR_INVALID_VALUE;
  dropPhysical(reinterpret_cast<Physical*>(handle));
  return CUDA_SUCCESS;
}

CUresult memAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr, unsigned long long) {
  if (ptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t align = alignment == 0 ? kGranularity : alignment;
  void* p = mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return fail(CUDA_ERROR_OUT_OF_MEMORY, "reserving " + std::to_string(size) + " bytes of addresses");
  const uintptr_t start = (uintptr_t(p) + align - 1) / align * align;
  if (start > uintptr_t(p)) munmap(p, start - uintptr_t(p));
  const uintptr_t end = uintptr_t(p) + size + align;
  if (end > start + size) munmap(reinterpret_cast<void*>(start + size), end - (start + size));
  *ptr = CUdeviceptr(start);
  return CUDA_SUCCESS;
}

CUresult memAddressFree(CUdeviceptr ptr, size_t size) {
  return munmap(reinterpret_cast<void*>(ptr), size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult memMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long) {
  auto* physical = reinterpret_cast<Physical*>(handle);
  if (physical == nullptr || offset + size > physical->bytes) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, physical->fd,
                 off_t(offset));
  if (p == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, std::string("mapping: ") + std::strerror(errno));
  Allocation a;
  a.kind = Kind::Mapped;
  a.bytes = size;
  a.device = physical->device;
  a.physical = physical;
  if (!addAllocation(p, a)) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemMap over a range already mapped");
  std::lock_guard<std::mutex> lock(physicalMutex());
  physical->refs++;
  return CUDA_SUCCESS;
}

CUresult memUnmap(CUdeviceptr ptr, size_t size) {
  Allocation a;
  if (!takeAllocation(reinterpret_cast<void*>(ptr), kindBit(Kind::Mapped), &a))
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemUnmap of a range not mapped");
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  dropPhysical(a.physical);
  return CUDA_SUCCESS;
}

CUresult memSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc* desc, size_t count) {
  return desc == nullptr || count == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult memRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  Allocation a;
  if (handle == nullptr || !findAllocation(addr, nullptr, &a) || a.kind != Kind::Mapped)
    return fail(CUDA_ERROR_INVALID_VALUE, "not memory mapped by virtual memory management");
  std::lock_guard<std::mutex> lock(physicalMutex());
  a.physical->refs++;
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(a.physical);
  return CUDA_SUCCESS;
}

CUresult memExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                    CUmemAllocationHandleType type, unsigned long long) {
  auto* physical = reinterpret_cast<Physical*>(handle);
  if (shareable == nullptr || physical == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !capabilities().posixFd)
    return fail(CUDA_ERROR_NOT_SUPPORTED,
                "the device exports no such handle (TUTTI_EMULATED_LACKS, TUTTI_EMULATED_IPC)");
  if (!physical->exportable)
    return fail(CUDA_ERROR_INVALID_VALUE, "the allocation was made without the POSIX descriptor handle type");
  const int fd = dup(physical->fd);
  if (fd < 0) return fail(CUDA_ERROR_OUT_OF_MEMORY, std::string("dup: ") + std::strerror(errno));
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult memImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                      CUmemAllocationHandleType type) {
  if (handle == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
  const int fd = dup(int(reinterpret_cast<uintptr_t>(osHandle)));
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return fail(CUDA_ERROR_INVALID_VALUE, "the descriptor is not an allocation's");
  }
  const int device = deviceOfCurrent();
  auto* physical = new Physical{fd, size_t(st.st_size), device < 0 ? 0 : device, true, 1};
  physical->imported = true;  // the exporter's memory
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(physical);
  return CUDA_SUCCESS;
}

// Legacy IPC and dmabufs.

CUresult ipcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  Allocation a;
  uintptr_t base = 0;
  if (handle == nullptr || !findAllocation(reinterpret_cast<const void*>(dptr), &base, &a) || a.kind != Kind::Device ||
      base != dptr)
    return fail(CUDA_ERROR_INVALID_VALUE, "not the start of cuMemAlloc's memory");
  if (a.fd < 0)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "memory of an integrated device (TUTTI_EMULATED_MEMORY=host) is not shared");
  IpcHandle h{kIpcMagic, int32_t(getpid()), a.fd, 0, a.bytes};
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

CUresult ipcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle handle, unsigned int) {
  IpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (dptr == nullptr || h.magic != kIpcMagic)
    return fail(CUDA_ERROR_INVALID_VALUE, "not an IPC handle of the emulated driver");
  if (h.pid == getpid()) return fail(CUDA_ERROR_INVALID_CONTEXT, "a process cannot open its own IPC handle");
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "opening the exporter's memory (" + path + "): " + std::strerror(errno));
  void* p = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return fail(CUDA_ERROR_OUT_OF_MEMORY, std::string("mapping the exporter's memory: ") + std::strerror(errno));
  Allocation a;
  a.kind = Kind::Imported;
  a.bytes = h.bytes;
  a.device = deviceOfCurrent();
  addAllocation(p, a);
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult ipcCloseMemHandle(CUdeviceptr dptr) {
  Allocation a;
  if (!takeAllocation(reinterpret_cast<void*>(dptr), kindBit(Kind::Imported), &a))
    return fail(CUDA_ERROR_INVALID_VALUE, "not memory opened by cuIpcOpenMemHandle");
  munmap(reinterpret_cast<void*>(dptr), a.bytes);
  return CUDA_SUCCESS;
}

CUresult memGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,
                                     unsigned long long) {
  Allocation a;
  uintptr_t base = 0;
  if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
  if (!capabilities().dmabuf) return fail(CUDA_ERROR_NOT_SUPPORTED, "the device lacks dmabuf (TUTTI_EMULATED_LACKS)");
  if (!findAllocation(reinterpret_cast<const void*>(dptr), &base, &a) || base != dptr || size > pages(a.bytes))
    return fail(CUDA_ERROR_INVALID_VALUE, "the range is not a whole device allocation");
  const int fd = a.kind == Kind::Mapped ? a.physical->fd : a.fd;
  if (fd < 0)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "memory of an integrated device (TUTTI_EMULATED_MEMORY=host) has no dmabuf");
  const int dup_ = dup(fd);
  if (dup_ < 0) return fail(CUDA_ERROR_OUT_OF_MEMORY, std::string("dup: ") + std::strerror(errno));
  *static_cast<int*>(handle) = dup_;
  return CUDA_SUCCESS;
}

const Entry kEntries[] = {
    TUTTI_EMULATED_ENTRY(cuMemAlloc, memAlloc),
    TUTTI_EMULATED_ENTRY(cuMemFree, memFree),
    TUTTI_EMULATED_ENTRY(cuMemHostAlloc, memHostAlloc),
    TUTTI_EMULATED_ENTRY(cuMemFreeHost, memFreeHost),
    TUTTI_EMULATED_ENTRY(cuMemHostGetDevicePointer, memHostGetDevicePointer),
    TUTTI_EMULATED_ENTRY(cuMemHostRegister, memHostRegister),
    TUTTI_EMULATED_ENTRY(cuMemHostUnregister, memHostUnregister),
    TUTTI_EMULATED_ENTRY(cuMemcpy, memcpyAny),
    TUTTI_EMULATED_ENTRY(cuMemcpyAsync, memcpyAsync),
    TUTTI_EMULATED_ENTRY(cuMemcpyHtoD, memcpyHtoD),
    TUTTI_EMULATED_ENTRY(cuMemcpyHtoDAsync, memcpyHtoDAsync),
    TUTTI_EMULATED_ENTRY(cuMemcpyDtoH, memcpyDtoH),
    TUTTI_EMULATED_ENTRY(cuMemcpyDtoHAsync, memcpyDtoHAsync),
    TUTTI_EMULATED_ENTRY(cuMemsetD8, memsetD8),
    TUTTI_EMULATED_ENTRY(cuMemsetD8Async, memsetD8Async),
    TUTTI_EMULATED_ENTRY(cuMemGetInfo, memGetInfo),
    TUTTI_EMULATED_ENTRY(cuPointerGetAttribute, pointerGetAttribute),
    TUTTI_EMULATED_ENTRY(cuMemGetAddressRange, memGetAddressRange),
    TUTTI_EMULATED_ENTRY(cuMemGetAllocationGranularity, memGetAllocationGranularity),
    TUTTI_EMULATED_ENTRY(cuMemCreate, memCreate),
    TUTTI_EMULATED_ENTRY(cuMemRelease, memRelease),
    TUTTI_EMULATED_ENTRY(cuMemAddressReserve, memAddressReserve),
    TUTTI_EMULATED_ENTRY(cuMemAddressFree, memAddressFree),
    TUTTI_EMULATED_ENTRY(cuMemMap, memMap),
    TUTTI_EMULATED_ENTRY(cuMemUnmap, memUnmap),
    TUTTI_EMULATED_ENTRY(cuMemSetAccess, memSetAccess),
    TUTTI_EMULATED_ENTRY(cuMemRetainAllocationHandle, memRetainAllocationHandle),
    TUTTI_EMULATED_ENTRY(cuMemExportToShareableHandle, memExportToShareableHandle),
    TUTTI_EMULATED_ENTRY(cuMemImportFromShareableHandle, memImportFromShareableHandle),
    TUTTI_EMULATED_ENTRY(cuIpcGetMemHandle, ipcGetMemHandle),
    TUTTI_EMULATED_ENTRY(cuIpcOpenMemHandle, ipcOpenMemHandle),
    TUTTI_EMULATED_ENTRY(cuIpcCloseMemHandle, ipcCloseMemHandle),
    TUTTI_EMULATED_ENTRY(cuMemGetHandleForAddressRange, memGetHandleForAddressRange),
};

}  // namespace

std::span<const Entry> memoryEntries() { return kEntries; }

}  // namespace tutti::kern::emulated
