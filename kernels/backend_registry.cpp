// The executor backends by name: the one place that lists them (kernels/backend.h).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/tunables.h"
#include "kernels/backend.h"
#include "kernels/host/host_backend.h"
#if defined(TUTTI_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/cuda/cuda_memory.h"
#include "kernels/emulated/emulated_driver.h"
#endif

namespace tutti::kern {

namespace {

#if defined(TUTTI_HAVE_CUDA)
// The CUDA driver a backend of this name runs over: NVIDIA's for cuda, this library's emulated one
// for emulated.
const cuda::Driver& driverFor(const std::string& name, const std::string& operation) {
  if (name == "emulated") {
    emulated::checkEnvironment();
    return *cuda::emulatedDriver();
  }
  std::string why;
  const cuda::Driver* d = cuda::driver(&why);
  if (d == nullptr) throw Error(ErrorCode::InvalidUsage, operation + ": the cuda device backend cannot start: " + why);
  return *d;
}
#endif

std::unique_ptr<ExecutorBackend> makeDeviceBackend(const std::string& name, const BackendOptions& options,
                                                   const std::string& operation) {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::makeCudaBackend(driverFor(name, operation), options, operation);
#else
  (void)options;
  throw Error(ErrorCode::InvalidUsage,
              operation + ": this library was built without CUDA (no CUDA toolkit at build time): the " + name +
                  " device backend is not available");
#endif
}

void* allocateDeviceMemory(const std::string& name, size_t bytes) {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::allocateShareable(driverFor(name, "ncclMemAlloc"), bytes);
#else
  (void)bytes;
  throw Error(ErrorCode::InvalidUsage,
              "ncclMemAlloc: this library was built without CUDA: the " + name + " device backend is not available");
#endif
}

void* allocateHostMemory(const std::string&, size_t bytes) {
  void* p = nullptr;
  if (int err = posix_memalign(&p, 4096, bytes))
    throwSystemError("ncclMemAlloc: " + std::to_string(bytes) + " bytes", err);
  return p;
}

int noDevices() { return 0; }

int cudaDevices() {
#if defined(TUTTI_HAVE_CUDA)
  static const int count = cuda::deviceCount();
  return count;
#else
  return 0;
#endif
}

int cudaCurrentDevice() {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::currentDevice();
#else
  return 0;
#endif
}

// An emulated device has no cudaSetDevice: a variable plays it, so that rank processes of one host
// can take devices of their own (and their bus ids, TUTTI_EMULATED_BUS_IDS).
int emulatedCurrentDevice() { return int(std::max<int64_t>(0, tunables::kEmulatedDevice.get())); }

// The list, in the order TUTTI_DEVICE=auto tries them: built in, then registered (registerBackend).
struct Backends {
  std::mutex mutex;
  std::deque<BackendRegistration> list;  // a deque: an entry's address outlives later additions

