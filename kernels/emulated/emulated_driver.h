// The emulated CUDA driver: a stand-in for libcuda.so.1 whose devices are the host (their memory is
// host memory, their streams host streams, and a kernel launch runs the executor's device source
// on host threads), so that the cuda backend's own host code (kernels/cuda/) runs on machines
// without a GPU, every line of it. It answers cuGetProcAddress as the real driver does: in this
// library for TUTTI_DEVICE=emulated, and from a library of its own (libcuda.so.1 in the build's
// emulated-cuda/ folder, kernels/emulated/standin/) that a program loads in place of the real one.
// Its model of the machine, and what the environment makes it stand for: emulated_gpu.h.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace tutti::kern::emulated {

// cuGetProcAddress_v2's contract: the entry point `symbol` (a base name, "cuMemAlloc"), for any
// CUDA version from 12.0 on.
CUresult getProcAddress(const char* symbol, void** function, int cudaVersion, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status);

// Throws Error (InvalidUsage) naming the variable where the environment that sets what the emulated
// devices stand for is malformed (emulated_gpu.h), so that a communicator fails at init, saying so.
void checkEnvironment();

// Live device allocations (cuMemAlloc, and virtual memory's mappings): what tests count to show
// that repeated calls allocate nothing.
size_t liveDeviceAllocations();

}  // namespace tutti::kern::emulated
