// Case buffers (collective_cases_support.h) from ncclMemAlloc, registered with the communicator:
// what the zero-copy tests of rank processes run on, where the peers map each other's buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"

namespace tutti_test {

// ncclMemAlloc's memory (or, fromMalloc, plain host memory, which no peer process can map),
// registered with ncclCommRegister when `registers` (with ncclCommWindowRegister when `windows`:
// every rank allocates the same buffers in the same order). Released buffers are deregistered,
// poisoned (a peer still reading one afterwards shows as a wrong result) and freed. Calls run on
// the null stream, or with onStream on a host stream of their own (tuttiStreamCreate).
// Host-accessible memory only (the host backend, the emulated device): the runner reaches it with
// memcpy.
class MemAllocBuffers final : public CaseBuffers {
 public:
  MemAllocBuffers(ncclComm_t comm, bool registers, bool fromMalloc = false, bool windows = false,
                  bool onStream = false);
  ~MemAllocBuffers() override;
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  cudaStream_t stream() override { return stream_; }
  void synchronize() override;

 private:
  struct Held {
    void* p;
    size_t bytes;
    void* handle;
  };
  ncclComm_t comm_;
  bool registers_, fromMalloc_, windows_;
  cudaStream_t stream_ = nullptr;
  std::vector<Held> held_;
};

}  // namespace tutti_test
