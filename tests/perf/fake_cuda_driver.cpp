// A stand-in for libcuda.so.1 that the perf tool's CUDA code is tested against where no GPU is: cuGetProcAddress_v2
// and the entry points perf uses, over host memory. It refuses what perf must never do on a GPU (the legacy default
// stream, blocking streams, a call without a current context, a capture mode other than relaxed) and counts what
// perf leaves behind. FAKE_CUDA_MISSING=<entry> hides one entry point; FAKE_CUDA_INIT=<n> makes cuInit return n.
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace {

using Result = int;
constexpr Result kOk = 0, kInvalidValue = 1, kInvalidContext = 201, kInvalidHandle = 400, kNotPermitted = 800;

struct State {
  std::mutex mutex;
  std::set<void*> allocations, streams, events;
  std::map<void*, double> recorded;  // event -> host time in ms
  std::set<void*> capturing;         // streams
  int retained = 0, graphs = 0, execs = 0, launches = 0;
};
State& state() {
  static State s;
  return s;
}
thread_local void* current = nullptr;  // the calling thread's context

double nowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Work on a stream: a context current, a stream of perf's own (never the legacy one), not while it is captured.
Result onStream(void* stream) {
  if (current == nullptr) return kInvalidContext;
  std::lock_guard lock(state().mutex);
  if (stream == nullptr || !state().streams.count(stream)) return kInvalidHandle;
  return state().capturing.count(stream) ? kNotPermitted : kOk;
}

Result cuInit(unsigned) { return std::getenv("FAKE_CUDA_INIT") ? std::atoi(std::getenv("FAKE_CUDA_INIT")) : kOk; }
Result cuDriverGetVersion(int* v) { return *v = 12040, kOk; }
Result cuGetErrorString(Result r, const char** text) { return *text = r == kOk ? "no error" : "fake error", kOk; }
Result cuDeviceGetCount(int* n) { return *n = 2, kOk; }
Result cuDeviceGet(int* d, int ordinal) { return ordinal < 0 || ordinal > 1 ? kInvalidValue : (*d = ordinal, kOk); }
Result cuDeviceGetName(char* name, int length, int d) {
  return std::snprintf(name, size_t(length), "Fake GPU %d", d), kOk;
}
Result cuDeviceGetPCIBusId(char* id, int length, int d) {
  return std::snprintf(id, size_t(length), "0000:%02x:00.0", 0x18 + d), kOk;
}
Result cuDevicePrimaryCtxRetain(void** ctx, int d) {
  std::lock_guard lock(state().mutex);
  state().retained++;
  return *ctx = reinterpret_cast<void*>(uintptr_t(0x1000 + d)), kOk;
}
Result cuDevicePrimaryCtxRelease(int) {
  std::lock_guard lock(state().mutex);
  return state().retained--, kOk;
}
Result cuCtxSetCurrent(void* ctx) { return current = ctx, kOk; }
Result cuStreamCreate(void** stream, unsigned flags) {
  if (current == nullptr) return kInvalidContext;
  if (flags != 1) return kInvalidValue;  // perf's streams never wait for the legacy one
  std::lock_guard lock(state().mutex);
  *stream = std::malloc(1);
  state().streams.insert(*stream);
  return kOk;
}
Result cuStreamDestroy(void* stream) {
  std::lock_guard lock(state().mutex);
  if (!state().streams.erase(stream)) return kInvalidHandle;
  std::free(stream);
  return kOk;
}
Result cuStreamSynchronize(void* stream) { return onStream(stream); }
Result cuMemAlloc(unsigned long long* p, size_t bytes) {
  if (current == nullptr) return kInvalidContext;
  std::lock_guard lock(state().mutex);
  void* memory = std::malloc(bytes);
  state().allocations.insert(memory);
  return *p = reinterpret_cast<unsigned long long>(memory), kOk;
}
Result cuMemFree(unsigned long long p) {
  std::lock_guard lock(state().mutex);
  if (!state().allocations.erase(reinterpret_cast<void*>(p))) return kInvalidValue;
  std::free(reinterpret_cast<void*>(p));
  return kOk;
}
Result cuMemcpyHtoDAsync(unsigned long long dst, const void* src, size_t bytes, void* stream) {
  Result r = onStream(stream);
  if (r == kOk) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return r;
}
Result cuMemcpyDtoHAsync(void* dst, unsigned long long src, size_t bytes, void* stream) {
  Result r = onStream(stream);
  if (r == kOk) std::memcpy(dst, reinterpret_cast<void*>(src), bytes);
  return r;
}
Result cuMemsetD8Async(unsigned long long dst, unsigned char value, size_t bytes, void* stream) {
  Result r = onStream(stream);
  if (r == kOk) std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return r;
}
Result cuEventCreate(void** event, unsigned flags) {
  if (current == nullptr) return kInvalidContext;
  if (flags != 0) return kInvalidValue;  // timing events
  std::lock_guard lock(state().mutex);
  *event = std::malloc(1);
  state().events.insert(*event);
  return kOk;
}
Result cuEventDestroy(void* event) {
  std::lock_guard lock(state().mutex);
  if (!state().events.erase(event)) return kInvalidHandle;
  state().recorded.erase(event);
  std::free(event);
  return kOk;
}
Result cuEventRecord(void* event, void* stream) {
  if (Result r = onStream(stream); r != kOk) return r;
  std::lock_guard lock(state().mutex);
  return state().recorded[event] = nowMs(), kOk;
}
Result cuEventSynchronize(void* event) {
  std::lock_guard lock(state().mutex);
  return state().recorded.count(event) ? kOk : kInvalidHandle;
}
Result cuEventElapsedTime(float* ms, void* start, void* stop) {
  std::lock_guard lock(state().mutex);
  if (!state().recorded.count(start) || !state().recorded.count(stop)) return kInvalidHandle;
  return *ms = float(state().recorded[stop] - state().recorded[start]), kOk;
}
Result cuStreamBeginCapture(void* stream, int mode) {
  if (Result r = onStream(stream); r != kOk) return r;
  if (mode != 2) return kInvalidValue;  // relaxed: tutti may allocate on its first launch
  std::lock_guard lock(state().mutex);
  state().capturing.insert(stream);
  return kOk;
}
Result cuStreamEndCapture(void* stream, void** graph) {
  std::lock_guard lock(state().mutex);
  if (!state().capturing.erase(stream)) return kInvalidValue;
  state().graphs++;
  return *graph = reinterpret_cast<void*>(uintptr_t(0x2000 + state().graphs)), kOk;
}
Result cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  std::lock_guard lock(state().mutex);
  state().execs++;
  return *exec = graph, kOk;
}
Result cuGraphLaunch(void*, void* stream) {
  if (Result r = onStream(stream); r != kOk) return r;
  std::lock_guard lock(state().mutex);
  return state().launches++, kOk;
}
Result cuGraphExecDestroy(void*) {
  std::lock_guard lock(state().mutex);
  return state().execs--, kOk;
}
Result cuGraphDestroy(void*) {
  std::lock_guard lock(state().mutex);
  return state().graphs--, kOk;
}

