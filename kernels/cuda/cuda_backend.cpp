// The cuda executor backend (kernels/backend.h, cuda_backend.h): device memory for FIFOs and
// scratch, the user's CUDA streams, and the device executor's kernel (executor_kernel.cu) loaded
// from the fat binary built into the library, all through a driver loaded at run time
// (cuda_driver.h): NVIDIA's, or the emulated driver of this library, which runs the same lines.
//
// A communicator's backend holds the CUDA context that was current when it was made (as NCCL takes
// the current device at ncclCommInitRank), and restores the caller's own on every return. One small
// block of host memory mapped for the device holds what the host and its kernels share: the abort
// word the host sets and the fault record a kernel that gives up writes. Every launch carries its
// own communicator's block, also in a group of several communicators. What the device can do
// (virtual memory, descriptor export, dmabuf, GPUDirect RDMA) is asked of the driver at init, and
// the fallbacks are taken there, with an INFO line. Submitting launches: cuda_submit.cpp.
#include "kernels/cuda/cuda_executor_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/host_stream.h"
#include "topology/graph.h"

extern "C" const unsigned char tuttiExecutorFatbin[];
extern "C" const size_t tuttiExecutorFatbinBytes;

namespace tutti::kern::cuda {

namespace {

// The executor's kernel in a context: its module is loaded once per context and process, and
// unloaded when the last backend of that context goes, so that a context handle the driver hands
// out again later (after a release) never finds a stale function.
struct LoadedModule {
  const Driver* d;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int users = 0;
};
std::mutex& modulesMutex() {
  static std::mutex m;
  return m;
}
std::map<std::pair<const Driver*, CUcontext>, LoadedModule>& modules() {
  static std::map<std::pair<const Driver*, CUcontext>, LoadedModule> m;
  return m;
}

CUfunction acquireExecutor(const Driver& d, CUcontext ctx, const std::string& where) {
  std::lock_guard<std::mutex> lock(modulesMutex());
  LoadedModule& m = modules()[{&d, ctx}];
  if (m.users == 0) {
    if (tuttiExecutorFatbinBytes == 0 && !d.emulated)
      throw Error(ErrorCode::InvalidUsage, where + ": this library was built without the CUDA executor's kernels");
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    CUresult r = d.cuModuleLoadData(&module, tuttiExecutorFatbin);
    if (r == CUDA_SUCCESS && (r = d.cuModuleGetFunction(&fn, module, "tuttiRunLaunches")) != CUDA_SUCCESS)
      d.cuModuleUnload(module);
    if (r != CUDA_SUCCESS) {
      modules().erase({&d, ctx});
      check(d, r, "loading the executor's kernels (cuModuleLoadData, cuModuleGetFunction)", where);
    }
    m = LoadedModule{&d, module, fn, 0};
  }
  m.users++;
  return m.function;
}

void releaseExecutor(const Driver& d, CUcontext ctx) {
  std::lock_guard<std::mutex> lock(modulesMutex());
  auto found = modules().find({&d, ctx});
  if (found == modules().end() || --found->second.users > 0) return;
  d.cuModuleUnload(found->second.module);
  modules().erase(found);
}

int attribute(const Driver& d, CUdevice device, CUdevice_attribute which) {
  int value = 0;
  return d.cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value : 0;
}

}  // namespace

CudaBackend::CudaBackend(const Driver& driver, const BackendOptions& options, const std::string& operation)
    : d_(&driver), options_(options) {
  const std::string where = operation + " (CUDA device " + std::to_string(options.device) + ")";
  CUcontext caller = nullptr;
  d_->cuCtxGetCurrent(&caller);
  check(*d_, d_->cuDeviceGet(&device_, options.device), "cuDeviceGet", where);
  char busId[32] = {};
  check(*d_, d_->cuDeviceGetPCIBusId(busId, int(sizeof busId), device_), "cuDeviceGetPCIBusId", where);
  busId_ = topo::normalizeBusId(busId);
  // The caller's context where it is this device's, as NCCL takes it; else the device's primary.
  CUcontext current = caller;
  if (current != nullptr) {
    CUdevice currentDevice = -1;
    d_->cuCtxGetDevice(&currentDevice);
    if (currentDevice != device_) current = nullptr;
  }
  if (current == nullptr) {
    check(*d_, d_->cuDevicePrimaryCtxRetain(&current, device_), "cuDevicePrimaryCtxRetain", where);
    retainedPrimary_ = true;
  }
  ctx_ = current;
  ContextScope scope(*d_, ctx_);
  try {
    probeCapabilities(where);
    function_ = acquireExecutor(*d_, ctx_, where);
    // A group's blocks wait on each other, so all of them must be resident at once.
    int perMultiprocessor = 0;
    check(*d_, d_->cuOccupancyMaxActiveBlocksPerMultiprocessor(&perMultiprocessor, function_, dev::kExecutorThreads, 0),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor", where);
    residentBlocks_ =
        uint32_t(std::max(perMultiprocessor, 0) * attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    void* host = nullptr;
    check(*d_, d_->cuMemHostAlloc(&host, sizeof(ControlWords), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
          "cuMemHostAlloc (abort word and fault record)", where);
    control_ = static_cast<ControlWords*>(host);
    std::memset(control_, 0, sizeof *control_);
    check(*d_, d_->cuMemHostGetDevicePointer(&controlDevice_, host, 0), "cuMemHostGetDevicePointer", where);
    check(*d_, d_->cuStreamCreate(&copies_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (the backend's copies)", where);
  } catch (...) {
    releaseContext();
    throw;
  }
  pool_ = std::make_unique<DevicePool>(*d_, ctx_);
  tracker_ = std::make_unique<LaunchTracker>(*d_, ctx_);
  tracker_->setDrainSeconds(options_.timeoutSeconds + 5);
}

void CudaBackend::probeCapabilities(const std::string& where) {
  caps_.vmm = attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
  caps_.posixFd =
      caps_.vmm && attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0;
  caps_.dmabuf = d_->cuMemGetHandleForAddressRange != nullptr &&
                 attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0;
  caps_.gdr = attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) != 0;
  pageableAccess_ = attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) != 0;
  // A device integrated with the host that reaches pageable memory: its memory is the host's.
  integrated_ = pageableAccess_ && attribute(*d_, device_, CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
  TUTTI_INFO(log::Init,
             "%s: %s, bus id %s: virtual memory %s, POSIX descriptors %s, dmabuf %s, GPUDirect RDMA %s%s; p2p memory "
             "is exported %s",
             where.c_str(), d_->emulated ? "emulated CUDA driver" : "CUDA driver",
             busId_.empty() ? "(none)" : busId_.c_str(), caps_.vmm ? "yes" : "no", caps_.posixFd ? "yes" : "no",
             caps_.dmabuf ? "yes" : "no", caps_.gdr ? "yes" : "no",
             integrated_       ? ", integrated with host memory"
             : pageableAccess_ ? ", reaches pageable host memory"
                               : "",
             caps_.posixFd ? "by POSIX descriptor" : "by legacy IPC handle (the device cannot export descriptors)");
}

void CudaBackend::releaseContext() {
  for (CUdevice peer : peersRetained_) d_->cuDevicePrimaryCtxRelease(peer);
  peersRetained_.clear();
  if (retainedPrimary_) d_->cuDevicePrimaryCtxRelease(device_);
  retainedPrimary_ = false;
}

CudaBackend::~CudaBackend() {
  // Kernels still queued or running read the FIFOs, the arenas and the control words freed below:
  // the tracker waits for every launch first (ncclCommDestroy finishes what was issued; after
  // ncclCommAbort the abort word ends them within a poll). Their waits are bounded by TUTTI_TIMEOUT
  // on the device clock; should one still run past that (queued behind a user's kernel that never
  // ends), its memory is left allocated rather than freed under it.
  const bool ended = tracker_->drain(options_.timeoutSeconds + 5);
  tracker_.reset();
  ContextScope scope(*d_, ctx_);
  if (!ended) {
    TUTTI_WARN(
        "cuda backend: launches of this communicator did not end within %.0f s of its destruction; their device memory "
        "is left allocated",
        options_.timeoutSeconds + 5);
    (void)pool_.release();
    return;
  }
  pool_.reset();
  for (CUdeviceptr p : freed_) {
    if (ipcOpened_.count(p) != 0)
      d_->cuIpcCloseMemHandle(p);
    else if (!cuda::freeShareable(reinterpret_cast<void*>(p)))
      d_->cuMemFree(p);
  }
  if (copies_) d_->cuStreamDestroy(copies_);
  if (control_) d_->cuMemFreeHost(control_);
  if (function_) releaseExecutor(*d_, ctx_);
  releaseContext();
}

// Copies and clears run on the backend's own non-blocking stream, never on the legacy default
// stream: that one waits for every blocking stream's work, and the kernels of ranks sharing the
// GPU may be waiting for this very thread.
void* CudaBackend::allocate(size_t bytes, const std::string& what) {
  ContextScope scope(*d_, ctx_);
  CUdeviceptr p = 0;
  bytes = std::max<size_t>(bytes, 1);
  check(*d_, d_->cuMemAlloc(&p, bytes), "cuMemAlloc", what);
  check(*d_, d_->cuMemsetD8Async(p, 0, bytes, copies_), "cuMemsetD8Async", what);
  check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", what);
  return reinterpret_cast<void*>(p);
}

// Freed with the backend: cuMemFree waits for the whole device, where other ranks' kernels may
// wait for this thread's next launch.
void CudaBackend::release(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(freedMutex_);
  freed_.push_back(reinterpret_cast<CUdeviceptr>(p));
}

void CudaBackend::copyIn(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope(*d_, ctx_);
  check(*d_, d_->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, copies_), "cuMemcpyHtoDAsync",
        "copying to the device");
  check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", "copying to the device");
}

void CudaBackend::copyOut(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope(*d_, ctx_);
  check(*d_, d_->cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, copies_), "cuMemcpyDtoHAsync",
        "copying from the device");
  check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", "copying from the device");
}

uint64_t CudaBackend::loadWord(const uint64_t* word) {
  if (integrated_) return __atomic_load_n(word, __ATOMIC_ACQUIRE);
  uint64_t value = 0;
  copyOut(&value, word, sizeof value);
  return value;
}

void CudaBackend::storeWord(uint64_t* word, uint64_t value) {
  if (integrated_) return __atomic_store_n(word, value, __ATOMIC_RELEASE);
  copyIn(word, &value, sizeof value);
}

// Device to device, the peer's memory mapped here (unified addressing): the copy engine.
void CudaBackend::copyAcross(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope(*d_, ctx_);
  const char* what = "copying to a peer's FIFO (NCCL_P2P_USE_CUDA_MEMCPY)";
  check(*d_, d_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, copies_),
        "cuMemcpyAsync", what);
  check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", what);
}

// CUDA IPC through virtual memory: a physical allocation whose POSIX file descriptor the p2p
// transport passes to the peer process (SCM_RIGHTS), which maps it for its own device. Where the
// device cannot export descriptors (found at init), cuMemAlloc'd memory and its legacy IPC handle,
// which travels as bytes. Freed or unmapped with the backend, as other device memory is.
void* CudaBackend::allocateExportable(size_t bytes, const std::string& what, ExportHandle* handle) {
  ContextScope scope(*d_, ctx_);
  if (!caps_.posixFd) {
    void* p = allocate(bytes, what);
    CUipcMemHandle ipc{};
    if (CUresult r = d_->cuIpcGetMemHandle(&ipc, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS) {
      release(p);
      check(*d_, r, "cuIpcGetMemHandle", what);
    }
    static_assert(sizeof ipc.reserved == ExportHandle::kBytes);
    std::memcpy(handle->bytes, ipc.reserved, sizeof ipc.reserved);
    return p;
  }
  void* p = cuda::allocateExportable(*d_, device_, bytes, what, &handle->fd);
  check(*d_, d_->cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, copies_), "cuMemsetD8Async", what);
  check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", what);
  return p;
}

void* CudaBackend::importExported(const ExportHandle& handle, size_t bytes, const std::string& what) {
  ContextScope scope(*d_, ctx_);
  if (handle.fd >= 0) return cuda::importExported(*d_, device_, handle.fd, bytes, what);
  CUipcMemHandle ipc{};
  std::memcpy(ipc.reserved, handle.bytes, sizeof ipc.reserved);
  CUdeviceptr p = 0;
  check(*d_, d_->cuIpcOpenMemHandle(&p, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle", what);
  std::lock_guard<std::mutex> lock(freedMutex_);
  ipcOpened_.insert(p);
  return reinterpret_cast<void*>(p);
}

// GPUDirect RDMA through dmabuf (no peer-memory module): the allocation around `p`, whole host
// pages of it, as a dmabuf descriptor, and `p`'s offset in it, as NCCL asks the driver for it.
DmaBufRange CudaBackend::exportDmaBuf(void* p, size_t bytes, const std::string& what) {
  if (!exportsDmaBuf()) return DeviceMemory::exportDmaBuf(p, bytes, what);
  ContextScope scope(*d_, ctx_);
  CUdeviceptr base = 0;
  size_t size = 0;
  check(*d_, d_->cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(p)), "cuMemGetAddressRange", what);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size = (size + page - 1) / page * page;
  int fd = -1;
  check(*d_, d_->cuMemGetHandleForAddressRange(&fd, base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
        "cuMemGetHandleForAddressRange", what);
  return DmaBufRange{fd, uint64_t(reinterpret_cast<CUdeviceptr>(p) - base)};
}

// A registered user buffer for a peer process (zero-copy, runtime/comm/peer_buffers.h): the allocation
// around it, as NCCL's registration finds it. Virtual memory (ncclMemAlloc) by the POSIX
// descriptor of its physical allocation, which the peer maps as the p2p FIFOs are mapped; memory
// from cuMemAlloc/cudaMalloc by its legacy IPC handle. Either way the peer maps the whole
// allocation, and the buffer lies at `offset` in it.
UserBufferExport CudaBackend::exportUserBuffer(const void* p, size_t bytes, const std::string& what) {
  ContextScope scope(*d_, ctx_);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = d_->cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
    throw Error(ErrorCode::InvalidUsage,
                what + ": " + std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                    " are not memory from ncclMemAlloc or cudaMalloc, which alone other processes can map (" +
                    describe(*d_, r, "cuMemGetAddressRange") + ")");
  UserBufferExport out;
  out.allocationBytes = size;
  out.offset = reinterpret_cast<CUdeviceptr>(p) - base;
  if (out.offset + bytes > size)
    throw Error(ErrorCode::InvalidUsage,
                what + ": the buffer runs past the end of its allocation (" + std::to_string(size) + " bytes)");
  CUmemGenericAllocationHandle handle = 0;
  if (caps_.vmm && d_->cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base)) == CUDA_SUCCESS) {
    int fd = -1;
    const CUresult r = caps_.posixFd
                           ? d_->cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
                           : CUDA_ERROR_NOT_SUPPORTED;
    d_->cuMemRelease(handle);  // the retained reference; the mapping keeps the allocation
    if (r != CUDA_SUCCESS)
      throw Error(
          ErrorCode::InvalidUsage,
          what + ": " + describe(*d_, r, "cuMemExportToShareableHandle") +
              " (virtual memory made without a POSIX descriptor handle type, or a device that cannot export one)");
    out.handle.fd = fd;
    return out;
  }
  CUipcMemHandle ipc{};
  if (CUresult r = d_->cuIpcGetMemHandle(&ipc, base); r != CUDA_SUCCESS)
    throw Error(ErrorCode::InvalidUsage,
                what + ": " + describe(*d_, r, "cuIpcGetMemHandle") + " (not memory from cudaMalloc or ncclMemAlloc?)");
  static_assert(sizeof ipc.reserved == ExportHandle::kBytes);
  std::memcpy(out.handle.bytes, ipc.reserved, sizeof ipc.reserved);
  return out;
}

// Only rank threads of this process on other devices need this context to reach their memory:
// asked for a pair that includes this backend's device, a yes enables peer access to the other
// (once; the peer's primary context is retained while this backend lives). No process maps every
// GPU's memory just in case.
bool CudaBackend::canAccessPeer(int device, int peer) const {
  if (device == peer) return true;
  CUdevice a = 0, b = 0;
  int can = 0;
  if (d_->cuDeviceGet(&a, device) != CUDA_SUCCESS || d_->cuDeviceGet(&b, peer) != CUDA_SUCCESS) return false;
  if (d_->cuDeviceCanAccessPeer(&can, a, b) != CUDA_SUCCESS || can == 0) return false;
  if (a == device_) const_cast<CudaBackend*>(this)->enablePeerAccess(b);
  return true;
}

void CudaBackend::enablePeerAccess(CUdevice peer) {
  std::lock_guard<std::mutex> lock(peersMutex_);
  if (std::find(peersRetained_.begin(), peersRetained_.end(), peer) != peersRetained_.end()) return;
  ContextScope scope(*d_, ctx_);
  CUcontext peerCtx = nullptr;
  if (CUresult r = d_->cuDevicePrimaryCtxRetain(&peerCtx, peer); r != CUDA_SUCCESS) {
    TUTTI_WARN("cuda backend: CUDA device %d cannot retain device %d's context: %s", int(device_), int(peer),
               describe(*d_, r, "cuDevicePrimaryCtxRetain").c_str());
    return;
  }
  peersRetained_.push_back(peer);  // its mappings last while its primary context does
  const CUresult r = d_->cuCtxEnablePeerAccess(peerCtx, 0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    TUTTI_WARN("cuda backend: CUDA device %d cannot map device %d's memory: %s", int(device_), int(peer),
               describe(*d_, r, "cuCtxEnablePeerAccess").c_str());
}

// Pinned and mapped into the device's address space (portable: every context of the process), so
// the kernel reads and writes it over the bus with the system-scope loads and stores of
// kernels/device/shim.h. With unified addressing the device uses the host's address; where a
// device gives another, that is the one returned.
void* CudaBackend::mapHostMemory(void* host, size_t bytes, const std::string& what) {
  ContextScope scope(*d_, ctx_);
  check(*d_, d_->cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
        "cuMemHostRegister", what);
  CUdeviceptr device = 0;
  if (CUresult r = d_->cuMemHostGetDevicePointer(&device, host, 0); r != CUDA_SUCCESS) {
    d_->cuMemHostUnregister(host);
    check(*d_, r, "cuMemHostGetDevicePointer", what);
  }
  return reinterpret_cast<void*>(device);
}

// After the last launch that may touch it; a launch still running past TUTTI_TIMEOUT (queued
// behind a user's kernel that never ends) keeps the registration, as the destructor keeps memory.
void CudaBackend::unmapHostMemory(void* host) {
  if (!tracker_->drain(options_.timeoutSeconds + 5)) {
    TUTTI_WARN("cuda backend: launches did not end within %.0f s; host memory at %p stays registered",
               options_.timeoutSeconds + 5, host);
    return;
  }
  ContextScope scope(*d_, ctx_);
  d_->cuMemHostUnregister(host);
}

std::string CudaBackend::streamProblem(cudaStream_t stream) const {
  if (stream != nullptr && HostStream::fromHandle(stream) != nullptr && !d_->emulated)
    return "the stream is a host stream from tuttiStreamCreate; the cuda device backend runs on CUDA streams";
  return "";
}

std::string CudaBackend::captureProblem(cudaStream_t stream) const {
  ContextScope scope(*d_, ctx_);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d_->cuStreamIsCapturing(reinterpret_cast<CUstream>(stream), &status) != CUDA_SUCCESS ||
      status == CU_STREAM_CAPTURE_STATUS_NONE)
    return "";
  return "the stream is being captured into a CUDA graph, and the cuda backend does not run collectives inside a graph "
         "capture yet (its kernels' FIFO sequence numbers are set at enqueue, so a replay would not line up with the "
         "peers): "
         "enqueue collectives outside the capture";
}

std::string CudaBackend::bufferProblem(const void* buffer, size_t bytes) const {
  ContextScope scope(*d_, ctx_);
  unsigned int type = 0;
  const CUresult r =
      d_->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(buffer));
  if (r != CUDA_SUCCESS && !pageableAccess_)
    return "is not memory the GPU can reach (pageable host memory?): the cuda device backend needs device memory "
           "(cudaMalloc, ncclMemAlloc) or host memory registered with CUDA";
  CUdeviceptr base = 0;
  size_t size = 0;
  if (d_->cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(buffer)) == CUDA_SUCCESS &&
      reinterpret_cast<CUdeviceptr>(buffer) + bytes > base + size)
    return "ends " + std::to_string(reinterpret_cast<CUdeviceptr>(buffer) + bytes - (base + size)) +
           " bytes past the end of its allocation (" + std::to_string(size) + " bytes)";
  return "";
}

void CudaBackend::synchronize(cudaStream_t stream) {
  ContextScope scope(*d_, ctx_);
  check(*d_, d_->cuStreamSynchronize(reinterpret_cast<CUstream>(stream)), "cuStreamSynchronize",
        "synchronising a stream");
}

void CudaBackend::enqueueCopy(cudaStream_t stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ContextScope scope(*d_, ctx_);
  check(*d_,
        d_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                          reinterpret_cast<CUstream>(stream)),
        "cuMemcpyAsync", "a one-sided put");
}

