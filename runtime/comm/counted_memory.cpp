// The FIFO memory that counts what a communicator holds (counted_memory.h).
#include "runtime/comm/counted_memory.h"

namespace tutti {

uint64_t CountedMemory::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void CountedMemory::add(std::map<const void*, size_t>& held, const void* p, size_t bytes) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto [at, inserted] = held.emplace(p, bytes);
  if (!inserted) {  // mapped again: count the larger extent once
    if (bytes <= at->second) return;
    bytes_ -= at->second;
    at->second = bytes;
  }
  bytes_ += bytes;
}

void CountedMemory::remove(std::map<const void*, size_t>& held, const void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto at = held.find(p);
  if (at == held.end()) return;
  bytes_ -= at->second;
  held.erase(at);
}

void* CountedMemory::allocate(size_t bytes, const std::string& what) {
  void* p = memory_->allocate(bytes, what);
  add(allocated_, p, bytes);
  return p;
}

void* CountedMemory::allocateExportable(size_t bytes, const std::string& what, kern::ExportHandle* handle) {
  void* p = memory_->allocateExportable(bytes, what, handle);
  add(allocated_, p, bytes);
  return p;
}

void CountedMemory::release(void* p) {
  remove(allocated_, p);
  memory_->release(p);
}

void* CountedMemory::mapHostMemory(void* host, size_t bytes, const std::string& what) {
  void* mapped = memory_->mapHostMemory(host, bytes, what);
  add(mapped_, host, bytes);
  return mapped;
}

void CountedMemory::unmapHostMemory(void* host) {
  remove(mapped_, host);
  memory_->unmapHostMemory(host);
}

}  // namespace tutti
