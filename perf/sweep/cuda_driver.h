// The CUDA driver as perf uses it, loaded at run time: dlopen of libcuda.so.1 and entry points through
// cuGetProcAddress. perf links no CUDA and includes no CUDA header (it is a client of tutti's public headers alone),
// so the few driver types it needs are declared here by hand.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "nccl.h"

namespace tutti::perf::cuda {

using Result = int;                    // CUresult; kSuccess is CUDA_SUCCESS
using DevicePtr = unsigned long long;  // CUdeviceptr
using Device = int;                    // CUdevice, an ordinal
using Stream = cudaStream_t;           // CUstream and cudaStream_t are one type
struct ContextHandle;
struct EventHandle;
struct GraphHandle;
struct GraphExecHandle;
using Context = ContextHandle*;      // CUcontext
using Event = EventHandle*;          // CUevent
using Graph = GraphHandle*;          // CUgraph
using GraphExec = GraphExecHandle*;  // CUgraphExec

// The driver's values perf passes (cuda.h's enums).
constexpr Result kSuccess = 0;
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDefault = 0;       // CU_EVENT_DEFAULT: timing on
constexpr int kCaptureModeRelaxed = 2;      // CU_STREAM_CAPTURE_MODE_RELAXED

// Entry points, each the version cuGetProcAddress gives for CUDA 12.0's ABI (cuMemAlloc is cuMemAlloc_v2, and so
// on); the signatures are those versions'.
struct Driver {
  Result (*cuInit)(unsigned flags) = nullptr;
  Result (*cuDriverGetVersion)(int* version) = nullptr;
  Result (*cuGetErrorString)(Result error, const char** text) = nullptr;
  Result (*cuDeviceGetCount)(int* count) = nullptr;
  Result (*cuDeviceGet)(Device* device, int ordinal) = nullptr;
  Result (*cuDeviceGetName)(char* name, int length, Device device) = nullptr;
  Result (*cuDeviceGetPCIBusId)(char* busId, int length, Device device) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(Context* context, Device device) = nullptr;
  Result (*cuDevicePrimaryCtxRelease)(Device device) = nullptr;
  Result (*cuCtxSetCurrent)(Context context) = nullptr;
  Result (*cuStreamCreate)(Stream* stream, unsigned flags) = nullptr;
  Result (*cuStreamDestroy)(Stream stream) = nullptr;
  Result (*cuStreamSynchronize)(Stream stream) = nullptr;
  Result (*cuMemAlloc)(DevicePtr* pointer, size_t bytes) = nullptr;
  Result (*cuMemFree)(DevicePtr pointer) = nullptr;
  Result (*cuMemcpyHtoDAsync)(DevicePtr destination, const void* source, size_t bytes, Stream stream) = nullptr;
  Result (*cuMemcpyDtoHAsync)(void* destination, DevicePtr source, size_t bytes, Stream stream) = nullptr;
  Result (*cuMemsetD8Async)(DevicePtr destination, unsigned char value, size_t bytes, Stream stream) = nullptr;
  Result (*cuEventCreate)(Event* event, unsigned flags) = nullptr;
  Result (*cuEventDestroy)(Event event) = nullptr;
  Result (*cuEventRecord)(Event event, Stream stream) = nullptr;
  Result (*cuEventSynchronize)(Event event) = nullptr;
  Result (*cuEventElapsedTime)(float* milliseconds, Event start, Event end) = nullptr;
  Result (*cuStreamBeginCapture)(Stream stream, int mode) = nullptr;
  Result (*cuStreamEndCapture)(Stream stream, Graph* graph) = nullptr;
  Result (*cuGraphInstantiateWithFlags)(GraphExec* exec, Graph graph, unsigned long long flags) = nullptr;
  Result (*cuGraphLaunch)(GraphExec exec, Stream stream) = nullptr;
  Result (*cuGraphExecDestroy)(GraphExec exec) = nullptr;
  Result (*cuGraphDestroy)(Graph graph) = nullptr;
  int version = 0;      // cuDriverGetVersion: 12040 is CUDA 12.4
  int deviceCount = 0;  // cuDeviceGetCount
};

// Loads the driver from library (dlopen's name) and initialises it; null with *why ("no CUDA driver (...)", "cuInit
// failed: ...") when that fails. The library stays loaded: unloading a CUDA driver under a running program is unsafe.
std::unique_ptr<const Driver> loadDriver(const char* library, std::string* why);

// libcuda.so.1, loaded once per process; null with *why when there is none.
const Driver* driver(std::string* why = nullptr);

// "12.4" for 12040.
std::string versionText(int version);

// Throws perf::Error (System) "rank R: call: <the driver's text> (CUresult N)" when result is not kSuccess.
void check(const Driver& d, Result result, int rank, const std::string& call);

}  // namespace tutti::perf::cuda
