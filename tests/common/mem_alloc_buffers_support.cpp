// ncclMemAlloc'd, registered case buffers (see mem_alloc_buffers_support.h).
#include "tests/common/mem_alloc_buffers_support.h"

#include <cstdlib>
#include <cstring>

#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace tutti_test {

MemAllocBuffers::MemAllocBuffers(ncclComm_t comm, bool registers, bool fromMalloc, bool windows, bool onStream)
    : comm_(comm), registers_(registers), fromMalloc_(fromMalloc), windows_(windows) {
  if (onStream) checkNccl(tuttiStreamCreate(&stream_), "tuttiStreamCreate");
}

MemAllocBuffers::~MemAllocBuffers() {
  if (stream_ != nullptr) tuttiStreamDestroy(stream_);
}

void MemAllocBuffers::synchronize() {
  if (stream_ != nullptr) checkNccl(tuttiStreamSynchronize(stream_), "tuttiStreamSynchronize");
}

void* MemAllocBuffers::allocate(size_t bytes) {
  void* p = nullptr;
  if (fromMalloc_)
    p = std::malloc(bytes + 64);
  else
    checkNccl(ncclMemAlloc(&p, bytes + 64), "ncclMemAlloc");
  void* handle = nullptr;
  if (registers_ && windows_) {
    ncclWindow_t win = nullptr;
    checkNccl(ncclCommWindowRegister(comm_, p, bytes + 64, &win, NCCL_WIN_DEFAULT), "ncclCommWindowRegister");
    handle = win;
  } else if (registers_) {
    checkNccl(ncclCommRegister(comm_, p, bytes + 64, &handle), "ncclCommRegister");
  }
  held_.push_back({p, bytes + 64, handle});
  return p;
}

void MemAllocBuffers::release(void* p) {
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if (it->p != p) continue;
    if (registers_ && windows_)
      checkNccl(ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(it->handle)), "ncclCommWindowDeregister");
    else if (registers_)
      checkNccl(ncclCommDeregister(comm_, it->handle), "ncclCommDeregister");
    std::memset(p, 0xa5, it->bytes);
    if (fromMalloc_)
      std::free(p);
    else
      checkNccl(ncclMemFree(p), "ncclMemFree");
    held_.erase(it);
    return;
  }
}

void MemAllocBuffers::upload(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void MemAllocBuffers::download(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

}  // namespace tutti_test