  Backends() {
    auto device = [](const char* name, int (*devices)(), int (*current)(), BackendTraits traits) {
      return BackendRegistration{name,
                                 [name = std::string(name)](const BackendOptions& o, const std::string& op) {
                                   return makeDeviceBackend(name, o, op);
                                 },
                                 [name = std::string(name)](size_t bytes) { return allocateDeviceMemory(name, bytes); },
                                 devices,
                                 current,
                                 traits};
    };
    list.push_back(device("cuda", cudaDevices, cudaCurrentDevice, {.llBytes = kDeviceLLBytes, .maxChannels = 16}));
    list.push_back(device("emulated", noDevices, emulatedCurrentDevice, {.llBytes = kDeviceLLBytes, .maxChannels = 2}));
    // The host executor: worker threads that sleep on bells, read peer processes' buffers by
    // cross-memory reads (host_executor.cpp), run the mailboxes, take scalars at enqueue, and read
    // a launch's arena where the launch keeps it.
    const BackendTraits host{.llBytes = 0,
                             .mailboxes = true,
                             .maxChannels = 2,
                             .bells = true,
                             .readsOtherProcesses = true,
                             .readsDeviceScalars = false,
                             .readsArenaAtRun = true};
    list.push_back(BackendRegistration{
        "host", [](const BackendOptions& o, const std::string&) { return host::makeHostBackend(o); },
        [](size_t bytes) { return allocateHostMemory("host", bytes); }, noDevices, noDevices, host});
  }
};

Backends& backends() {
  static Backends* b = new Backends;  // never destroyed: communicators may outlive static destruction
  return *b;
}

const BackendRegistration* find(const std::string& name) {
  Backends& b = backends();
  std::lock_guard<std::mutex> lock(b.mutex);
  for (const BackendRegistration& e : b.list)
    if (name == e.name) return &e;
  return nullptr;
}

const BackendRegistration& entryOf(const std::string& name, const std::string& operation) {
  if (const BackendRegistration* e = find(name)) return *e;
  throw Error(ErrorCode::InvalidUsage,
              operation + ": unknown device backend \"" + name + "\" (known: " + backendNames() + ")");
}

}  // namespace

void registerBackend(BackendRegistration backend) {
  if (backend.name.empty() || backend.name == "auto" || !backend.make)
    throw Error(ErrorCode::InvalidArgument,
                "registerBackend: a backend needs a name other than \"auto\" and a make function");
  if (!backend.allocateUser)
    backend.allocateUser = [name = backend.name](size_t bytes) { return allocateHostMemory(name, bytes); };
  if (!backend.devices) backend.devices = noDevices;
  if (!backend.currentDevice) backend.currentDevice = noDevices;
  Backends& b = backends();
  std::lock_guard<std::mutex> lock(b.mutex);
  for (const BackendRegistration& e : b.list)
    if (e.name == backend.name)
      throw Error(ErrorCode::InvalidUsage,
                  "registerBackend: a backend named \"" + backend.name + "\" is already known");
  b.list.push_back(std::move(backend));
}

const char* registeredName(const std::string& name) {
  const BackendRegistration* e = find(name);
  return e != nullptr ? e->name.c_str() : "";
}

std::string backendNames() {
  Backends& b = backends();
  std::lock_guard<std::mutex> lock(b.mutex);
  std::string names;
  for (const BackendRegistration& e : b.list) names += (names.empty() ? "" : ", ") + e.name;
  return names;
}

std::unique_ptr<ExecutorBackend> makeExecutorBackend(const std::string& name, const BackendOptions& options,
                                                     const std::string& operation) {
  const BackendRegistration& entry = entryOf(name, operation);
  std::unique_ptr<ExecutorBackend> made = entry.make(options, operation);
  if (made == nullptr)
    throw Error(ErrorCode::Internal, operation + ": the " + name + " backend's make function returned nothing");
  made->adoptTraits(entry.traits);
  return made;
}

std::string chooseBackend(const std::string& operation) {
  std::string wanted;
  try {
    wanted = tunables::kDevice.get();
  } catch (const Error& error) {
    throw Error(error.code(), operation + ": " + error.message());
  }
  if (!wanted.empty() && wanted != "auto") return entryOf(wanted, operation + " (TUTTI_DEVICE)").name;
  std::vector<const BackendRegistration*> all;
  {
    Backends& b = backends();
    std::lock_guard<std::mutex> lock(b.mutex);
    for (const BackendRegistration& e : b.list) all.push_back(&e);
  }
  for (const BackendRegistration* e : all)
    if (e->devices() > 0) return e->name;
  return "host";
}

int backendDevices(const std::string& name) {
  const BackendRegistration* e = find(name);
  return e != nullptr ? e->devices() : 0;
}

int currentDevice(const std::string& name) { return entryOf(name, "currentDevice").currentDevice(); }

BackendTraits backendTraits(const std::string& name) {
  const BackendRegistration* e = find(name);
  return e != nullptr ? e->traits : BackendTraits{};
}

void* allocateUserMemory(const std::string& name, size_t bytes) {
  return entryOf(name, "ncclMemAlloc").allocateUser(bytes);
}

void freeUserMemory(void* p) {
  if (p == nullptr) return;
#if defined(TUTTI_HAVE_CUDA)
  if (cuda::freeShareable(p)) return;
#endif
  std::free(p);
}

}  // namespace tutti::kern
