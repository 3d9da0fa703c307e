// ncclMemAlloc's memory on the cuda backend: CUDA virtual memory (a physical allocation with a
// shareable POSIX file-descriptor handle, mapped at a reserved address range rounded to the
// allocation granularity), so that peers in other processes can later map the same memory.
#pragma once

#include <cstddef>

namespace tutti::kern::cuda {

// `bytes` of device memory on the current context's device (device 0's primary context when none
// is current). Throws tutti::Error (System) naming the call and the size.
void* allocateShareable(size_t bytes);
// Frees what allocateShareable returned; false when `p` is not such a pointer.
bool freeShareable(void* p);

}  // namespace tutti::kern::cuda
