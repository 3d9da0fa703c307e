// The emulated backend (kernels/backend.h): the device executor's own code on host threads, a
// block of a few threads per worker (emulated_device.h), host memory standing in for device
// memory, host streams for asynchronous work. It runs every collective through the GPU's logic on
// machines without a GPU; TUTTI_DEVICE=emulated selects it for any program.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <map>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kernels/device/emulated_device.h"
#include "kernels/device/emulated_memory.h"
#include "kernels/exec_fault.h"
#include "kernels/host_backend.h"
#include "base/error.h"
#include "topology/graph.h"

namespace tutti::kern {

namespace {

// Entry `options.device` of TUTTI_EMULATED_BUS_IDS, normalised; "" when the list is shorter.
std::string busIdOf(const BackendOptions& options) {
  std::vector<std::string> ids;
  for (size_t at = 0; at <= options.emulatedBusIds.size() && !options.emulatedBusIds.empty();) {
    size_t end = std::min(options.emulatedBusIds.find(',', at), options.emulatedBusIds.size());
    ids.push_back(options.emulatedBusIds.substr(at, end - at));
    at = end + 1;
  }
  for (size_t d = 0; d < ids.size(); d++)
    if (!topo::isBusId(ids[d]))
      throw Error(ErrorCode::InvalidUsage, "TUTTI_EMULATED_BUS_IDS: entry " + std::to_string(d) + " '" + ids[d] +
                                               "' is not a PCI bus id (domain:bus:device.function, e.g. 0000:17:00.0)");
  if (options.device < 0 || size_t(options.device) >= ids.size()) return "";
  return topo::normalizeBusId(ids[size_t(options.device)]);
}

// TUTTI_EMULATED_NO_PEER_ACCESS ("0:1,2:3"): the pairs of devices without peer access, each as
// (lower, higher), since CUDA peer access between two emulated devices is taken to be symmetric.
std::set<std::pair<int, int>> noPeerAccessOf(const BackendOptions& options) {
  std::set<std::pair<int, int>> pairs;
  const std::string& text = options.emulatedNoPeerAccess;
  for (size_t at = 0; at <= text.size() && !text.empty();) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string entry = text.substr(at, end - at);
    at = end + 1;
    const size_t colon = entry.find(':');
    auto number = [](const std::string& digits) {
      return !digits.empty() && digits.size() < 6 && digits.find_first_not_of("0123456789") == std::string::npos ? std::stoi(digits) : -1;
    };
    const int a = colon == std::string::npos ? -1 : number(entry.substr(0, colon));
    const int b = colon == std::string::npos ? -1 : number(entry.substr(colon + 1));
    if (a < 0 || b < 0 || a == b)
      throw Error(ErrorCode::InvalidUsage, "TUTTI_EMULATED_NO_PEER_ACCESS: entry '" + entry +
                                               "' is not a pair of two different emulated devices (device:device, e.g. 0:1)");
    pairs.insert({std::min(a, b), std::max(a, b)});
  }
  return pairs;
}

// Which emulated device each allocation of emulated device memory in this process belongs to, as
// a CUDA driver knows where a pointer lives: process-wide, like the devices it stands for (every
// backend of the process, one per rank thread, registers and looks up here). Lets a backend refuse
// another device's memory that it has no peer access to, so that a wrong path fails in tests.
class DeviceMemoryOwners {
 public:
  static DeviceMemoryOwners& instance() {
    static DeviceMemoryOwners owners;
    return owners;
  }
  void add(const void* p, size_t bytes, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_[uintptr_t(p)] = Range{uintptr_t(p) + bytes, device};
  }
  void remove(const void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_.erase(uintptr_t(p));
  }
  // The device whose memory holds `p`; -1 when none does (host memory).
  int ownerOf(const void* p) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto after = ranges_.upper_bound(uintptr_t(p));
    if (after == ranges_.begin()) return -1;
    auto found = std::prev(after);
    return uintptr_t(p) < found->second.end ? found->second.device : -1;
  }

