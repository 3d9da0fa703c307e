// Paying for a buffer's first touch when it is set up, not on the hot path.
//
// On the small virtual machines this project is measured on, a page's first access from user
// mode costs about 5 us even after MAP_POPULATE or a kernel-side clear (perf/RESULTS.md, "First
// calls after init").
#pragma once

#include <cstddef>

namespace tutti {

// Writes every page of [base, base + bytes) once from user mode without changing a byte (an
// atomic add of zero to its first word), so a peer already using shared memory loses nothing.
void touchPages(void* base, size_t bytes);

}  // namespace tutti
