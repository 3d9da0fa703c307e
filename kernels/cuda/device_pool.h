// Device memory a cuda backend reuses from launch to launch (device_pool.cpp): the device copies of
// launches' work arenas and the launch tables of large groups. Every grouped call binds a new
// launch, so taking fresh memory for each would grow without bound and cost an allocation per
// call; a buffer goes back to the pool once the launch that used it has ended, and the next launch
// of its size class takes it. Freed with the pool (cuMemFree waits for the whole device, where
// other ranks' kernels may wait for this thread).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_driver.h"

namespace tutti::kern::cuda {

class DevicePool {
 public:
  struct Buffer {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;  // its capacity: a power of two, at least kSmallest
  };
  static constexpr size_t kSmallest = 4096;

  DevicePool(const Driver& driver, CUcontext context) : d_(driver), context_(context) {}
  ~DevicePool();  // the caller's launches that used its buffers have ended
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A buffer of at least `bytes`; throws Error (System) naming `what` when none can be had.
  Buffer take(size_t bytes, const std::string& what);
  void giveBack(Buffer buffer);
  // Buffers the pool has allocated, idle or in use.
  size_t allocated();

 private:
  const Driver& d_;
  CUcontext context_;
  std::mutex mutex_;
  std::multimap<size_t, CUdeviceptr> idle_;  // by capacity
  std::vector<CUdeviceptr> all_;
};

}  // namespace tutti::kern::cuda
