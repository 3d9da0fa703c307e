// The memory a communicator's FIFOs live in, behind an allocator: host memory, or device memory
// once a communicator runs on a device backend (init points the communicator's fifoMemory at the
// backend's memory, kern::DeviceMemory, and never at its executor).
//
// The host may be unable to touch such memory, so the memory transports never assume it can:
// they build a FIFO's header on the host and copy it in, read a peer's header by copying it out,
// and keep their own handshakes (has the sender attached?) in host memory beside the FIFO.
// Transports whose FIFOs must be host memory (shm shares a segment with another process, the net
// proxy sends from it) keep them there and map them for the executor (mapHost): a GPU then
// reads and writes them over the bus, as NCCL's shared-memory and network transports do without
// peer access or GPUDirect.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/export_handle.h"

namespace tutti {

class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  virtual const char* name() const = 0;  // "host", for messages
  // Whether host code may read and write the memory directly.
  virtual bool hostAccessible() const = 0;
  // Zero-filled memory of `bytes`, aligned to kern::kFifoSlotAlign and ready for use (paid for
  // now, not on the hot path). `what` names it in errors. Throws tutti::Error.
  virtual void* allocate(size_t bytes, const std::string& what) = 0;
  virtual void release(void* memory) = 0;
  // Host memory into FIFO memory, and back.
  virtual void copyIn(void* dst, const void* src, size_t bytes) = 0;
  virtual void copyOut(void* dst, const void* src, size_t bytes) = 0;
  // A FIFO counter the executor reads or writes at the same time (kern::DeviceMemory::loadWord):
  // acquire and release on host memory, 8-byte copies where the host cannot touch it.
  virtual uint64_t loadWord(const uint64_t* word) = 0;
  virtual void storeWord(uint64_t* word, uint64_t value) = 0;
  // Between two ranges the executor reaches (its own memory, or a peer's from importExported): the
  // copy engine on a GPU (kern::DeviceMemory::copyAcross). Host memory: a plain copy.
  virtual void copyAcross(void* dst, const void* src, size_t bytes);
  // Host memory (page-aligned, outliving the mapping) as the executor of this memory reaches it:
  // the address the executor uses. unmapHost(host) ends the mapping. Host memory: itself.
  virtual void* mapHost(void* host, size_t bytes, const std::string& what) = 0;
  virtual void unmapHost(void* host) = 0;
  // Memory another process of this host maps (CUDA IPC: kern::DeviceMemory::allocateExportable):
  // the p2p transport's FIFOs. allocateExportable fills *handle; release() frees.
  virtual bool exportable() const { return false; }
  virtual void* allocateExportable(size_t bytes, const std::string& what, kern::ExportHandle* handle);
  virtual void* importExported(const kern::ExportHandle& handle, size_t bytes, const std::string& what);
  virtual void releaseImported(void* memory) {}
  // Memory from allocateExportable as a dmabuf a NIC registers (kern::DeviceMemory::exportDmaBuf).
  virtual bool exportsDmaBuf() const { return false; }
  virtual kern::DmaBufRange exportDmaBuf(void* memory, size_t bytes, const std::string& what);
};

// A FIFO in host memory that the executor reaches through FifoMemory::mapHost: the host's
// address for the transport's own use, the executor's for the connection. Unmaps when destroyed;
// the memory itself stays its owner's.
class HostMapping {
 public:
  HostMapping() = default;
  HostMapping(std::shared_ptr<FifoMemory> memory, void* host, size_t bytes, const std::string& what)
      : memory_(std::move(memory)), host_(host), executor_(memory_->mapHost(host, bytes, what)) {}
  ~HostMapping() {
    if (memory_) memory_->unmapHost(host_);
  }
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;
  void* host() const { return host_; }
  void* executor() const { return executor_; }

 private:
  std::shared_ptr<FifoMemory> memory_;
  void* host_ = nullptr;
  void* executor_ = nullptr;
};

// Plain host memory: anonymous pages, populated and touched when allocated (base/pages.h).
// Stateless apart from its record of sizes, and shared by every communicator of the process.
std::shared_ptr<FifoMemory> hostFifoMemory();

}  // namespace tutti
