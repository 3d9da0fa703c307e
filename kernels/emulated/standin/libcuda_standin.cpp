// libcuda.so.1 as the emulated CUDA driver (kernels/emulated/emulated_driver.h): what a program that
// loads a CUDA driver finds first, cuGetProcAddress_v2, and the entry points that loaders (tutti's
// topology discovery among them) look up by name before or instead of it.
#include "kernels/emulated/emulated_driver.h"

namespace {
template <typename F>
F entry(const char* name) {
  void* fn = nullptr;
  tutti::kern::emulated::getProcAddress(name, &fn, 12000, 0, nullptr);
  return reinterpret_cast<F>(fn);
}
}  // namespace

#define TUTTI_STANDIN_EXPORT extern "C" __attribute__((visibility("default")))

TUTTI_STANDIN_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function, int cudaVersion,
                                                  cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  return tutti::kern::emulated::getProcAddress(symbol, function, cudaVersion, flags, status);
}
TUTTI_STANDIN_EXPORT CUresult cuInit(unsigned int flags) { return entry<CUresult (*)(unsigned int)>("cuInit")(flags); }
TUTTI_STANDIN_EXPORT CUresult cuDriverGetVersion(int* version) {
  return entry<CUresult (*)(int*)>("cuDriverGetVersion")(version);
}
TUTTI_STANDIN_EXPORT CUresult cuDeviceGetCount(int* count) {
  return entry<CUresult (*)(int*)>("cuDeviceGetCount")(count);
}
TUTTI_STANDIN_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return entry<CUresult (*)(CUdevice*, int)>("cuDeviceGet")(device, ordinal);
}
TUTTI_STANDIN_EXPORT CUresult cuDeviceGetPCIBusId(char* id, int length, CUdevice device) {
  return entry<CUresult (*)(char*, int, CUdevice)>("cuDeviceGetPCIBusId")(id, length, device);
}
TUTTI_STANDIN_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  return entry<CUresult (*)(int*, CUdevice_attribute, CUdevice)>("cuDeviceGetAttribute")(value, attribute, device);
}
