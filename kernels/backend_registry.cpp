// The executor backends by name: the one place that lists them (kernels/backend.h).
#include <string>

#include "kernels/backend.h"
#include "kernels/host_backend.h"
#include "base/error.h"
#if defined(TUTTI_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tutti::kern {

namespace {

std::unique_ptr<ExecutorBackend> makeCuda(const BackendOptions& options, const std::string& operation) {
#if defined(TUTTI_HAVE_CUDA)
  return cuda::makeCudaBackend(options, operation);
#else
  (void)options;
  throw Error(ErrorCode::InvalidUsage, operation + ": this library was built without CUDA (no nvcc at build time): the cuda device backend is not available");
#endif
}

struct Entry {
  const char* name;
  std::unique_ptr<ExecutorBackend> (*make)(const BackendOptions&, const std::string&);
  BackendTraits traits;  // what it makes answers
};

const Entry kBackends[] = {
    {"host", [](const BackendOptions& o, const std::string&) { return makeHostBackend(o); }, {0, true}},
    {"emulated", [](const BackendOptions& o, const std::string&) { return makeEmulatedBackend(o); }, {kDeviceLLBytes, false}},
    {"cuda", makeCuda, {kDeviceLLBytes, false}},
};

}  // namespace

std::unique_ptr<ExecutorBackend> makeExecutorBackend(const std::string& name, const BackendOptions& options, const std::string& operation) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e.make(options, operation);
  throw Error(ErrorCode::InvalidUsage, operation + ": unknown device backend \"" + name + "\" (host, emulated or cuda)");
}

BackendTraits backendTraits(const std::string& name) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e.traits;
  return BackendTraits{};
}

}  // namespace tutti::kern

namespace tutti::kern {

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
