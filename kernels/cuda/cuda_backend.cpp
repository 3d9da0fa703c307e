// The cuda executor backend (kernels/backend.h): device memory for FIFOs and scratch, the user's
// CUDA streams, and the device executor's kernel (executor_kernel.cu) loaded from the fat binary
// built into the library, all through the driver API loaded at run time (cuda_driver.h).
//
// A communicator's backend holds the CUDA context that was current when it was made (as NCCL
// takes the current device at ncclCommInitRank), and one small block of host memory mapped for the
// device: the abort word the host sets and the fault record a kernel that gives up writes. Each
// launch keeps a device copy of its arena (kernels/work.h), made on its first run and reused by
// every later call of the same shape; the operations of a call travel with the kernel's
// parameters, so such a call uploads nothing.
#include "kernels/cuda/cuda_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_driver.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/cuda/executor_params.h"
#include "kernels/host_stream.h"
#include "base/error.h"
#include "base/log.h"
#include "topology/graph.h"

extern "C" const unsigned char tuttiExecutorFatbin[];
extern "C" const size_t tuttiExecutorFatbinBytes;

namespace tutti::kern::cuda {

namespace {

// What the host and the kernels share: mapped host memory.
struct alignas(64) ControlWords {
  uint32_t abortWord;
  uint32_t pad[15];
  ExecFault fault;
  uint64_t directReads;  // messages the kernels read in place (tuttiCommZeroCopyReads)
};

// The executor's kernel in a context: its module is loaded once per context and process.
CUfunction executorFunction(const Driver& d, CUcontext ctx, const std::string& context) {
  static std::mutex mutex;
  static std::map<CUcontext, CUfunction> functions;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = functions.find(ctx);
  if (it != functions.end()) return it->second;
  if (tuttiExecutorFatbinBytes == 0)
    throw Error(ErrorCode::InvalidUsage, context + ": this library was built without the CUDA executor's kernels");
  CUmodule module = nullptr;
  check(d, d.cuModuleLoadData(&module, tuttiExecutorFatbin), "cuModuleLoadData (the executor's kernels)", context);
  CUfunction fn = nullptr;
  check(d, d.cuModuleGetFunction(&fn, module, "tuttiRunLaunches"), "cuModuleGetFunction", context);
  functions[ctx] = fn;  // modules stay loaded for the process: kernels may be queued on any stream
  return fn;
}

// A launch's device copy of its arena and its scratch, given back to its backend with the launch.
struct DeviceArena {
  ExecutorBackend* backend = nullptr;
  CUdeviceptr arena = 0;
  CUdeviceptr scratch = 0;
  ~DeviceArena() {
    if (backend == nullptr) return;
    backend->release(reinterpret_cast<void*>(arena));
    backend->release(reinterpret_cast<void*>(scratch));
  }
};

class CudaBackend final : public ExecutorBackend {
 public:
  CudaBackend(const BackendOptions& options, const std::string& operation) : options_(options) {
    std::string why;
    d_ = driver(&why);
    if (d_ == nullptr) throw Error(ErrorCode::InvalidUsage, operation + ": the cuda device backend cannot start: " + why);
    const std::string where = operation + " (CUDA device " + std::to_string(options.device) + ")";
    CUcontext current = nullptr;
    d_->cuCtxGetCurrent(&current);
    CUdevice device = 0;
    check(*d_, d_->cuDeviceGet(&device, options.device), "cuDeviceGet", where);
    char busId[32] = {};
    check(*d_, d_->cuDeviceGetPCIBusId(busId, int(sizeof busId), device), "cuDeviceGetPCIBusId", where);
    busId_ = topo::normalizeBusId(busId);
    if (current != nullptr) {
      CUdevice currentDevice = -1;
      d_->cuCtxGetDevice(&currentDevice);
      if (currentDevice != device) current = nullptr;
    }
    if (current == nullptr) {
      check(*d_, d_->cuDevicePrimaryCtxRetain(&current, device), "cuDevicePrimaryCtxRetain", where);
      retainedDevice_ = device;
      check(*d_, d_->cuCtxSetCurrent(current), "cuCtxSetCurrent", where);
    }
    ctx_ = current;
    function_ = executorFunction(*d_, ctx_, where);
    void* host = nullptr;
    check(*d_, d_->cuMemHostAlloc(&host, sizeof(ControlWords), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
          "cuMemHostAlloc (abort word and fault record)", where);
    control_ = static_cast<ControlWords*>(host);
    std::memset(control_, 0, sizeof *control_);
    check(*d_, d_->cuMemHostGetDevicePointer(&controlDevice_, host, 0), "cuMemHostGetDevicePointer", where);
    check(*d_, d_->cuStreamCreate(&copies_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (the backend's copies)", where);
    enablePeerAccess(device);
  }

  ~CudaBackend() override {
    d_->cuCtxSetCurrent(ctx_);
    // Kernels still queued or running read the FIFOs, the arenas and the control words freed
    // below: wait for the last launch on every stream first (ncclCommDestroy finishes what was
    // issued; after ncclCommAbort the abort word ends them within a poll). Their waits are bounded
    // by TUTTI_TIMEOUT on the device clock; should one still run past that (queued behind a user's
    // kernel that never ends), its memory is left allocated rather than freed under it.
    if (!launchesEnded(options_.timeoutSeconds + 5)) {
      TUTTI_WARN("cuda backend: launches of this communicator did not end within %.0f s of its destruction; their "
                 "device memory (%zu buffers) is left allocated",
                 options_.timeoutSeconds + 5, freed_.size());
      return;
    }
    for (auto& [stream, event] : lastLaunch_) d_->cuEventDestroy(event);
    for (CUdeviceptr p : freed_) {
      if (ipcOpened_.count(p) != 0) d_->cuIpcCloseMemHandle(p);
      else if (!cuda::freeShareable(reinterpret_cast<void*>(p))) d_->cuMemFree(p);
    }
    if (copies_) d_->cuStreamDestroy(copies_);
    if (control_) d_->cuMemFreeHost(control_);
    if (retainedDevice_ >= 0) d_->cuDevicePrimaryCtxRelease(retainedDevice_);
    for (CUdevice peer : peersRetained_) d_->cuDevicePrimaryCtxRelease(peer);
  }

  const char* name() const override { return "cuda"; }
  size_t llBytes() const override { return kDeviceLLBytes; }
  bool ownsDevice() const override { return true; }
  std::string deviceBusId() const override { return busId_; }
  MemorySpace memorySpace() const override { return MemorySpace::Device; }
  int workers() const override { return options_.workers; }

  // Copies and clears run on the backend's own non-blocking stream, never on the legacy default
  // stream: that one waits for every blocking stream's work, and the kernels of ranks sharing the
  // GPU may be waiting for this very thread.
  void* allocate(size_t bytes, const std::string& what) override {
    makeCurrent();
    CUdeviceptr p = 0;
    bytes = std::max<size_t>(bytes, 1);
    check(*d_, d_->cuMemAlloc(&p, bytes), "cuMemAlloc", what);
    check(*d_, d_->cuMemsetD8Async(p, 0, bytes, copies_), "cuMemsetD8Async", what);
    check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", what);
    return reinterpret_cast<void*>(p);
  }
  // Freed with the backend: cuMemFree waits for the whole device, where other ranks' kernels may
  // wait for this thread's next launch.
  void release(void* p) override {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(freedMutex_);
    freed_.push_back(reinterpret_cast<CUdeviceptr>(p));
  }
  void copyIn(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    makeCurrent();
    check(*d_, d_->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, copies_), "cuMemcpyHtoDAsync", "copying to the device");
    check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", "copying to the device");
  }
  void copyOut(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    makeCurrent();
    check(*d_, d_->cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, copies_), "cuMemcpyDtoHAsync", "copying from the device");
    check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", "copying from the device");
  }
  // Device to device, the peer's memory mapped here (unified addressing): the copy engine.
  void copyAcross(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    makeCurrent();
    check(*d_, d_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, copies_), "cuMemcpyAsync",
          "copying to a peer's FIFO (NCCL_P2P_USE_CUDA_MEMCPY)");
    check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", "copying to a peer's FIFO (NCCL_P2P_USE_CUDA_MEMCPY)");
  }

  // CUDA IPC through virtual memory: a physical allocation whose POSIX file descriptor the p2p
  // transport passes to the peer process (SCM_RIGHTS), which maps it for its own device. Where the
  // driver cannot export descriptors, cuMemAlloc'd memory and its legacy IPC handle, which travels
  // as bytes. Freed or unmapped with the backend, as other device memory is (release()).
  bool exportsMemory() const override { return true; }
  void* allocateExportable(size_t bytes, const std::string& what, ExportHandle* handle) override {
    makeCurrent();
    int descriptors = 0;
    d_->cuDeviceGetAttribute(&descriptors, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, options_.device);
    if (descriptors == 0) {
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
    void* p = cuda::allocateExportable(options_.device, bytes, what, &handle->fd);
    check(*d_, d_->cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(p), 0, bytes, copies_), "cuMemsetD8Async", what);
    check(*d_, d_->cuStreamSynchronize(copies_), "cuStreamSynchronize", what);
    return p;
  }
  void* importExported(const ExportHandle& handle, size_t bytes, const std::string& what) override {
    makeCurrent();
    if (handle.fd >= 0) return cuda::importExported(options_.device, handle.fd, bytes, what);
    CUipcMemHandle ipc{};
    std::memcpy(ipc.reserved, handle.bytes, sizeof ipc.reserved);
    CUdeviceptr p = 0;
    check(*d_, d_->cuIpcOpenMemHandle(&p, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle", what);
    std::lock_guard<std::mutex> lock(freedMutex_);
    ipcOpened_.insert(p);
    return reinterpret_cast<void*>(p);
  }
  void releaseImported(void* p) override { release(p); }

  // GPUDirect RDMA through dmabuf (no peer-memory module): the allocation around `p`, whole host
  // pages of it, as a dmabuf descriptor, and `p`'s offset in it, as NCCL asks the driver for it.
  bool exportsDmaBuf() const override {
    if (d_->cuMemGetHandleForAddressRange == nullptr) return false;
    int supported = 0;
    d_->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, options_.device);
    return supported != 0;
  }
  DmaBufRange exportDmaBuf(void* p, size_t bytes, const std::string& what) override {
    if (!exportsDmaBuf()) return ExecutorBackend::exportDmaBuf(p, bytes, what);
    makeCurrent();
    CUdeviceptr base = 0;
    size_t size = 0;
    check(*d_, d_->cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(p)), "cuMemGetAddressRange", what);
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    size = (size + page - 1) / page * page;
    int fd = -1;
    check(*d_, d_->cuMemGetHandleForAddressRange(&fd, base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0), "cuMemGetHandleForAddressRange", what);
    return DmaBufRange{fd, uint64_t(reinterpret_cast<CUdeviceptr>(p) - base)};
  }

  // A registered user buffer for a peer process (zero-copy, runtime/peer_buffers.h): the
  // allocation around it, as NCCL's registration finds it. Virtual memory (ncclMemAlloc) by the
  // POSIX descriptor of its physical allocation, which the peer maps as the p2p FIFOs are mapped;
  // memory from cuMemAlloc/cudaMalloc by its legacy IPC handle. Either way the peer maps the
  // whole allocation, and the buffer lies at `offset` in it.
  bool exportsUserBuffers() const override { return true; }
  UserBufferExport exportUserBuffer(const void* p, size_t bytes, const std::string& what) override {
    makeCurrent();
    CUdeviceptr base = 0;
    size_t size = 0;
    check(*d_, d_->cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(p)), "cuMemGetAddressRange", what);
    UserBufferExport out;
    out.allocationBytes = size;
    out.offset = reinterpret_cast<CUdeviceptr>(p) - base;
    if (out.offset + bytes > size)
      throw Error(ErrorCode::InvalidUsage, what + ": the buffer runs past the end of its allocation (" + std::to_string(size) + " bytes)");
    CUmemGenericAllocationHandle handle = 0;
    if (d_->cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base)) == CUDA_SUCCESS) {
      int fd = -1;
      const CUresult r = d_->cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      d_->cuMemRelease(handle);  // the retained reference; the mapping keeps the allocation
      if (r != CUDA_SUCCESS)
        throw Error(ErrorCode::InvalidUsage, what + ": " + describe(*d_, r, "cuMemExportToShareableHandle") +
                                                 " (virtual memory made without a POSIX descriptor handle type; ncclMemAlloc's has one)");
      out.handle.fd = fd;
      return out;
    }
    CUipcMemHandle ipc{};
    if (CUresult r = d_->cuIpcGetMemHandle(&ipc, base); r != CUDA_SUCCESS)
      throw Error(ErrorCode::InvalidUsage, what + ": " + describe(*d_, r, "cuIpcGetMemHandle") + " (not memory from cudaMalloc or ncclMemAlloc?)");
    static_assert(sizeof ipc.reserved == ExportHandle::kBytes);
    std::memcpy(out.handle.bytes, ipc.reserved, sizeof ipc.reserved);
    return out;
  }
  uint64_t directReads() const override { return __atomic_load_n(&control_->directReads, __ATOMIC_RELAXED); }

