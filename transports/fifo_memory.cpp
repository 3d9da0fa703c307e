// Host FIFO memory: anonymous pages, populated and touched once when allocated.
#include "transports/fifo_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/error.h"
#include "base/pages.h"

namespace tutti {
namespace {

class HostFifoMemory final : public FifoMemory {
 public:
  const char* name() const override { return "host"; }
  bool hostAccessible() const override { return true; }

  void* allocate(size_t bytes, const std::string& what) override {
    // Page-aligned and zero-filled by mmap; populated now, and each page written once from this
    // process, since on small virtual machines a first touch costs far more than the copy it
    // precedes (base/pages.h).
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (base == MAP_FAILED) throwSystemError(what + ": allocating " + std::to_string(bytes) + " bytes", errno);
    touchPages(base, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[base] = bytes;
    return base;
  }

  void release(void* memory) override {
    if (memory == nullptr) return;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = sizes_.find(memory);
      if (found == sizes_.end()) return;
      bytes = found->second;
      sizes_.erase(found);
    }
    munmap(memory, bytes);
  }

  void copyIn(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copyOut(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;  // munmap needs them
};

}  // namespace

std::shared_ptr<FifoMemory> hostFifoMemory() {
  // Never destroyed: FIFOs of communicators that outlive main() are released through it.
  static auto* memory = new std::shared_ptr<FifoMemory>(std::make_shared<HostFifoMemory>());
  return *memory;
}

}  // namespace tutti
