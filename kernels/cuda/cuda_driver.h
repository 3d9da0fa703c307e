// The CUDA driver, loaded at run time (dlopen of libcuda.so.1, entry points through
// cuGetProcAddress), so that one library runs GPU jobs where a driver is present and host mode
// where none is. Only the types come from the toolkit's cuda.h; nothing is linked.
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
};

// The driver, loaded and initialised once per process; null when there is none (no libcuda, or
// cuInit fails: no device, or a driver older than this library needs). *why says why.
const Driver* driver(std::string* why = nullptr);

// "cuMemAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY)".
std::string describe(const Driver& d, CUresult result, const char* call);

// Throws tutti::Error (System) "<context>: <call>: <what the driver says>" when result is not
// CUDA_SUCCESS.
void check(const Driver& d, CUresult result, const char* call, const std::string& context);

}  // namespace tutti::kern::cuda