 private:
  struct Range {
    uintptr_t end;
    int device;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Range> ranges_;
};

class EmulatedBackend final : public HostMemoryBackend {
 public:
  explicit EmulatedBackend(const BackendOptions& options)
      : HostMemoryBackend(options), busId_(busIdOf(options)), noPeerAccess_(noPeerAccessOf(options)) {}
  const char* name() const override { return "emulated"; }
  std::string deviceBusId() const override { return busId_; }
  bool canAccessPeer(int device, int peer) const override {
    return device == peer || noPeerAccess_.count({std::min(device, peer), std::max(device, peer)}) == 0;
  }
  // Device memory is known to belong to this device (DeviceMemoryOwners).
  void* allocate(size_t bytes, const std::string& what) override {
    void* p = HostMemoryBackend::allocate(bytes, what);
    if (options_.emulatedDeviceMemory) DeviceMemoryOwners::instance().add(p, bytes, options_.device);
    return p;
  }
  size_t llBytes() const override { return kDeviceLLBytes; }
  // Device memory emulated: the same host pages, which the transports must treat as the executor's
  // own (not the host's) and reach only through copies and mappings, as they would a GPU's.
  MemorySpace memorySpace() const override { return options_.emulatedDeviceMemory ? MemorySpace::Device : MemorySpace::Host; }
  void* mapHostMemory(void* host, size_t bytes, const std::string& what) override {
    if (host == nullptr || reinterpret_cast<uintptr_t>(host) % 4096 != 0 || bytes == 0)
      throw Error(ErrorCode::Internal, what + ": host memory to map for the emulated device must be whole pages, not " +
                                           std::to_string(bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(host)));
    std::lock_guard<std::mutex> lock(mappedMutex_);
    if (!mapped_.insert(host).second) throw Error(ErrorCode::Internal, what + ": host memory mapped twice for the emulated device");
    return host;
  }
  void unmapHostMemory(void* host) override {
    std::lock_guard<std::mutex> lock(mappedMutex_);
    mapped_.erase(host);
  }
  // With device memory, memory other processes map as a GPU's through CUDA IPC: a memfd, whose
  // descriptor travels as CUDA's POSIX handle does; or, standing for the legacy IPC handle that
  // travels as bytes, a named shared-memory object whose name is the handle.
  bool exportsMemory() const override { return options_.emulatedDeviceMemory; }
  void* allocateExportable(size_t bytes, const std::string& what, ExportHandle* handle) override {
    if (!exportsMemory()) return HostMemoryBackend::allocateExportable(bytes, what, handle);
    std::string name;
    int made = -1;
    if (options_.emulatedIpcHandles) {
      static std::atomic<uint64_t> serial{0};
      name = "/tutti-emulated-ipc-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
      made = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    } else {
      made = memfd_create("tutti-emulated-device", MFD_CLOEXEC);
    }
    if (made < 0) throwSystemError(what + ": making " + std::to_string(bytes) + " bytes of exportable emulated device memory", errno);
    auto unwind = [&] {
      close(made);
      if (!name.empty()) shm_unlink(name.c_str());
    };
    if (ftruncate(made, off_t(bytes)) != 0) {
      const int err = errno;
      unwind();
      throwSystemError(what + ": sizing " + std::to_string(bytes) + " bytes of emulated device memory", err);
    }
    void* p = nullptr;
    try {
      p = mapShared(made, bytes, what, name);
    } catch (...) {
      unwind();
      throw;
    }
    // A descriptor of its own for exportDmaBuf, which a NIC maps at an offset.
    keepDescriptor(p, made);
    DeviceMemoryOwners::instance().add(p, bytes, options_.device);
    if (name.empty()) {
      handle->fd = made;
    } else {
      close(made);
      std::memcpy(handle->bytes, name.data(), std::min(name.size(), ExportHandle::kBytes - 1));
    }
    return p;
  }
  // GPUDirect RDMA as the verbs stand-in takes it: the memfd (or shared-memory object) that backs
  // the exportable memory, and the range's offset in it.
  bool exportsDmaBuf() const override { return options_.emulatedDeviceMemory; }
  DmaBufRange exportDmaBuf(void* p, size_t bytes, const std::string& what) override {
    if (!exportsDmaBuf()) return HostMemoryBackend::exportDmaBuf(p, bytes, what);
    std::lock_guard<std::mutex> lock(mappedMutex_);
    auto after = shared_.upper_bound(p);
    if (after != shared_.begin()) {
      auto found = std::prev(after);
      const uintptr_t base = uintptr_t(found->first), at = uintptr_t(p);
      if (found->second.fd >= 0 && at + bytes <= base + found->second.bytes) {
        int fd = dup(found->second.fd);
        if (fd < 0) throwSystemError(what + ": duplicating the emulated device memory's descriptor", errno);
        return DmaBufRange{fd, uint64_t(at - base)};
      }
    }
    throw Error(ErrorCode::InvalidUsage, what + ": " + std::to_string(bytes) + " bytes at " + std::to_string(uintptr_t(p)) +
                                             " are not exportable emulated device memory (allocateExportable)");
  }
  // Registered user buffers for peer processes: ncclMemAlloc's memfd pages (emulated_memory.h).
  bool exportsUserBuffers() const override { return options_.emulatedDeviceMemory; }
  UserBufferExport exportUserBuffer(const void* p, size_t bytes, const std::string& what) override {
    if (!exportsUserBuffers()) return HostMemoryBackend::exportUserBuffer(p, bytes, what);
    return emulated::exportShareable(p, bytes, what);
  }
  uint64_t directReads() const override { return __atomic_load_n(&directReads_, __ATOMIC_RELAXED); }
  void* importExported(const ExportHandle& handle, size_t bytes, const std::string& what) override {
    if (!exportsMemory()) return HostMemoryBackend::importExported(handle, bytes, what);
    int fd = handle.fd;
    std::string name;
    if (fd < 0) {
      name.assign(reinterpret_cast<const char*>(handle.bytes), strnlen(reinterpret_cast<const char*>(handle.bytes), ExportHandle::kBytes));
      fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
      if (fd < 0) throw Error(ErrorCode::Remote, what + ": opening the peer's IPC handle " + name + ": " + errnoText(errno));
    }
    struct stat st{};
    const bool small = fstat(fd, &st) != 0 || size_t(st.st_size) < bytes;
    void* p = small ? nullptr : mapShared(fd, bytes, what, "");
    if (!name.empty()) close(fd);
    if (small)
      throw Error(ErrorCode::Remote, what + ": the peer's emulated device memory holds " + std::to_string(st.st_size) + " bytes, not " +
                                         std::to_string(bytes));
    return p;
  }
  void release(void* p) override {
    DeviceMemoryOwners::instance().remove(p);
    if (!unmapShared(p)) HostMemoryBackend::release(p);
  }
  void releaseImported(void* p) override { unmapShared(p); }
  void abort() override { __atomic_store_n(&abortWord_, 1u, __ATOMIC_RELEASE); }
  ExecFault fault() const override {
    ExecFault f;
    std::memcpy(&f, &fault_, sizeof f);
    if (__atomic_load_n(&fault_.fault, __ATOMIC_ACQUIRE) == dev::kFaultBeingWritten) f.fault = uint32_t(Fault::Aborted);
    return f;
  }

