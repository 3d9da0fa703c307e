// The emulated CUDA driver's devices and contexts, its errors, and the resolver that hands out every
// entry point (emulated_driver.h).
#include "kernels/emulated/emulated_driver.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/emulated/emulated_entries.h"
#include "kernels/emulated/emulated_gpu.h"

namespace tutti::kern::emulated {

namespace {

constexpr int kVersion = 13000;  // the CUDA version it reports, as the toolkit it is built with

bool validDevice(CUdevice device) { return device >= 0 && device < kDevices; }

// Runs a question whose answer reads the environment, which may be malformed: the error comes
// back as the driver's, with the variable named.
template <typename F>
CUresult answering(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    return fail(CUDA_ERROR_INVALID_VALUE, e.message());
  }
}

CUresult init(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult driverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = kVersion;
  return CUDA_SUCCESS;
}
CUresult getErrorString(CUresult code, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *text = errorString(code);
  return *text == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult getErrorName(CUresult code, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *name = errorName(code);
  return *name == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult deviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr || !validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult deviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = kDevices;
  return CUDA_SUCCESS;
}
CUresult deviceGetName(char* name, int length, CUdevice device) {
  if (name == nullptr || length <= 0 || !validDevice(device)) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, size_t(length), "tutti emulated device %d", int(device));
  return CUDA_SUCCESS;
}
CUresult deviceGetPCIBusId(char* id, int length, CUdevice device) {
  if (id == nullptr || length <= 0 || !validDevice(device)) return CUDA_ERROR_INVALID_VALUE;
  return answering([&] {
    // Without an entry in TUTTI_EMULATED_BUS_IDS the device has no place in the topology: "".
    std::snprintf(id, size_t(length), "%s", busIdOf(device).c_str());
    return CUDA_SUCCESS;
  });
}

CUresult deviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (value == nullptr || !validDevice(device)) return CUDA_ERROR_INVALID_VALUE;
  return answering([&] {
    const Capabilities caps = capabilities();
    switch (attribute) {
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = kMultiprocessors; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
      case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
      case CU_DEVICE_ATTRIBUTE_INTEGRATED: *value = integrated() ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *value = caps.pageable ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; break;
      case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = caps.vmm ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *value = caps.posixFd ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *value = caps.dmabuf ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: *value = caps.gdr ? 1 : 0; break;
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
      case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
      default:
        return fail(CUDA_ERROR_INVALID_VALUE,
                    "device attribute " + std::to_string(int(attribute)) + " is not emulated");
    }
    return CUDA_SUCCESS;
  });
}

CUresult devicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (context == nullptr || !validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (CUresult r = answering([] {
        checkEnvironment();
        return CUDA_SUCCESS;
      });
      r != CUDA_SUCCESS)
    return r;
  Context* c = primaryContext(device);
  std::lock_guard<std::mutex> lock(c->mutex);
  c->refs++;
  *context = handleOf(c);
  return CUDA_SUCCESS;
}

// The last release resets the context, as a GPU's: its peers and a broken context's error go.
CUresult devicePrimaryCtxRelease(CUdevice device) {
  if (!validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  Context* c = primaryContext(device);
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->refs == 0) return fail(CUDA_ERROR_INVALID_CONTEXT, "the primary context was not retained");
  if (--c->refs == 0) {
    c->generation++;
    c->peers.clear();
    c->sticky = CUDA_SUCCESS;
    c->stickyDetail.clear();
  }
  return CUDA_SUCCESS;
}

