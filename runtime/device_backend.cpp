// Device backend choice. Only the host backend exists so far; a machine with a usable CUDA
// device must ask for it explicitly, so that device pointers are never treated as host memory.
#include "runtime/device_backend.h"

#include <dlfcn.h>

#include <mutex>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"

namespace tutti {

int cudaDeviceCount() {
  static int count = [] {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!driver) return 0;
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
    auto getCount = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
    int n = 0;
    if (!init || !getCount || init(0) != 0 || getCount(&n) != 0) n = 0;
    return n;  // the driver stays loaded: unloading it under a CUDA application is unsafe
  }();
  return count;
}

std::string chooseDeviceBackend(const char* operation) {
  std::string wanted;
  try {
    wanted = tunables::kDevice.get();
  } catch (const Error& error) {
    throw Error(error.code(), std::string(operation) + ": " + error.message());
  }
  if (wanted == "host") return "host";
  if (wanted == "cuda")
    throw Error(ErrorCode::InvalidUsage, std::string(operation) +
                                             ": TUTTI_DEVICE=cuda: the CUDA device backend is not implemented yet; TUTTI_DEVICE=host runs on host buffers");
  if (wanted == "emulated")
    throw Error(ErrorCode::InvalidUsage, std::string(operation) +
                                             ": TUTTI_DEVICE=emulated: the emulated device backend is not implemented yet; TUTTI_DEVICE=host runs on host buffers");
  if (cudaDeviceCount() > 0)
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": this machine has " + std::to_string(cudaDeviceCount()) +
                                             " CUDA device(s) but the CUDA device backend is not implemented yet; set TUTTI_DEVICE=host to run "
                                             "on host buffers (device pointers would then be invalid)");
  return "host";
}

}  // namespace tutti
