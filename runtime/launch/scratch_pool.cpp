// The scratch pool (see scratch_pool.h).
#include "runtime/launch/scratch_pool.h"

#include <cerrno>
#include <cstdlib>

#include "base/error.h"

namespace tutti {

namespace {
constexpr size_t kScratchAlign = 4096;
}

void ScratchPool::Free::operator()(void* p) const { std::free(p); }

ScratchPool::Lease& ScratchPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    memory_ = std::move(other.memory_);
    bytes_ = other.bytes_;
  }
  return *this;
}

void ScratchPool::Lease::release() {
  if (pool_ && memory_) pool_->give(std::move(memory_), bytes_);
  pool_.reset();
  memory_.reset();
}

ScratchPool::Lease ScratchPool::take(size_t bytes) {
  Lease lease;
  lease.pool_ = shared_from_this();
  std::lock_guard<std::mutex> lock(mutex_);
  // The smallest free block that fits.
  const size_t none = free_.size();
  size_t best = none, largest = none;
  for (size_t i = 0; i < free_.size(); i++) {
    if (free_[i].first >= bytes && (best == none || free_[i].first < free_[best].first)) best = i;
    if (largest == none || free_[i].first > free_[largest].first) largest = i;
  }
  if (best != none) {
    lease.bytes_ = free_[best].first;
    lease.memory_ = std::move(free_[best].second);
    free_.erase(free_.begin() + std::ptrdiff_t(best));
    return lease;
  }
  if (largest != none) {
    blocks_--;
    totalBytes_ -= free_[largest].first;
    free_.erase(free_.begin() + std::ptrdiff_t(largest));
  }
  size_t rounded = (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  void* p = std::aligned_alloc(kScratchAlign, rounded);
  if (p == nullptr) throwSystemError("scratch memory of " + std::to_string(rounded) + " bytes", ENOMEM);
  lease.memory_.reset(static_cast<char*>(p));
  lease.bytes_ = rounded;
  blocks_++;
  totalBytes_ += rounded;
  return lease;
}

void ScratchPool::give(Memory memory, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace_back(bytes, std::move(memory));
}

size_t ScratchPool::releaseIdle() {
  std::vector<std::pair<size_t, Memory>> freed;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    freed.swap(free_);
    for (auto& [size, memory] : freed) bytes += size;
    blocks_ -= freed.size();
    totalBytes_ -= bytes;
  }
  return bytes;  // the blocks are freed here, outside the lock
}

size_t ScratchPool::blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_;
}

size_t ScratchPool::totalBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return totalBytes_;
}

}  // namespace tutti
