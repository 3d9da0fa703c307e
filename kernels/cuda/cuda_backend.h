// The cuda executor backend (cuda_backend.cpp, cuda_submit.cpp): made by makeExecutorBackend for
// "cuda" over the CUDA driver, and for "emulated" over the emulated driver of this library
// (kernels/emulated/emulated_driver.h), so that every line of its host side runs in CI.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tutti::kern::cuda {

struct Driver;  // cuda_driver.h, which needs the toolkit's cuda.h

// Throws Error (InvalidUsage) naming `operation` when the device cannot be used.
std::unique_ptr<ExecutorBackend> makeCudaBackend(const Driver& driver, const BackendOptions& options,
                                                 const std::string& operation);

// CUDA devices the driver reports; 0 without a driver.
int deviceCount();
// The device of the calling thread's current context (cudaSetDevice makes one current), as
// NCCL's ncclCommInitRank takes it; 0 when the thread has none or there is no driver.
int currentDevice();

}  // namespace tutti::kern::cuda
