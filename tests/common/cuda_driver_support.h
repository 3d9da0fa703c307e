// The CUDA driver as the tests of the cuda backend reach it: the library TUTTI_CUDA_LIBRARY names
// (the emulated driver the build makes, in CI), opened as tutti opens it, so that both see one
// driver. Plain types stand for CUDA's, so the tests need no toolkit headers. Device buffers and
// streams for the collective case runner (CaseBuffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tests/common/collective_cases_support.h"

namespace tutti_test {

struct CudaDriver {
  using Result = int;
  using Ptr = unsigned long long;
  Result (*cuInit)(unsigned) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(void**, int) = nullptr;
  Result (*cuCtxSetCurrent)(void*) = nullptr;
  Result (*cuCtxGetCurrent)(void**) = nullptr;
  Result (*cuStreamCreate)(void**, unsigned) = nullptr;
  Result (*cuStreamDestroy)(void*) = nullptr;
  Result (*cuStreamQuery)(void*) = nullptr;
  Result (*cuStreamSynchronize)(void*) = nullptr;
  Result (*cuMemAlloc)(Ptr*, size_t) = nullptr;
  Result (*cuMemFree)(Ptr) = nullptr;
  Result (*cuMemcpyHtoD)(Ptr, const void*, size_t) = nullptr;
  Result (*cuMemcpyDtoH)(void*, Ptr, size_t) = nullptr;
  Result (*cuMemGetInfo)(size_t*, size_t*) = nullptr;
  Result (*cuDevicePrimaryCtxGetState)(int, unsigned*, int*) = nullptr;
  Result (*cuCtxGetDevice)(int*) = nullptr;

  // The driver of TUTTI_CUDA_LIBRARY, loaded once; throws std::runtime_error naming what is missing.
  static const CudaDriver& get();
  // Makes device `device`'s primary context current on the calling thread.
  void useDevice(int device) const;
  // Whether device `device`'s primary context is retained by anyone.
  bool active(int device) const;
  // Device memory in use, as cuMemGetInfo tells it.
  size_t usedBytes() const;
  // Waits at most `seconds` for the stream to finish its work: true when it did.
  bool waitFor(void* stream, double seconds) const;
};

// Device buffers and a stream of device 0, made through the driver, for the case runner.
std::unique_ptr<CaseBuffers> makeDriverBuffers();

}  // namespace tutti_test
