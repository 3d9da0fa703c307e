// The memory a communicator's FIFOs live in, behind an allocator: host memory today, device
// memory once a communicator runs on a device backend (the executor backend points the
// communicator's fifoMemory at its own).
//
// The host may be unable to touch such memory, so the memory transports never assume it can:
// they build a FIFO's header on the host and copy it in, read a peer's header by copying it out,
// and keep their own handshakes (has the sender attached?) in host memory beside the FIFO.
// Transports that need the host to reach the FIFO (shm maps it into another process, the net
// proxy sends from it) refuse other memory in canConnect.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

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
};

// Plain host memory: anonymous pages, populated and touched when allocated (base/pages.h).
// Stateless apart from its record of sizes, and shared by every communicator of the process.
std::shared_ptr<FifoMemory> hostFifoMemory();

}  // namespace tutti
