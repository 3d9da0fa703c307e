// ncclMemAlloc's memory for the emulated device with device memory (TUTTI_EMULATED_MEMORY=device):
// pages of a memfd (or, standing for CUDA's legacy IPC handles, a named shared-memory object), as
// the cuda backend's are CUDA virtual memory with a shareable handle, so that a registered buffer
// can be mapped by rank processes of the host (kernels/backend.h, exportUserBuffer).
#pragma once

#include <cstddef>
#include <string>

#include "kernels/export_handle.h"

namespace tutti::kern::emulated {

// `bytes` of shareable memory (whole pages), named when `named` (TUTTI_EMULATED_IPC=handle).
// Throws Error (System) naming ncclMemAlloc and the size.
void* allocateShareable(size_t bytes, bool named);
// Unmaps what allocateShareable returned; false when `p` is not such a pointer.
bool freeShareable(void* p);
// The allocation that holds [p, p + bytes) as another process maps it: a duplicate of its
// descriptor (the caller's to close) or its name, and p's offset. Throws Error (InvalidUsage)
// naming `what` when the range is not in memory from allocateShareable.
UserBufferExport exportShareable(const void* p, size_t bytes, const std::string& what);

}  // namespace tutti::kern::emulated
