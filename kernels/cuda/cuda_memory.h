// ncclMemAlloc's memory and the p2p transport's exported FIFOs on a CUDA driver (the real one or
// the emulated one): CUDA virtual memory (a physical allocation mapped at a reserved address range
// rounded to the allocation granularity), with a shareable POSIX file-descriptor handle where the
// device can export one, so that peers in other processes can map the same memory. What the device
// can do is asked, never assumed: without virtual memory management or descriptor export,
// ncclMemAlloc's memory comes from cuMemAlloc (whose legacy IPC handle peers can still open), said
// once in an INFO line.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/cuda/cuda_driver.h"

namespace tutti::kern::cuda {

// `bytes` of device memory on the current context's device (device 0's primary context when none
// is current; the caller's context is current again on return). Throws tutti::Error (System)
// naming the call and the size.
void* allocateShareable(const Driver& d, size_t bytes);
// `bytes` of `device`'s memory (rounded up to the granularity) exported as a POSIX file
// descriptor into *fd (owned by the caller; none when fd is null), for another process of the
// host to map with importExported. The current context must be `device`'s, and the device able
// to export descriptors.
void* allocateExportable(const Driver& d, int device, size_t bytes, const std::string& what, int* fd);
// Maps the allocation a peer exported (its descriptor, received over a Unix socket) for `device`.
void* importExported(const Driver& d, int device, int fd, size_t bytes, const std::string& what);
// Frees or unmaps what the three above returned, through the driver that made it; false when `p`
// is not such a pointer.
bool freeShareable(void* p);

}  // namespace tutti::kern::cuda
