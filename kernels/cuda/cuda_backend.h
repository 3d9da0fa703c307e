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

}  // namespace tutti::kern::cuda