  // Pinned and mapped into the device's address space (portable: every context of the process),
  // so the kernel reads and writes it over the bus with the system-scope loads and stores of
  // kernels/device/shim.h. With unified addressing the device uses the host's address; where a
  // device gives another, that is the one returned.
  // cuDeviceCanAccessPeer between two devices of this process; a device the driver cannot name
  // has no peer access.
  bool canAccessPeer(int device, int peer) const override {
    if (device == peer) return true;
    CUdevice a = 0, b = 0;
    int can = 0;
    if (d_->cuDeviceGet(&a, device) != CUDA_SUCCESS || d_->cuDeviceGet(&b, peer) != CUDA_SUCCESS) return false;
    return d_->cuDeviceCanAccessPeer(&can, a, b) == CUDA_SUCCESS && can != 0;
  }

  void* mapHostMemory(void* host, size_t bytes, const std::string& what) override {
    makeCurrent();
    check(*d_, d_->cuMemHostRegister(host, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP), "cuMemHostRegister", what);
    CUdeviceptr device = 0;
    if (CUresult r = d_->cuMemHostGetDevicePointer(&device, host, 0); r != CUDA_SUCCESS) {
      d_->cuMemHostUnregister(host);
      check(*d_, r, "cuMemHostGetDevicePointer", what);
    }
    return reinterpret_cast<void*>(device);
  }
  // After the last launch that may touch it; a launch still running past TUTTI_TIMEOUT (queued
  // behind a user's kernel that never ends) keeps the registration, as the destructor keeps memory.
  void unmapHostMemory(void* host) override {
    makeCurrent();
    if (!launchesEnded(options_.timeoutSeconds + 5)) {
      TUTTI_WARN("cuda backend: launches did not end within %.0f s; host memory at %p stays registered", options_.timeoutSeconds + 5, host);
      return;
    }
    d_->cuMemHostUnregister(host);
  }