 protected:
  void run(std::span<Launch* const> launches) override {
    for (Launch* L : launches) {
      const std::string problem = static_cast<EmulatedBackend&>(L->backend()).unreachableMemory(*L);
      if (problem.empty()) continue;
      const Error e(ErrorCode::System, problem);
      L->failed(e);
      L->raise(e);
    }
    RunScope scope(launches);
    std::vector<dev::EmulatedLaunch> runs;
    for (Launch* L : launches) {
      if (L->alone()) throw Error(ErrorCode::Internal, "the emulated device cannot run a launch without workers");
      auto& backend = static_cast<EmulatedBackend&>(L->backend());
      dev::ExecControl control{&backend.abortWord_, &backend.fault_, uint64_t(backend.options_.timeoutSeconds * 1e9), &backend.directReads_};
      runs.push_back(dev::EmulatedLaunch{&L->work(), L->work().ops(), control});
    }
    dev::runEmulatedLaunches(runs, options_.emulatedThreads);
    Launch* firstLaunch = nullptr;
    Error first(ErrorCode::Internal, "");
    for (Launch* L : launches) {
      auto& backend = static_cast<EmulatedBackend&>(L->backend());
      const ExecFault f = backend.fault();
      if (f.fault == uint32_t(Fault::None)) continue;
      ExecutionContext ctx = L->context(0);
      Error e(faultCode(f), describeFault(f, ctx.rank, [&](int peer) { return ctx.describePeer(peer); }, backend.options_.timeoutSeconds));
      L->failed(e);
      if (firstLaunch == nullptr) {
        firstLaunch = L;
        first = e;
      }
    }
    if (firstLaunch != nullptr) firstLaunch->raise(first);
  }

