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
  size_t llBytes;  // ExecutorBackend::llBytes of what it makes
};

const Entry kBackends[] = {
    {"host", [](const BackendOptions& o, const std::string&) { return makeHostBackend(o); }, 0},
    {"emulated", [](const BackendOptions& o, const std::string&) { return makeEmulatedBackend(o); }, kDeviceLLBytes},
    {"cuda", makeCuda, kDeviceLLBytes},
};

}  // namespace

std::unique_ptr<ExecutorBackend> makeExecutorBackend(const std::string& name, const BackendOptions& options, const std::string& operation) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e.make(options, operation);
  throw Error(ErrorCode::InvalidUsage, operation + ": unknown device backend \"" + name + "\" (host, emulated or cuda)");
}

size_t backendLLBytes(const std::string& name) {
  for (const Entry& e : kBackends)
    if (name == e.name) return e.llBytes;
  return 0;
}

}  // namespace tutti::kern
