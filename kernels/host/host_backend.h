// The host backend (kernels/backend.h): plain memory for FIFOs and scratch, host streams for
// asynchronous work, and the host executor on its worker threads. HostMemoryBackend holds what a
// backend whose memory and streams are the host's does; the host backend is the one.
#pragma once

#include <memory>
#include <span>

#include "kernels/backend.h"

namespace tutti::kern::host {

class HostMemoryBackend : public ExecutorBackend {
 public:
  explicit HostMemoryBackend(const BackendOptions& options) : options_(options) {}
  MemorySpace memorySpace() const override { return MemorySpace::Host; }
  bool readsPeerBuffers() const override { return true; }
  int workers() const override { return options_.workers; }
  void* allocate(size_t bytes, const std::string& what) override;
  void release(void* p) override;
  void copyIn(void* dst, const void* src, size_t bytes) override;
  void copyOut(void* dst, const void* src, size_t bytes) override;
  uint64_t loadWord(const uint64_t* word) override { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
  void storeWord(uint64_t* word, uint64_t value) override { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
  void copyAcross(void* dst, const void* src, size_t bytes) override;
  // Its memory is the host's: host memory is the executor's as it is, and every rank reaches every
  // other's; no device of its own.
  void* mapHostMemory(void* host, size_t, const std::string&) override { return host; }
  void unmapHostMemory(void*) override {}
  bool ownsDevice() const override { return false; }
  std::string deviceBusId() const override { return ""; }
  bool canAccessPeer(int, int) const override { return true; }
  // Host threads: no residency limit, direct reads counted by the workers, faults thrown, any
  // buffer usable, and host streams are never captured into a CUDA graph.
  uint32_t residentWorkers() const override { return 0; }
  uint64_t directReads() const override { return 0; }
  ExecFault fault() const override { return ExecFault{}; }
  std::string bufferProblem(const void*, size_t) const override { return ""; }
  std::string captureProblem(cudaStream_t) const override { return ""; }
  std::string streamProblem(cudaStream_t stream) const override;
  void submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) override;
  void synchronize(cudaStream_t stream) override;
  void enqueueCopy(cudaStream_t stream, void* dst, const void* src, size_t bytes) override;
  void enqueueHostJob(cudaStream_t stream, std::function<void()> job) override;

 protected:
  // Runs the launches to completion on the calling thread (and the backend's workers); throws the
  // first failure through its launch's raise().
  virtual void run(std::span<Launch* const> launches) = 0;
  // For run(): the launches' beforeRun and prologue copies when made, their afterRun when gone
  // (also when a launch fails).
  class RunScope {
   public:
    explicit RunScope(std::span<Launch* const> launches);
    ~RunScope();
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    std::span<Launch* const> launches_;
  };
  BackendOptions options_;
};

// Host buffers and the host executor (kernels/host/host_executor.h) on a pool of worker threads.
std::unique_ptr<ExecutorBackend> makeHostBackend(const BackendOptions& options);

}  // namespace tutti::kern::host
