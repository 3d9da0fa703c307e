// What another process of this host needs to map memory a backend exported (CUDA IPC).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tutti::kern {

// How another process of this host reaches memory that a backend exported: a POSIX descriptor to
// pass over a Unix socket (CUDA virtual memory's shareable handle), or bytes that travel as they
// are (CUDA's legacy IPC handle, for drivers that cannot export descriptors).
struct ExportHandle {
  static constexpr size_t kBytes = 64;  // CU_IPC_HANDLE_SIZE
  int fd = -1;                          // the holder's to close; -1 when the handle is `bytes`
  uint8_t bytes[kBytes] = {};
};

// A range of device memory as a NIC registers it (GPUDirect RDMA through dmabuf): the dmabuf's
// descriptor (the holder's to close) and where the range starts in it.
struct DmaBufRange {
  int fd = -1;
  uint64_t offset = 0;
};

// A registered user buffer as another process of this host maps it (zero-copy between rank
// processes): the handle of the whole allocation that holds it (importExported maps that many
// bytes), and where the buffer starts in it.
struct UserBufferExport {
  ExportHandle handle;
  uint64_t allocationBytes = 0;
  uint64_t offset = 0;
};

}  // namespace tutti::kern
