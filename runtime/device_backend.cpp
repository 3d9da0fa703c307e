// Choosing a communicator's device backend (device_backend.h): TUTTI_DEVICE, and with auto the
// cuda backend where the CUDA driver reports a device, else the host backend.
#include "runtime/device_backend.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"
#if defined(TUTTI_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tutti {

int cudaDeviceCount() {
#if defined(TUTTI_HAVE_CUDA)
  static const int count = kern::cuda::deviceCount();
  return count;
#else
  return 0;
#endif
}

int currentDevice(const std::string& backend) {
#if defined(TUTTI_HAVE_CUDA)
  if (backend == "cuda") return kern::cuda::currentDevice();
#endif
  // An emulated device has no cudaSetDevice: a variable plays it, so that rank processes of one host
  // can take devices of their own (and their bus ids, TUTTI_EMULATED_BUS_IDS).
  if (backend == "emulated") return int(std::max<int64_t>(0, tunables::kEmulatedDevice.get()));
  return 0;
}

std::string chooseDeviceBackend(const char* operation) {
  std::string wanted;
  try {
    wanted = tunables::kDevice.get();
  } catch (const Error& error) {
    throw Error(error.code(), std::string(operation) + ": " + error.message());
  }
  // TUTTI_DEVICE's own check knows the names; makeExecutorBackend (kernels/backend_registry.cpp)
  // is the one list of backends.
  if (wanted != "auto") return wanted;
  return cudaDeviceCount() > 0 ? "cuda" : "host";
}

}  // namespace tutti
