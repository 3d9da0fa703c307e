// Device memory: the face of an executor backend (kernels/backend.h) that says where its buffers
// live and how the host reaches them: allocate, copy, map host memory for the executor, and share
// memory with other processes of the host. Code that only allocates or copies (the transports'
// FIFOs, peer buffers, plan and scratch copies) takes this interface and never sees the executor
// that runs launches. Besides the backends, the transports' host FIFO memory implements it
// (transports/fifo_memory.h).
//
// Defaults: a method that states a fact about the memory (where it is, how a word is read, whether
// host memory needs mapping) has none: each implementation states it. The only
// defaults are the answers of a backend that lacks a capability: it does not export memory, dmabufs
// or user buffers (false, and the calls throw Error (InvalidUsage) naming the backend), and so has
// nothing imported to unmap. They are right for every backend that does not override them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/export_handle.h"

namespace tutti::kern {

// Where an executor's memory is.
enum class MemorySpace : uint8_t { Host, Device };

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // The backend's name, for messages.
  virtual const char* name() const = 0;
  // Where user buffers, FIFOs and scratch live for this backend.
  virtual MemorySpace memorySpace() const = 0;

  // Memory for FIFOs and scratch, zero-filled and aligned for a FIFO (kern::kFifoSlotAlign): device
  // memory on device backends. Throws Error (System) naming `what`.
  virtual void* allocate(size_t bytes, const std::string& what) = 0;
  virtual void release(void* p) = 0;
  // Synchronous copies between host memory and this backend's memory.
  virtual void copyIn(void* dst, const void* src, size_t bytes) = 0;
  virtual void copyOut(void* dst, const void* src, size_t bytes) = 0;
  // One FIFO counter (a head or a tail) of this backend's memory that an executor reads or writes
  // at the same time, from a host thread: an acquire load and a release store where the memory is
  // the host's (so the words are never torn and what they publish is ordered), synchronous 8-byte
  // copies (copyOut, copyIn) otherwise.
  virtual uint64_t loadWord(const uint64_t* word) = 0;
  virtual void storeWord(uint64_t* word, uint64_t value) = 0;
  // A synchronous copy between two ranges the executor reaches (its own memory, or a peer's mapped
  // by importExported), issued from a host thread: by the copy engine on cuda (cuMemcpyAsync on the
  // backend's copy stream, waited for), a plain copy where the memory is the host's. The p2p
  // transport's copies under NCCL_P2P_USE_CUDA_MEMCPY. Throws Error naming the operation.
  virtual void copyAcross(void* dst, const void* src, size_t bytes) = 0;
  // Host memory that this backend's executor must reach where its own memory is not the host's:
  // a shared segment that carries FIFOs between processes, a network proxy's FIFOs. Returns the
  // address the executor uses for it (the cuda backend pins and maps it for the device; backends
  // whose memory is the host's return `host` itself). `host` is page-aligned and outlives the
  // mapping; unmapHostMemory(`host`) ends it, after the last launch that may touch it. Throws Error
  // naming `what` where the memory cannot be mapped.
  virtual void* mapHostMemory(void* host, size_t bytes, const std::string& what) = 0;
  virtual void unmapHostMemory(void* host) = 0;

  // Memory another process of this host can map (CUDA IPC): FIFOs of the p2p transport, in the
  // receiver's memory. allocateExportable returns the executor's address and fills *handle;
  // release() frees it. importExported maps a peer's allocation from its handle; releaseImported
  // unmaps it. Default: cannot share (false; the calls throw Error (InvalidUsage) naming `what`;
  // nothing imported, so releaseImported does nothing).
  virtual bool exportsMemory() const { return false; }
  virtual void* allocateExportable(size_t bytes, const std::string& what, ExportHandle* handle);
  virtual void* importExported(const ExportHandle& handle, size_t bytes, const std::string& what);
  virtual void releaseImported(void* p) {}
  // GPUDirect RDMA: [p, p + bytes) of memory from allocateExportable() as a dmabuf a NIC can
  // register (net::NetRecvComm::registerDmaBuf). cuda: cuMemGetHandleForAddressRange where the
  // driver and device have it; emulated with device memory: its memfd and the offset in it; host:
  // not applicable (its memory is the host's: registered as it is). Default: cannot (false; the
  // call throws Error (InvalidUsage) naming `what`).
  virtual bool exportsDmaBuf() const { return false; }
  virtual DmaBufRange exportDmaBuf(void* p, size_t bytes, const std::string& what);
  // Zero-copy between rank processes of a host (runtime/comm/peer_buffers.h): the allocation that holds
  // the registered user buffer [p, p + bytes), exported for a peer process to map with
  // importExported (and unmap with releaseImported); the descriptor, if any, is the caller's to
  // close. cuda: ncclMemAlloc's virtual memory by its POSIX descriptor, cudaMalloc's by its legacy
  // IPC handle; emulated with device memory: ncclMemAlloc's memfd (or named object). Default:
  // cannot (false); a buffer that cannot be exported throws Error (InvalidUsage) saying why.
  virtual bool exportsUserBuffers() const { return false; }
  virtual UserBufferExport exportUserBuffer(const void* p, size_t bytes, const std::string& what);
};

}  // namespace tutti::kern
