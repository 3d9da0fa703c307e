// The communicator's scratch memory: blocks that launches take while they run and give back,
// so that plans' scratch chunks reuse pages already touched instead of fresh ones per call.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace tutti {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
  struct Free {
    void operator()(void* p) const;
  };
  using Memory = std::unique_ptr<char, Free>;

 public:
  // A block held by one launch; returned to the pool when the lease ends. It keeps the pool
  // alive, so a launch may outlive its communicator's handle.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&&) = default;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    char* data() const { return memory_.get(); }
    void release();

   private:
    friend class ScratchPool;
    std::shared_ptr<ScratchPool> pool_;
    Memory memory_;
    size_t bytes_ = 0;
  };

  // A block of at least `bytes`: a returned one when one is large enough, else a new one (which
  // then replaces the largest returned block, so the pool holds about as many blocks as
  // launches ever ran at once). Must be owned by a shared_ptr. Throws tutti::Error on ENOMEM.
  Lease take(size_t bytes);

  // Frees the blocks no launch holds (ncclCommSuspend); taken ones stay. Returns the bytes freed.
  size_t releaseIdle();

  size_t blocks() const;      // blocks held now (taken or not)
  size_t totalBytes() const;  // their size

 private:
  void give(Memory memory, size_t bytes);

  mutable std::mutex mutex_;
  std::vector<std::pair<size_t, Memory>> free_;  // (bytes, memory)
  size_t blocks_ = 0, totalBytes_ = 0;
};

}  // namespace tutti