CUresult devicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  if (flags == nullptr || active == nullptr || !validDevice(device)) return CUDA_ERROR_INVALID_VALUE;
  Context* c = primaryContext(device);
  std::lock_guard<std::mutex> lock(c->mutex);
  *flags = 0;
  *active = c->refs > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult deviceCanAccessPeer(int* can, CUdevice device, CUdevice peer) {
  if (can == nullptr || !validDevice(device) || !validDevice(peer)) return CUDA_ERROR_INVALID_DEVICE;
  return answering([&] {
    *can = device != peer && peerAccessPossible(device, peer) ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

CUresult ctxEnablePeerAccess(CUcontext peerContext, unsigned int flags) {
  Context* c = currentContext();
  Context* peer = contextOf(peerContext);
  if (c == nullptr) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxEnablePeerAccess without a current context");
  if (peer == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return answering([&] {
    if (peer->device == c->device || !peerAccessPossible(c->device, peer->device))
      return fail(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                  "devices " + std::to_string(c->device) + " and " + std::to_string(peer->device));
    std::lock_guard<std::mutex> lock(c->mutex);
    return c->peers.insert(peer->device).second ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  });
}

CUresult ctxGetCurrent(CUcontext* context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = currentContext() == nullptr ? nullptr : handleOf(currentContext());
  return CUDA_SUCCESS;
}
CUresult ctxSetCurrent(CUcontext context) {
  Context* c = contextOf(context);
  if (context != nullptr && c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  setCurrentContext(c);
  return CUDA_SUCCESS;
}
CUresult ctxGetDevice(CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (currentContext() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = currentContext()->device;
  return CUDA_SUCCESS;
}
// The emulated driver's streams run on their own: nothing is pending on the context itself.
CUresult ctxSynchronize() {
  return currentContext() == nullptr ? CUDA_ERROR_INVALID_CONTEXT : currentContext()->health();
}

const Entry kEntries[] = {
    TUTTI_EMULATED_ENTRY(cuInit, init),
    TUTTI_EMULATED_ENTRY(cuDriverGetVersion, driverGetVersion),
    TUTTI_EMULATED_ENTRY(cuGetErrorString, getErrorString),
    TUTTI_EMULATED_ENTRY(cuGetErrorName, getErrorName),
    TUTTI_EMULATED_ENTRY(cuDeviceGet, deviceGet),
    TUTTI_EMULATED_ENTRY(cuDeviceGetCount, deviceGetCount),
    TUTTI_EMULATED_ENTRY(cuDeviceGetName, deviceGetName),
    TUTTI_EMULATED_ENTRY(cuDeviceGetAttribute, deviceGetAttribute),
    TUTTI_EMULATED_ENTRY(cuDeviceGetPCIBusId, deviceGetPCIBusId),
    TUTTI_EMULATED_ENTRY(cuDevicePrimaryCtxRetain, devicePrimaryCtxRetain),
    TUTTI_EMULATED_ENTRY(cuDevicePrimaryCtxRelease, devicePrimaryCtxRelease),
    TUTTI_EMULATED_ENTRY(cuDevicePrimaryCtxGetState, devicePrimaryCtxGetState),
    TUTTI_EMULATED_ENTRY(cuDeviceCanAccessPeer, deviceCanAccessPeer),
    TUTTI_EMULATED_ENTRY(cuCtxEnablePeerAccess, ctxEnablePeerAccess),
    TUTTI_EMULATED_ENTRY(cuCtxGetCurrent, ctxGetCurrent),
    TUTTI_EMULATED_ENTRY(cuCtxSetCurrent, ctxSetCurrent),
    TUTTI_EMULATED_ENTRY(cuCtxGetDevice, ctxGetDevice),
    TUTTI_EMULATED_ENTRY(cuCtxSynchronize, ctxSynchronize),
};

}  // namespace

std::span<const Entry> deviceEntries() { return kEntries; }

CUresult getProcAddress(const char* symbol, void** function, int cudaVersion, cuuint64_t,
                        CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *function = nullptr;
  if (cudaVersion < 12000) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  for (std::span<const Entry> entries : {deviceEntries(), memoryEntries(), streamEntries(), kernelEntries()})
    for (const Entry& e : entries)
      if (std::strcmp(e.name, symbol) == 0) {
        *function = e.function;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
      }
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

size_t liveDeviceAllocations() { return deviceAllocations(); }

}  // namespace tutti::kern::emulated
