// The answers of a backend whose memory lacks a capability (device_memory.h): refusals that name it.
#include "kernels/device_memory.h"

#include "base/error.h"

namespace tutti::kern {

void* DeviceMemory::allocateExportable(size_t, const std::string& what, ExportHandle*) {
  throw Error(ErrorCode::InvalidUsage,
              what + ": the " + name() + " backend cannot share its memory with other processes");
}

DmaBufRange DeviceMemory::exportDmaBuf(void*, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot export its memory as a dmabuf");
}

UserBufferExport DeviceMemory::exportUserBuffer(const void*, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage,
              what + ": the " + name() + " backend cannot share user buffers with other processes");
}

void* DeviceMemory::importExported(const ExportHandle&, size_t, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, what + ": the " + name() + " backend cannot map another process's memory");
}

}  // namespace tutti::kern
