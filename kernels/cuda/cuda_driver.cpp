// Loading the CUDA driver at run time (cuda_driver.h).
#include "kernels/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "base/error.h"
#include "base/tunables.h"
#include "kernels/emulated/emulated_driver.h"

namespace tutti::kern::cuda {

namespace {

// The ABI version asked of cuGetProcAddress: CUDA 12.0's, which every driver from then on serves.
constexpr int kDriverAbi = 12000;

struct Loaded {
  Driver driver;
  bool ok = false;
  std::string why;
};

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

// Every entry point through `getProc`, then cuInit.
Loaded resolve(GetProc getProc) {
  Loaded l;
  std::string missing;
  auto entry = [&](const char* name, void** fn) {
    CUdriverProcAddressQueryResult status{};
    if (getProc(name, fn, kDriverAbi, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || *fn == nullptr)
      missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define TUTTI_CUDA_ENTRY(name) entry(#name, reinterpret_cast<void**>(&l.driver.name));
#include "kernels/cuda/cuda_entries.h"
#undef TUTTI_CUDA_ENTRY
  if (!missing.empty()) {
    l.why = "the CUDA driver lacks " + missing;
    return l;
  }
  {
    CUdriverProcAddressQueryResult status{};
    void* fn = nullptr;
    if (getProc("cuMemGetHandleForAddressRange", &fn, kDriverAbi, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS)
      l.driver.cuMemGetHandleForAddressRange = reinterpret_cast<decltype(l.driver.cuMemGetHandleForAddressRange)>(fn);
  }
  CUresult r = l.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    l.why = "cuInit failed: " + describe(l.driver, r, "cuInit");
    return l;
  }
  l.driver.cuDriverGetVersion(&l.driver.version);
  l.ok = true;
  return l;
}

Loaded load() {
  Loaded l;
  // The driver stays loaded for the process's lifetime: unloading it under a CUDA application
  // is unsafe.
  const std::string library = tunables::kCudaLibrary.get();
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    l.why = "no CUDA driver (" + library + ": " + (err ? err : "not found") + ")";
    return l;
  }
  auto getProc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (getProc == nullptr) {
    l.why = "the CUDA driver " + library + " is older than CUDA 12 (no cuGetProcAddress_v2)";
    return l;
  }
  return resolve(getProc);
}

}  // namespace

const Driver* driver(std::string* why) {
  static const Loaded loaded = load();
  if (why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.driver : nullptr;
}

const Driver* emulatedDriver() {
  static const Loaded loaded = [] {
    Loaded l = resolve(emulated::getProcAddress);
    l.driver.emulated = true;
    if (!l.ok) throw Error(ErrorCode::Internal, "the emulated CUDA driver: " + l.why);
    return l;
  }();
  return &loaded.driver;
}

std::string describe(const Driver& d, CUresult result, const char* call) {
  const char* text = nullptr;
  const char* name = nullptr;
  if (d.cuGetErrorString) d.cuGetErrorString(result, &text);
  if (d.cuGetErrorName) d.cuGetErrorName(result, &name);
  return std::string(call) + ": " + (text ? text : "unknown error") + " (" +
         (name ? name : "CUresult " + std::to_string(int(result))) + ")";
}

void check(const Driver& d, CUresult result, const char* call, const std::string& context) {
  if (result != CUDA_SUCCESS) throw Error(ErrorCode::System, context + ": " + describe(d, result, call));
}

}  // namespace tutti::kern::cuda
