// Choosing a communicator's device backend: "host" (host buffers, host streams), "cuda" or "emulated".
#pragma once

#include <string>

namespace tutti {

// From TUTTI_DEVICE (auto|host|cuda|emulated). Throws InvalidUsage when the choice cannot be served.
std::string chooseDeviceBackend(const char* operation);

// Number of CUDA devices the driver reports (0 without a driver), probed once with dlopen so
// that tutti never needs CUDA at link time.
int cudaDeviceCount();

}  // namespace tutti
