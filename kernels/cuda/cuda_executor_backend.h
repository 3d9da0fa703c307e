// The cuda backend's class (kernels/backend.h), shared by its two source files: cuda_backend.cpp
// (the device, its memory and what it can do) and cuda_submit.cpp (running launches).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/cuda/device_pool.h"
#include "kernels/cuda/executor_params.h"
#include "kernels/cuda/launch_tracker.h"

namespace tutti::kern::cuda {

// What the host and a communicator's kernels share: mapped host memory.
struct alignas(64) ControlWords {
  uint32_t abortWord;
  uint32_t pad[15];
  ExecFault fault;
  uint64_t directReads;  // messages the kernels read in place (tuttiCommZeroCopyReads)
};

class CudaBackend final : public ExecutorBackend {
 public:
  CudaBackend(const Driver& driver, const BackendOptions& options, const std::string& operation);
  ~CudaBackend() override;

  const char* name() const override { return d_->emulated ? "emulated" : "cuda"; }
  // The emulated driver's devices run any number of ranks side by side.
  bool ownsDevice() const override { return !d_->emulated; }
  std::string deviceBusId() const override { return busId_; }
  // A device whose memory is the host's (integrated, reaching pageable memory): host memory, which
  // ranks of one process read in each other's buffers.
  MemorySpace memorySpace() const override { return integrated_ ? MemorySpace::Host : MemorySpace::Device; }
  bool readsPeerBuffers() const override { return integrated_; }
  int workers() const override { return options_.workers; }

  void* allocate(size_t bytes, const std::string& what) override;
  void release(void* p) override;
  void copyIn(void* dst, const void* src, size_t bytes) override;
  void copyOut(void* dst, const void* src, size_t bytes) override;
  uint64_t loadWord(const uint64_t* word) override;
  void storeWord(uint64_t* word, uint64_t value) override;
  void copyAcross(void* dst, const void* src, size_t bytes) override;
  void* mapHostMemory(void* host, size_t bytes, const std::string& what) override;
  void unmapHostMemory(void* host) override;
  bool exportsMemory() const override { return true; }
  void* allocateExportable(size_t bytes, const std::string& what, ExportHandle* handle) override;
  void* importExported(const ExportHandle& handle, size_t bytes, const std::string& what) override;
  void releaseImported(void* p) override { release(p); }
  bool exportsDmaBuf() const override { return caps_.dmabuf; }
  DmaBufRange exportDmaBuf(void* p, size_t bytes, const std::string& what) override;
  bool exportsUserBuffers() const override { return true; }
  UserBufferExport exportUserBuffer(const void* p, size_t bytes, const std::string& what) override;
  uint64_t directReads() const override { return __atomic_load_n(&control_->directReads, __ATOMIC_RELAXED); }
  bool canAccessPeer(int device, int peer) const override;
  uint32_t residentWorkers() const override { return residentBlocks_; }

  std::string streamProblem(cudaStream_t stream) const override;
  std::string captureProblem(cudaStream_t stream) const override;
  std::string bufferProblem(const void* buffer, size_t bytes) const override;
  void submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) override;
  void synchronize(cudaStream_t stream) override;
  void enqueueCopy(cudaStream_t stream, void* dst, const void* src, size_t bytes) override;
  void enqueueHostJob(cudaStream_t stream, std::function<void()> job) override;
  ExecFault fault() const override;
  void abort() override { __atomic_store_n(&control_->abortWord, 1u, __ATOMIC_SEQ_CST); }

  // What the device can do, asked of the driver at init.
  struct Capabilities {
    bool vmm = false, posixFd = false, dmabuf = false, gdr = false;
  };
  const Capabilities& capabilities() const { return caps_; }
  // Device buffers its pool has allocated (launch arenas and tables), for tests.
  size_t pooledAllocations() { return pool_->allocated(); }

 private:
  struct Submission;
  void probeCapabilities(const std::string& where);
  void releaseContext();
  void enablePeerAccess(CUdevice peer);
  // This launch's control words as its kernels reach them: its own backend's.
  dev::ExecControl controlFor() const;
  // The launch's device arena: made and uploaded on its first run, in stream order (its scratch
  // too), reused after; from the pool of its own backend.
  CUdeviceptr arenaFor(Launch& launch, CUstream stream);
  // Queues the submission's kernel and its events; returns the events' pair.
  void queue(Submission& submission, CUstream stream);
  // The end of a submission: faults recorded on their launches, the launches told, `done` run.
  // Returns the first fault's error and the launch it belongs to (null when none failed).
  Launch* finish(Submission& submission, CUresult end, Error* first);

  const Driver* d_;
  BackendOptions options_;
  std::string busId_;  // the device's PCI bus id, normalised as the topology names GPUs
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  bool retainedPrimary_ = false;
  bool integrated_ = false;
  bool pageableAccess_ = false;  // the device reaches pageable host memory (HMM, ATS)
  Capabilities caps_;
  uint32_t residentBlocks_ = 0;  // thread blocks of the executor the device holds at once
  std::mutex peersMutex_;
  std::vector<CUdevice> peersRetained_;
  CUfunction function_ = nullptr;
  ControlWords* control_ = nullptr;
  CUdeviceptr controlDevice_ = 0;
  CUstream copies_ = nullptr;
  std::mutex freedMutex_;
  std::vector<CUdeviceptr> freed_;
  std::set<CUdeviceptr> ipcOpened_;  // peers' memory opened through legacy IPC handles (closed, not freed)
  std::unique_ptr<DevicePool> pool_;
  std::unique_ptr<LaunchTracker> tracker_;
};

}  // namespace tutti::kern::cuda
