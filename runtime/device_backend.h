// Choosing a communicator's device backend: "host" (host buffers, host streams), "emulated" (the
// device executor's code on host threads, host buffers) or "cuda" (device buffers, CUDA streams).
#pragma once

#include <string>

namespace tutti {

// From TUTTI_DEVICE (auto|host|emulated|cuda); auto is cuda where the driver reports a device.
// Throws InvalidUsage for another value.
std::string chooseDeviceBackend(const char* operation);

// Number of CUDA devices the driver reports (0 without a driver, or in a build without CUDA),
// probed once, with the driver loaded at run time.
int cudaDeviceCount();

// The device a communicator made now on this thread uses with `backend`: for cuda the device of
// the thread's current context (cudaSetDevice), as NCCL takes it; 0 otherwise.
int currentDevice(const std::string& backend);

}  // namespace tutti
