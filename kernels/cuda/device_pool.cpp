// Device memory a cuda backend reuses from launch to launch (device_pool.h).
#include "kernels/cuda/device_pool.h"

#include <bit>

namespace tutti::kern::cuda {

DevicePool::~DevicePool() {
  ContextScope scope(d_, context_);
  for (CUdeviceptr p : all_) d_.cuMemFree(p);
}

DevicePool::Buffer DevicePool::take(size_t bytes, const std::string& what) {
  const size_t capacity = std::bit_ceil(std::max(bytes, kSmallest));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = idle_.find(capacity);
    if (found != idle_.end()) {
      Buffer b{found->second, capacity};
      idle_.erase(found);
      return b;
    }
  }
  ContextScope scope(d_, context_);
  CUdeviceptr p = 0;
  check(d_, d_.cuMemAlloc(&p, capacity), "cuMemAlloc",
        what + " (" + std::to_string(capacity) + " bytes of device memory)");
  std::lock_guard<std::mutex> lock(mutex_);
  all_.push_back(p);
  return Buffer{p, capacity};
}

void DevicePool::giveBack(Buffer buffer) {
  if (buffer.ptr == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.emplace(buffer.bytes, buffer.ptr);
}

size_t DevicePool::allocated() {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_.size();
}

}  // namespace tutti::kern::cuda
