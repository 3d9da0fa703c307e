// Paying for a buffer's first touch when it is set up, not on the hot path.
//
// On the small virtual machines this project is measured on, a page's first access costs about
// 5 us even after MAP_POPULATE or a kernel-side clear, and user-mode and kernel-mode accesses pay
// it separately: a buffer memset by the process still costs 0.8 GB/s the first time recv() or
// sendmsg() copies through it (perf/RESULTS.md, "First calls after init").
#pragma once

#include <cstddef>

namespace tutti {

// Writes every page of [base, base + bytes) once from user mode without changing a byte (an
// atomic add of zero to its first word), so a peer already using shared memory loses nothing.
void touchPages(void* base, size_t bytes);

// Zeroes [base, base + bytes) and has both the kernel and this process write every page: for
// memory that system calls copy into or out of (network FIFOs). Throws tutti::Error naming
// `what` if /dev/zero cannot be read.
void zeroPagesForKernel(void* base, size_t bytes, const char* what);

}  // namespace tutti
