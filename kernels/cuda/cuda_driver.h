// The CUDA driver, loaded at run time (dlopen of libcuda.so.1, entry points through
// cuGetProcAddress), so that one library runs GPU jobs where a driver is present and host mode
// where none is; or the emulated driver of this library, whose entry points are found the same
// way. Only the types come from the toolkit's cuda.h; nothing is linked.
#pragma once

#include <cuda.h>

#include <string>

namespace tutti::kern::cuda {

struct Driver {
#define TUTTI_CUDA_ENTRY(name) decltype(&::name) name = nullptr;
#include "kernels/cuda/cuda_entries.h"
#undef TUTTI_CUDA_ENTRY
  // Optional (null where the driver lacks it): a dmabuf of device memory, for GPUDirect RDMA.
  decltype(&::cuMemGetHandleForAddressRange) cuMemGetHandleForAddressRange = nullptr;
  int version = 0;  // cuDriverGetVersion
  // The emulated driver of this library (kernels/emulated/emulated_driver.h): its devices run any
  // number of ranks side by side, and its streams are host streams, tuttiStreamCreate's included.
  bool emulated = false;
};

// The CUDA driver, loaded and initialised once per process from TUTTI_CUDA_LIBRARY (unset:
// libcuda.so.1, as the CUDA runtime finds it); null when there is none (no such library, or cuInit
// fails: no device, or a driver older than this library needs). *why says why.
const Driver* driver(std::string* why = nullptr);
// The emulated driver of this library, its entry points found as the real driver's are.
const Driver* emulatedDriver();

// "cuMemAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY)".
std::string describe(const Driver& d, CUresult result, const char* call);

// Throws tutti::Error (System) "<context>: <call>: <what the driver says>" when result is not
// CUDA_SUCCESS.
void check(const Driver& d, CUresult result, const char* call, const std::string& context);

// Makes the driver's context `context` current on the calling thread for the scope, and restores
// the caller's on the way out: the library never leaves the caller's thread in another context.
class ContextScope {
 public:
  ContextScope(const Driver& d, CUcontext context) : d_(d) {
    d_.cuCtxGetCurrent(&saved_);
    if (saved_ != context) {
      d_.cuCtxSetCurrent(context);
      switched_ = true;
    }
  }
  ~ContextScope() {
    if (switched_) d_.cuCtxSetCurrent(saved_);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const Driver& d_;
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace tutti::kern::cuda