 private:
  // Where the launch's connections have a FIFO in another device's memory that this one has no
  // peer access to: what that is, in words (a GPU's kernel would fault on it); "" when none has.
  std::string unreachableMemory(Launch& launch) const {
    if (noPeerAccess_.empty()) return "";
    const LaunchWork& work = launch.work();
    for (uint32_t i = 0; i < work.nconns; i++) {
      const ConnEnd& conn = work.conns()[i];
      const int owner = DeviceMemoryOwners::instance().ownerOf(conn.fifo);
      if (owner < 0 || canAccessPeer(options_.device, owner)) continue;
      ExecutionContext ctx = launch.context(0);
      return "rank " + std::to_string(ctx.rank) + ": emulated device " + std::to_string(options_.device) + " cannot access emulated device " +
             std::to_string(owner) + "'s memory, which holds the FIFO of its connection with " + ctx.describePeer(conn.peer) +
             " (TUTTI_EMULATED_NO_PEER_ACCESS gives the pair no peer access; a GPU would fault here)";
    }
    return "";
  }

  std::string busId_;  // TUTTI_EMULATED_BUS_IDS' entry for this device
  std::set<std::pair<int, int>> noPeerAccess_;  // TUTTI_EMULATED_NO_PEER_ACCESS, as (lower, higher)
  uint32_t abortWord_ = 0;
  ExecFault fault_{};
  uint64_t directReads_ = 0;  // counted by the blocks (dev::countAdd)
  // `name`: the shared-memory object the exporter unlinks when it frees the memory ("" if none).
  void* mapShared(int fd, size_t bytes, const std::string& what, const std::string& name) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throwSystemError(what + ": mapping " + std::to_string(bytes) + " bytes of emulated device memory", errno);
    std::lock_guard<std::mutex> lock(mappedMutex_);
    shared_[p] = Shared{bytes, name};
    return p;
  }
  bool unmapShared(void* p) {
    Shared gone;
    {
      std::lock_guard<std::mutex> lock(mappedMutex_);
      auto found = shared_.find(p);
      if (found == shared_.end()) return false;
      gone = found->second;
      shared_.erase(found);
    }
    munmap(p, gone.bytes);
    if (gone.fd >= 0) close(gone.fd);
    if (!gone.name.empty()) shm_unlink(gone.name.c_str());
    return true;
  }
  void keepDescriptor(void* p, int fd) {
    int own = dup(fd);
    std::lock_guard<std::mutex> lock(mappedMutex_);
    shared_[p].fd = own;
  }

  std::mutex mappedMutex_;
  std::set<void*> mapped_;  // host memory mapped, as the cuda backend keeps it registered
  struct Shared {
    size_t bytes = 0;
    std::string name;
    int fd = -1;  // exported memory's own descriptor (exportDmaBuf); closed when unmapped
  };
  std::map<void*, Shared> shared_;  // exported or imported memory, for munmap (and shm_unlink)
};

}  // namespace

std::unique_ptr<ExecutorBackend> makeEmulatedBackend(const BackendOptions& options) { return std::make_unique<EmulatedBackend>(options); }

}  // namespace tutti::kern
