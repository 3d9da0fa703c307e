// Loading the CUDA driver at run time (cuda_driver.h).
#include "perf/sweep/cuda_driver.h"

#include <dlfcn.h>

#include <cstdint>
#include <type_traits>

#include "perf/sweep/error.h"

namespace tutti::perf::cuda {
namespace {

// The ABI asked of cuGetProcAddress: CUDA 12.0's, which every driver from then on serves.
constexpr int kDriverAbi = 12000;

using GetProcAddress = Result (*)(const char* symbol, void** function, int cudaVersion, uint64_t flags, int* status);

}  // namespace

std::unique_ptr<const Driver> loadDriver(const char* library, std::string* why) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    *why = std::string("no CUDA driver (") + (error ? error : library) + ")";
    return nullptr;
  }
  auto getProc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  if (getProc == nullptr) {
    *why = std::string("the CUDA driver ") + library + " is older than CUDA 12 (no cuGetProcAddress_v2)";
    return nullptr;
  }
  auto d = std::make_unique<Driver>();
  std::string missing;
  auto entry = [&](const char* name, auto& function) {
    void* address = nullptr;
    int status = 0;
    if (getProc(name, &address, kDriverAbi, 0, &status) != kSuccess || address == nullptr)
      missing += std::string(missing.empty() ? "" : ", ") + name;
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
  entry("cuInit", d->cuInit);
  entry("cuDriverGetVersion", d->cuDriverGetVersion);
  entry("cuGetErrorString", d->cuGetErrorString);
  entry("cuDeviceGetCount", d->cuDeviceGetCount);
  entry("cuDeviceGet", d->cuDeviceGet);
  entry("cuDeviceGetName", d->cuDeviceGetName);
  entry("cuDeviceGetPCIBusId", d->cuDeviceGetPCIBusId);
  entry("cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain);
  entry("cuDevicePrimaryCtxRelease", d->cuDevicePrimaryCtxRelease);
  entry("cuCtxSetCurrent", d->cuCtxSetCurrent);
  entry("cuStreamCreate", d->cuStreamCreate);
  entry("cuStreamDestroy", d->cuStreamDestroy);
  entry("cuStreamSynchronize", d->cuStreamSynchronize);
  entry("cuMemAlloc", d->cuMemAlloc);
  entry("cuMemFree", d->cuMemFree);
  entry("cuMemcpyHtoDAsync", d->cuMemcpyHtoDAsync);
  entry("cuMemcpyDtoHAsync", d->cuMemcpyDtoHAsync);
  entry("cuMemsetD8Async", d->cuMemsetD8Async);
  entry("cuEventCreate", d->cuEventCreate);
  entry("cuEventDestroy", d->cuEventDestroy);
  entry("cuEventRecord", d->cuEventRecord);
  entry("cuEventSynchronize", d->cuEventSynchronize);
  entry("cuEventElapsedTime", d->cuEventElapsedTime);
  entry("cuStreamBeginCapture", d->cuStreamBeginCapture);
  entry("cuStreamEndCapture", d->cuStreamEndCapture);
  entry("cuGraphInstantiateWithFlags", d->cuGraphInstantiateWithFlags);
  entry("cuGraphLaunch", d->cuGraphLaunch);
  entry("cuGraphExecDestroy", d->cuGraphExecDestroy);
  entry("cuGraphDestroy", d->cuGraphDestroy);
  if (!missing.empty()) {
    *why = std::string("the CUDA driver ") + library + " lacks " + missing;
    return nullptr;
  }
  if (Result r = d->cuInit(0); r != kSuccess) {
    const char* text = nullptr;
    d->cuGetErrorString(r, &text);
    *why = "cuInit failed: " + std::string(text ? text : "unknown error") + " (CUresult " + std::to_string(r) + ")";
    return nullptr;
  }
  d->cuDriverGetVersion(&d->version);
  d->cuDeviceGetCount(&d->deviceCount);
  return d;
}

const Driver* driver(std::string* why) {
  static std::string failure;
  static const std::unique_ptr<const Driver> loaded = loadDriver("libcuda.so.1", &failure);
  if (why != nullptr) *why = failure;
  return loaded.get();
}

std::string versionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

void check(const Driver& d, Result result, int rank, const std::string& call) {
  if (result == kSuccess) return;
  const char* text = nullptr;
  d.cuGetErrorString(result, &text);
  throw Error(ErrorCode::System, "rank " + std::to_string(rank) + ": " + call + ": " + (text ? text : "unknown error") +
                                     " (CUresult " + std::to_string(result) + ")");
}

}  // namespace tutti::perf::cuda
