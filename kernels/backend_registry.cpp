// The executor backends by name: the one place that lists them (kernels/backend.h).
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/host_backend.h"
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

std::unique_ptr<ExecutorBackend> makeDeviceBackend(const std::string& name, const BackendOptions& options, const std::string& operation) {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::makeCudaBackend(driverFor(name, operation), options, operation);
#else
  (void)options;
  throw Error(ErrorCode::InvalidUsage, operation + ": this library was built without CUDA (no CUDA toolkit at build time): the " + name +
                                           " device backend is not available");
#endif
}

void* allocateDeviceMemory(const std::string& name, size_t bytes) {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::allocateShareable(driverFor(name, "ncclMemAlloc"), bytes);
#else
  (void)bytes;
  throw Error(ErrorCode::InvalidUsage, "ncclMemAlloc: this library was built without CUDA: the " + name + " device backend is not available");
#endif
}

void* allocateHostMemory(const std::string&, size_t bytes) {
  void* p = nullptr;
  if (int err = posix_memalign(&p, 4096, bytes)) throwSystemError("ncclMemAlloc: " + std::to_string(bytes) + " bytes", err);
  return p;
}

struct Entry {
  const char* name;
  std::unique_ptr<ExecutorBackend> (*make)(const std::string&, const BackendOptions&, const std::string&);
  void* (*allocateUser)(const std::string&, size_t);
  BackendTraits traits;  // what it makes answers
};

const Entry kBackends[] = {
    {"host", [](const std::string&, const BackendOptions& o, const std::string&) { return makeHostBackend(o); }, allocateHostMemory, {0, true, 2}},
    {"emulated", makeDeviceBackend, allocateDeviceMemory, {kDeviceLLBytes, false, 2}},
    {"cuda", makeDeviceBackend, allocateDeviceMemory, {kDeviceLLBytes, false, 16}},
};

const Entry& entryOf(const std::string& name, const std::string& operation) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e;
  throw Error(ErrorCode::InvalidUsage, operation + ": unknown device backend \"" + name + "\" (host, emulated or cuda)");
}

}  // namespace

std::unique_ptr<ExecutorBackend> makeExecutorBackend(const std::string& name, const BackendOptions& options, const std::string& operation) {
  return entryOf(name, operation).make(name, options, operation);
}

BackendTraits backendTraits(const std::string& name) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e.traits;
  return BackendTraits{};
}

void* allocateUserMemory(const std::string& name, size_t bytes) { return entryOf(name, "ncclMemAlloc").allocateUser(name, bytes); }

void freeUserMemory(void* p) {
  if (p == nullptr) return;
#if defined(TUTTI_HAVE_CUDA)
  if (cuda::freeShareable(p)) return;
#endif
  std::free(p);
}

void* ExecutorBackend::allocateExportable(size_t, const std::string& what, ExportHandle*) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot share its memory with other processes");
}

DmaBufRange ExecutorBackend::exportDmaBuf(void*, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot export its memory as a dmabuf");
}

UserBufferExport ExecutorBackend::exportUserBuffer(const void*, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot share user buffers with other processes");
}

void* ExecutorBackend::importExported(const ExportHandle&, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot map another process's memory");
}

}  // namespace tutti::kern
