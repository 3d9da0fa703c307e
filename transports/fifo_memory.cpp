// Host FIFO memory: anonymous pages, populated and touched once when allocated, up to a budget
// per process.
#include "transports/fifo_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/error.h"
#include "base/pages.h"

namespace tutti::transport {
namespace {

// FIFOs a process populates and touches when it makes them; past this they are faulted in by
// their first use. Touching costs about 5 us a page on small virtual machines (base/pages.h):
// worth it for the FIFOs of a few dozen ranks, whose first collectives would pay it, but a
// thousand ranks as threads hold 8 GiB of ring FIFOs, ten seconds of touching for pages that
// small collectives never reach.
constexpr size_t kPrefaultBudgetBytes = size_t(512) << 20;

class HostFifoMemory final : public kern::DeviceMemory {
 public:
  const char* name() const override { return "host"; }
  kern::MemorySpace memorySpace() const override { return kern::MemorySpace::Host; }

  void* allocate(size_t bytes, const std::string& what) override {
    // Page-aligned and zero-filled by mmap; within the budget populated now, and each page written
    // once from this process, since on small virtual machines a first touch costs far more than
    // the copy it precedes (base/pages.h).
    bool prefault = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (prefaulted_ + bytes <= kPrefaultBudgetBytes) {
        prefault = true;
        prefaulted_ += bytes;
      }
    }
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | (prefault ? MAP_POPULATE : 0), -1, 0);
    if (base == MAP_FAILED) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (prefault) prefaulted_ -= bytes;
      throwSystemError(what + ": allocating " + std::to_string(bytes) + " bytes", errno);
    }
    if (prefault) touchPages(base, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_[base] = Allocation{bytes, prefault};
    return base;
  }

  void release(void* memory) override {
    if (memory == nullptr) return;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = allocations_.find(memory);
      if (found == allocations_.end()) return;
      bytes = found->second.bytes;
      if (found->second.prefaulted) prefaulted_ -= bytes;
      allocations_.erase(found);
    }
    munmap(memory, bytes);
  }

  void copyIn(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copyOut(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  uint64_t loadWord(const uint64_t* word) override { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
  void storeWord(uint64_t* word, uint64_t value) override { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
  void copyAcross(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void* mapHostMemory(void* host, size_t, const std::string&) override { return host; }
  void unmapHostMemory(void*) override {}

 private:
  struct Allocation {
    size_t bytes;  // munmap needs them
    bool prefaulted;
  };
  std::mutex mutex_;
  std::unordered_map<void*, Allocation> allocations_;
  size_t prefaulted_ = 0;  // bytes of live FIFOs populated when made
};

}  // namespace

std::shared_ptr<kern::DeviceMemory> hostFifoMemory() {
  // Never destroyed: FIFOs of communicators that outlive main() are released through it.
  static auto* memory = new std::shared_ptr<kern::DeviceMemory>(std::make_shared<HostFifoMemory>());
  return *memory;
}

}  // namespace tutti::transport