template <class F>
void* address(F* f) {
  return reinterpret_cast<void*>(f);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) Result cuGetProcAddress_v2(const char* symbol, void** function, int version,
                                                                  uint64_t, int* status) {
  static const std::map<std::string, void*> entries = {
      {"cuInit", address(cuInit)},
      {"cuDriverGetVersion", address(cuDriverGetVersion)},
      {"cuGetErrorString", address(cuGetErrorString)},
      {"cuDeviceGetCount", address(cuDeviceGetCount)},
      {"cuDeviceGet", address(cuDeviceGet)},
      {"cuDeviceGetName", address(cuDeviceGetName)},
      {"cuDeviceGetPCIBusId", address(cuDeviceGetPCIBusId)},
      {"cuDevicePrimaryCtxRetain", address(cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", address(cuDevicePrimaryCtxRelease)},
      {"cuCtxSetCurrent", address(cuCtxSetCurrent)},
      {"cuStreamCreate", address(cuStreamCreate)},
      {"cuStreamDestroy", address(cuStreamDestroy)},
      {"cuStreamSynchronize", address(cuStreamSynchronize)},
      {"cuMemAlloc", address(cuMemAlloc)},
      {"cuMemFree", address(cuMemFree)},
      {"cuMemcpyHtoDAsync", address(cuMemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync", address(cuMemcpyDtoHAsync)},
      {"cuMemsetD8Async", address(cuMemsetD8Async)},
      {"cuEventCreate", address(cuEventCreate)},
      {"cuEventDestroy", address(cuEventDestroy)},
      {"cuEventRecord", address(cuEventRecord)},
      {"cuEventSynchronize", address(cuEventSynchronize)},
      {"cuEventElapsedTime", address(cuEventElapsedTime)},
      {"cuStreamBeginCapture", address(cuStreamBeginCapture)},
      {"cuStreamEndCapture", address(cuStreamEndCapture)},
      {"cuGraphInstantiateWithFlags", address(cuGraphInstantiateWithFlags)},
      {"cuGraphLaunch", address(cuGraphLaunch)},
      {"cuGraphExecDestroy", address(cuGraphExecDestroy)},
      {"cuGraphDestroy", address(cuGraphDestroy)},
  };
  const char* missing = std::getenv("FAKE_CUDA_MISSING");
  auto it = entries.find(symbol);
  if (version < 12000 || it == entries.end() || (missing && it->first == missing)) {
    *function = nullptr;
    if (status) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    return 500;               // CUDA_ERROR_NOT_FOUND
  }
  *function = it->second;
  if (status) *status = 0;
  return kOk;
}

// What perf left behind: allocations, streams, events, retained contexts, graphs and graph execs not destroyed.
__attribute__((visibility("default"))) int fakeCudaLeaks() {
  std::lock_guard lock(state().mutex);
  State& s = state();
  return int(s.allocations.size() + s.streams.size() + s.events.size()) + s.retained + s.graphs + s.execs;
}
__attribute__((visibility("default"))) int fakeCudaGraphLaunches() {
  std::lock_guard lock(state().mutex);
  return state().launches;
}
}