  std::string streamProblem(cudaStream_t stream) const override {
    if (stream != nullptr && HostStream::fromHandle(stream) != nullptr)
      return "the stream is a host stream from tuttiStreamCreate; the cuda device backend runs on CUDA streams";
    return "";
  }

  std::string captureProblem(cudaStream_t stream) const override {
    makeCurrent();
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (d_->cuStreamIsCapturing(reinterpret_cast<CUstream>(stream), &status) != CUDA_SUCCESS || status == CU_STREAM_CAPTURE_STATUS_NONE)
      return "";
    return "the stream is being captured into a CUDA graph, and the cuda backend does not run collectives inside a graph "
           "capture yet (its kernels' FIFO sequence numbers are set at enqueue, so a replay would not line up with the peers): "
           "enqueue collectives outside the capture";
  }

  std::string bufferProblem(const void* buffer, size_t bytes) const override {
    makeCurrent();
    unsigned int type = 0;
    const CUresult r = d_->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(buffer));
    if (r != CUDA_SUCCESS)
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

  void synchronize(cudaStream_t stream) override {
    makeCurrent();
    check(*d_, d_->cuStreamSynchronize(reinterpret_cast<CUstream>(stream)), "cuStreamSynchronize", "synchronising a stream");
  }

  void submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) override {
    // Once queued (or failed to queue), the stream's order protects the launches: `done` runs now.
    struct Done {
      std::function<void()> done;
      ~Done() {
        if (done) done();
      }
    } whenQueued{std::move(done)};
    makeCurrent();
    CUstream s = reinterpret_cast<CUstream>(stream);
    dev::ExecutorParams params{};
    uint32_t blocks = 0;
    auto flush = [&] {
      if (params.nlaunches == 0) return;
      check(*d_, launchKernel(params, blocks, s), "cuLaunchKernel (the executor)", "launching a collective");
      recordLaunch(s);
      params = dev::ExecutorParams{};
      blocks = 0;
    };
    for (Launch* L : launches) {
      LaunchWork& w = L->work();
      DeviceArena& arena = deviceArena(*L);
      for (const Launch::Copy& c : L->prologue())
        if (c.bytes > 0)
          check(*d_, d_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(c.dst), reinterpret_cast<CUdeviceptr>(c.src), c.bytes, s),
                "cuMemcpyAsync", "copying an operation's input");
      if (w.nworkers == 0) continue;
      if (params.nlaunches == dev::kParamLaunches) flush();
      dev::ParamLaunch& p = params.launches[params.nlaunches];
      p.work = reinterpret_cast<LaunchWork*>(arena.arena);
      p.control.abortWord = &reinterpret_cast<ControlWords*>(controlDevice_)->abortWord;
      p.control.fault = &reinterpret_cast<ControlWords*>(controlDevice_)->fault;
      p.control.timeoutNs = uint64_t(options_.timeoutSeconds * 1e9);
      p.control.directReads = &reinterpret_cast<ControlWords*>(controlDevice_)->directReads;
      p.firstBlock = blocks;
      const uint32_t used = opsUsed(params);
      if (used + w.nops <= dev::kParamOps) {
        p.ops = nullptr;
        p.opsFirst = used;
        std::memcpy(params.ops + used, w.ops(), w.nops * sizeof(OpWork));
        opsCount_[params.nlaunches] = w.nops;
      } else {
        // Too many operations to pass by value: they go to the arena's own copy, in stream order.
        check(*d_, d_->cuMemcpyHtoDAsync(arena.arena + w.opsOffset, w.ops(), w.nops * sizeof(OpWork), s), "cuMemcpyHtoDAsync",
              "uploading a group's operations");
        p.ops = reinterpret_cast<const OpWork*>(arena.arena + w.opsOffset);
        opsCount_[params.nlaunches] = 0;
      }
      params.nlaunches++;
      blocks += w.nworkers;
    }
    flush();
  }

  ExecFault fault() const override {
    uint32_t kind = __atomic_load_n(&control_->fault.fault, __ATOMIC_ACQUIRE);
    if (kind == 0) return ExecFault{};
    // A kernel may be writing the record right now: it takes a few stores.
    for (int i = 0; kind == dev::kFaultBeingWritten && i < 1000000; i++) kind = __atomic_load_n(&control_->fault.fault, __ATOMIC_ACQUIRE);
    ExecFault f;
    std::memcpy(&f, &control_->fault, sizeof f);
    f.fault = kind == dev::kFaultBeingWritten ? uint32_t(Fault::Aborted) : kind;
    return f;
  }

  void abort() override { __atomic_store_n(&control_->abortWord, 1u, __ATOMIC_SEQ_CST); }

 private:
  // The stream's last launch, for the destructor to wait for (one event per stream, re-recorded).
  void recordLaunch(CUstream s) {
    std::lock_guard<std::mutex> lock(launchesMutex_);
    CUevent& event = lastLaunch_[s];
    if (event == nullptr) check(*d_, d_->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate", "tracking a launch");
    check(*d_, d_->cuEventRecord(event, s), "cuEventRecord", "tracking a launch");
  }

  // Whether every stream's last launch has ended, waiting at most `seconds`.
  bool launchesEnded(double seconds) {
    std::lock_guard<std::mutex> lock(launchesMutex_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (auto& [stream, event] : lastLaunch_) {
      CUresult r;
      while ((r = d_->cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      if (r != CUDA_SUCCESS) return true;  // a broken context: nothing runs on it any more
    }
    return true;
  }

  // Ranks of one process on several GPUs write into each other's FIFOs, which live in the
  // receiver's device memory: this context may reach every device that allows it. A pair of GPUs
  // without peer access (canAccessPeer) connects through host memory both map (the shm transport).
  void enablePeerAccess(CUdevice own) {
    int n = 0;
    if (d_->cuDeviceGetCount(&n) != CUDA_SUCCESS) return;
    for (int i = 0; i < n; i++) {
      CUdevice peer = 0;
      int can = 0;
      CUcontext peerCtx = nullptr;
      if (d_->cuDeviceGet(&peer, i) != CUDA_SUCCESS || peer == own) continue;
      if (d_->cuDeviceCanAccessPeer(&can, own, peer) != CUDA_SUCCESS || !can) continue;
      if (d_->cuDevicePrimaryCtxRetain(&peerCtx, peer) != CUDA_SUCCESS) continue;
      peersRetained_.push_back(peer);  // its mappings last while its primary context does
      const CUresult r = d_->cuCtxEnablePeerAccess(peerCtx, 0);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        TUTTI_WARN("cuda backend: CUDA device %d cannot map device %d's memory: %s", int(own), int(peer),
                   describe(*d_, r, "cuCtxEnablePeerAccess").c_str());
    }
  }

  void makeCurrent() const {
    CUcontext current = nullptr;
    d_->cuCtxGetCurrent(&current);
    if (current != ctx_) d_->cuCtxSetCurrent(ctx_);
  }

  uint32_t opsUsed(const dev::ExecutorParams& params) const {
    uint32_t used = 0;
    for (uint32_t i = 0; i < params.nlaunches; i++) used += opsCount_[i];
    return used;
  }

  CUresult launchKernel(dev::ExecutorParams& params, uint32_t blocks, CUstream stream) const {
    size_t size = sizeof params;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    return d_->cuLaunchKernel(function_, blocks, 1, 1, dev::kExecutorThreads, 1, 1, 0, stream, nullptr, extra);
  }

  // The launch's device arena: made and uploaded on its first run (its scratch too), reused after.
  DeviceArena& deviceArena(Launch& L) {
    if (L.backendState) return *static_cast<DeviceArena*>(L.backendState.get());
    auto arena = std::make_shared<DeviceArena>();
    arena->backend = this;
    LaunchWork& w = L.work();
    const std::string what = "a collective's work descriptors (" + std::to_string(w.bytes) + " bytes)";
    arena->arena = reinterpret_cast<CUdeviceptr>(allocate(w.bytes, what));
    if (L.scratchBytes() > 0)
      arena->scratch = reinterpret_cast<CUdeviceptr>(allocate(L.scratchBytes(), "a collective's scratch (" + std::to_string(L.scratchBytes()) + " bytes)"));
    char* const hostScratch = w.scratch;
    w.scratch = reinterpret_cast<char*>(arena->scratch);
    copyIn(reinterpret_cast<void*>(arena->arena), &w, w.stateOffset);
    w.scratch = hostScratch;
    L.backendState = arena;
    return *arena;
  }

  BackendOptions options_;
  std::string busId_;  // the device's PCI bus id, normalised as the topology names GPUs
  const Driver* d_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice retainedDevice_ = -1;
  std::vector<CUdevice> peersRetained_;
  CUfunction function_ = nullptr;
  ControlWords* control_ = nullptr;
  CUdeviceptr controlDevice_ = 0;
  uint32_t opsCount_[dev::kParamLaunches] = {};
  CUstream copies_ = nullptr;
  std::mutex freedMutex_;
  std::vector<CUdeviceptr> freed_;
  std::set<CUdeviceptr> ipcOpened_;  // peers' memory opened through legacy IPC handles (closed, not freed)
  std::mutex launchesMutex_;
  std::map<CUstream, CUevent> lastLaunch_;
};

}  // namespace

std::unique_ptr<ExecutorBackend> makeCudaBackend(const BackendOptions& options, const std::string& operation) {
  return std::make_unique<CudaBackend>(options, operation);
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
  if (d == nullptr || d->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr || d->cuCtxGetDevice(&device) != CUDA_SUCCESS) return 0;
  return int(device);
}

}  // namespace tutti::kern::cuda
