// The cuda executor backend (cuda_backend.cpp): made by makeExecutorBackend for "cuda".
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace tutti::kern::cuda {

// Throws Error (InvalidUsage) naming `operation` when there is no usable driver or device.
std::unique_ptr<ExecutorBackend> makeCudaBackend(const BackendOptions& options, const std::string& operation);

// CUDA devices the driver reports; 0 without a driver.
int deviceCount();
// The device of the calling thread's current context (cudaSetDevice makes one current), as
// NCCL's ncclCommInitRank takes it; 0 when the thread has none or there is no driver.
int currentDevice();

}  // namespace tutti::kern::cuda
