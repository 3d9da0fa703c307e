// A rank's GPU (rank_gpu.h) and the backend tutti will choose.
#include "perf/sweep/rank_gpu.h"

namespace tutti::perf {

std::string expectedBackend(const char* tuttiDevice, const cuda::Driver* driver) {
  std::string wanted = tuttiDevice ? tuttiDevice : "auto";
  if (wanted == "host" || wanted == "emulated" || wanted == "cuda") return wanted;
  return driver != nullptr && driver->deviceCount > 0 ? "cuda" : "host";
}

RankGpu::RankGpu(const cuda::Driver& driver, int ordinal, int rank) : driver_(driver), ordinal_(ordinal), rank_(rank) {
  std::string device = "CUDA device " + std::to_string(ordinal);
  cuda::check(driver_, driver_.cuDeviceGet(&device_, ordinal), rank, "cuDeviceGet (" + device + ")");
  char text[256] = {};
  if (driver_.cuDeviceGetName(text, sizeof text - 1, device_) == cuda::kSuccess) name_ = text;
  char busId[32] = {};
  if (driver_.cuDeviceGetPCIBusId(busId, sizeof busId - 1, device_) == cuda::kSuccess) pciBusId_ = busId;
  cuda::check(driver_, driver_.cuDevicePrimaryCtxRetain(&context_, device_), rank,
              "cuDevicePrimaryCtxRetain (" + device + ")");
  try {
    makeCurrent();
  } catch (...) {
    driver_.cuDevicePrimaryCtxRelease(device_);
    throw;
  }
}

RankGpu::~RankGpu() {
  if (context_) driver_.cuDevicePrimaryCtxRelease(device_);
}

void RankGpu::makeCurrent() const { cuda::check(driver_, driver_.cuCtxSetCurrent(context_), rank_, "cuCtxSetCurrent"); }

}  // namespace tutti::perf
