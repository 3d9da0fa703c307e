// A communicator's view of the memory its FIFOs live in: every call goes to the memory beneath,
// and the bytes this communicator's transports allocated or mapped there and still hold are
// counted, for ncclCommMemStats (runtime/comm/comm_suspend.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kernels/device_memory.h"

namespace tutti {

// What it counts: allocate and allocateExportable until release, and host memory mapped for the
// executor (a shm segment, a net proxy's FIFOs) until unmapped, each at the size asked for. A
// peer's memory imported here is the peer's and is not counted. A FIFO between two ranks of one
// process lives in the receiver's memory, so it counts there, until the later of its two ends is
// gone (this object then outlives the communicator, as the memory does).
class CountedMemory final : public kern::DeviceMemory {
 public:
  explicit CountedMemory(std::shared_ptr<kern::DeviceMemory> memory) : memory_(std::move(memory)) {}

  // Bytes held now.
  uint64_t bytes() const;

  const char* name() const override { return memory_->name(); }
  kern::MemorySpace memorySpace() const override { return memory_->memorySpace(); }
  void* allocate(size_t bytes, const std::string& what) override;
  void release(void* p) override;
  void copyIn(void* dst, const void* src, size_t bytes) override { memory_->copyIn(dst, src, bytes); }
  void copyOut(void* dst, const void* src, size_t bytes) override { memory_->copyOut(dst, src, bytes); }
  uint64_t loadWord(const uint64_t* word) override { return memory_->loadWord(word); }
  void storeWord(uint64_t* word, uint64_t value) override { memory_->storeWord(word, value); }
  void copyAcross(void* dst, const void* src, size_t bytes) override { memory_->copyAcross(dst, src, bytes); }
  void* mapHostMemory(void* host, size_t bytes, const std::string& what) override;
  void unmapHostMemory(void* host) override;
  bool exportsMemory() const override { return memory_->exportsMemory(); }
  void* allocateExportable(size_t bytes, const std::string& what, kern::ExportHandle* handle) override;
  void* importExported(const kern::ExportHandle& handle, size_t bytes, const std::string& what) override {
    return memory_->importExported(handle, bytes, what);
  }
  void releaseImported(void* p) override { memory_->releaseImported(p); }
  bool exportsDmaBuf() const override { return memory_->exportsDmaBuf(); }
  kern::DmaBufRange exportDmaBuf(void* p, size_t bytes, const std::string& what) override {
    return memory_->exportDmaBuf(p, bytes, what);
  }
  bool exportsUserBuffers() const override { return memory_->exportsUserBuffers(); }
  kern::UserBufferExport exportUserBuffer(const void* p, size_t bytes, const std::string& what) override {
    return memory_->exportUserBuffer(p, bytes, what);
  }

 private:
  void add(std::map<const void*, size_t>& held, const void* p, size_t bytes);
  void remove(std::map<const void*, size_t>& held, const void* p);

  std::shared_ptr<kern::DeviceMemory> memory_;
  mutable std::mutex mutex_;
  std::map<const void*, size_t> allocated_, mapped_;
  uint64_t bytes_ = 0;
};

}  // namespace tutti