namespace {
// A host function's argument: the job, freed once run. A job records its own errors; nothing may
// leave a host function.
void runHostJob(void* arg) {
  std::unique_ptr<std::function<void()>> job(static_cast<std::function<void()>*>(arg));
  try {
    (*job)();
  } catch (...) {
  }
}
}  // namespace

void CudaBackend::enqueueHostJob(cudaStream_t stream, std::function<void()> job) {
  ContextScope scope(*d_, ctx_);
  auto held = std::make_unique<std::function<void()>>(std::move(job));
  check(*d_, d_->cuLaunchHostFunc(reinterpret_cast<CUstream>(stream), runHostJob, held.get()), "cuLaunchHostFunc",
        "a one-sided operation");
  held.release();  // runHostJob frees it
}

ExecFault CudaBackend::fault() const {
  uint32_t kind = __atomic_load_n(&control_->fault.fault, __ATOMIC_ACQUIRE);
  if (kind == 0) return ExecFault{};
  // A kernel may be writing the record right now: it takes a few stores.
  for (int i = 0; kind == dev::kFaultBeingWritten && i < 1000000; i++)
    kind = __atomic_load_n(&control_->fault.fault, __ATOMIC_ACQUIRE);
  ExecFault f;
  std::memcpy(&f, &control_->fault, sizeof f);
  f.fault = kind == dev::kFaultBeingWritten ? uint32_t(Fault::Aborted) : kind;
  return f;
}

std::unique_ptr<ExecutorBackend> makeCudaBackend(const Driver& driver, const BackendOptions& options,
                                                 const std::string& operation) {
  return std::make_unique<CudaBackend>(driver, options, operation);
}

int deviceCount() {
  const Driver* d = driver();
  int n = 0;
  if (d == nullptr || d->cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
  return n;
}

int currentDevice() {
  const Driver* d = driver();
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (d == nullptr || d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr ||
      d->cuCtxGetDevice(&device) != CUDA_SUCCESS)
    return 0;
  return int(device);
}

}  // namespace tutti::kern::cuda
