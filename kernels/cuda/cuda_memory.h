// ncclMemAlloc's memory on the cuda backend: CUDA virtual memory (a physical allocation with a
// shareable POSIX file-descriptor handle, mapped at a reserved address range rounded to the
// allocation granularity), so that peers in other processes can later map the same memory.
#pragma once

#include <cstddef>
#include <string>

namespace tutti::kern::cuda {

// `bytes` of device memory on the current context's device (device 0's primary context when none
// is current). Throws tutti::Error (System) naming the call and the size.
void* allocateShareable(size_t bytes);
// `bytes` of `device`'s memory (rounded up to the granularity) exported as a POSIX file
// descriptor into *fd (owned by the caller; none when fd is null), for another process of the
// host to map with importExported. The current context must be `device`'s.
void* allocateExportable(int device, size_t bytes, const std::string& what, int* fd);
// Maps the allocation a peer exported (its descriptor, received over a Unix socket) for `device`.
void* importExported(int device, int fd, size_t bytes, const std::string& what);
// Frees or unmaps what the three above returned; false when `p` is not such a pointer.
bool freeShareable(void* p);

}  // namespace tutti::kern::cuda
