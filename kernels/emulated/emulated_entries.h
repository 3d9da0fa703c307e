// The emulated CUDA driver's entry points, by the names cuGetProcAddress answers for: each file of
// the driver lists its own (devices and contexts, memory, streams and events, kernels). An entry's
// type is checked against the toolkit's declaration of the name it stands for.
#pragma once

#include <cuda.h>

#include <functional>
#include <span>
#include <type_traits>

namespace tutti::kern::emulated {

struct Entry {
  const char* name;
  void* function;
};

template <typename Declared, typename Defined>
constexpr const char* checkedName(const char* name) {
  static_assert(std::is_same_v<Declared, Defined>, "an emulated entry point differs from CUDA's declaration");
  return name;
}
#define TUTTI_EMULATED_ENTRY(cuName, fn)                                                                            \
  ::tutti::kern::emulated::Entry {                                                                                  \
    ::tutti::kern::emulated::checkedName<decltype(&::cuName), decltype(&fn)>(#cuName), reinterpret_cast<void*>(&fn) \
  }

std::span<const Entry> deviceEntries();  // emulated_driver.cpp
std::span<const Entry> memoryEntries();  // emulated_memory.cpp
std::span<const Entry> streamEntries();  // emulated_streams.cpp
std::span<const Entry> kernelEntries();  // emulated_kernels.cpp

// Runs `job` in the order of `stream`: on the calling thread before returning for the legacy and
// per-thread default streams, else queued on the host stream the handle is (the driver's streams
// are host streams, kernels/host_stream.h, and so are tuttiStreamCreate's). CUDA_ERROR_INVALID_HANDLE
// for a handle that is neither; CUDA_ERROR_INVALID_CONTEXT without a current context.
CUresult onStream(CUstream stream, std::function<void()> job);
// Whether work on `stream` runs on the calling thread (the default streams).
bool runsInline(CUstream stream);

}  // namespace tutti::kern::emulated
