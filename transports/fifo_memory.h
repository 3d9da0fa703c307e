// The memory a communicator's FIFOs live in: a kern::DeviceMemory (kernels/device_memory.h), never
// the executor. Host memory (hostFifoMemory, below), or a device backend's own memory once a
// communicator runs on one (init points the communicator's fifoMemory at the backend's memory()).
//
// The host may be unable to touch such memory, so the memory transports never assume it can:
// they build a FIFO's header on the host and copy it in, read a peer's header by copying it out,
// and keep their own handshakes (has the sender attached?) in host memory beside the FIFO.
// Transports whose FIFOs must be host memory (shm shares a segment with another process, the net
// proxy sends from it) keep them there and map them for the executor (mapHostMemory): a GPU then
// reads and writes them over the bus, as NCCL's shared-memory and network transports do without
// peer access or GPUDirect.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/device_memory.h"

namespace tutti::transport {

// A FIFO in host memory that the executor reaches through kern::DeviceMemory::mapHostMemory: the host's
// address for the transport's own use, the executor's for the connection. Unmaps when destroyed;
// the memory itself stays its owner's.
class HostMapping {
 public:
  HostMapping() = default;
  HostMapping(std::shared_ptr<kern::DeviceMemory> memory, void* host, size_t bytes, const std::string& what)
      : memory_(std::move(memory)), host_(host), executor_(memory_->mapHostMemory(host, bytes, what)) {}
  ~HostMapping() {
    if (memory_) memory_->unmapHostMemory(host_);
  }
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;
  void* host() const { return host_; }
  void* executor() const { return executor_; }

 private:
  std::shared_ptr<kern::DeviceMemory> memory_;
  void* host_ = nullptr;
  void* executor_ = nullptr;
};

// Plain host memory: anonymous pages, populated and touched when allocated (base/pages.h).
// Stateless apart from its record of sizes, and shared by every communicator of the process.
std::shared_ptr<kern::DeviceMemory> hostFifoMemory();

}  // namespace tutti::transport
