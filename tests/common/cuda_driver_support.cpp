// The CUDA driver as the tests of the cuda backend reach it (cuda_driver_support.h).
#include "tests/common/cuda_driver_support.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace tutti_test {

namespace {

constexpr int kSuccess = 0, kNotReady = 600;

CudaDriver load() {
  const char* library = std::getenv("TUTTI_CUDA_LIBRARY");
  if (library == nullptr)
    throw std::runtime_error("TUTTI_CUDA_LIBRARY is not set: the tests of the cuda backend run on the emulated driver");
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::runtime_error(std::string("dlopen ") + library + ": " + dlerror());
  using GetProc = int (*)(const char*, void**, int, unsigned long long, int*);
  auto getProc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (getProc == nullptr) throw std::runtime_error(std::string(library) + " has no cuGetProcAddress_v2");
  CudaDriver d;
  auto entry = [&](const char* name, auto& fn) {
    void* p = nullptr;
    int status = 0;
    if (getProc(name, &p, 12000, 0, &status) != kSuccess || p == nullptr)
      throw std::runtime_error(std::string(library) + " lacks " + name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  entry("cuInit", d.cuInit);
  entry("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain);
  entry("cuCtxSetCurrent", d.cuCtxSetCurrent);
  entry("cuCtxGetCurrent", d.cuCtxGetCurrent);
  entry("cuStreamCreate", d.cuStreamCreate);
  entry("cuStreamDestroy", d.cuStreamDestroy);
  entry("cuStreamQuery", d.cuStreamQuery);
  entry("cuStreamSynchronize", d.cuStreamSynchronize);
  entry("cuMemAlloc", d.cuMemAlloc);
  entry("cuMemFree", d.cuMemFree);
  entry("cuMemcpyHtoD", d.cuMemcpyHtoD);
  entry("cuMemcpyDtoH", d.cuMemcpyDtoH);
  entry("cuMemGetInfo", d.cuMemGetInfo);
  entry("cuDevicePrimaryCtxGetState", d.cuDevicePrimaryCtxGetState);
  entry("cuCtxGetDevice", d.cuCtxGetDevice);
  if (d.cuInit(0) != kSuccess) throw std::runtime_error(std::string(library) + ": cuInit failed");
  return d;
}

void checked(int result, const char* call) {
  if (result != kSuccess) throw std::runtime_error(std::string(call) + " failed: CUresult " + std::to_string(result));
}

class DriverBuffers final : public CaseBuffers {
 public:
  DriverBuffers() : d_(CudaDriver::get()) {
    d_.useDevice(0);
    checked(d_.cuStreamCreate(&stream_, 1), "cuStreamCreate");
  }
  ~DriverBuffers() override { d_.cuStreamDestroy(stream_); }
  void* allocate(size_t bytes) override {
    CudaDriver::Ptr p = 0;
    checked(d_.cuMemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  void release(void* p) override { d_.cuMemFree(reinterpret_cast<CudaDriver::Ptr>(p)); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) checked(d_.cuMemcpyHtoD(reinterpret_cast<CudaDriver::Ptr>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) checked(d_.cuMemcpyDtoH(dst, reinterpret_cast<CudaDriver::Ptr>(src), bytes), "cuMemcpyDtoH");
  }
  cudaStream_t stream() override { return static_cast<cudaStream_t>(stream_); }
  void synchronize() override { checked(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

 private:
  const CudaDriver& d_;
  void* stream_ = nullptr;
};

}  // namespace

const CudaDriver& CudaDriver::get() {
  static const CudaDriver driver = load();
  return driver;
}

void CudaDriver::useDevice(int device) const {
  void* ctx = nullptr;
  checked(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  checked(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

bool CudaDriver::active(int device) const {
  unsigned flags = 0;
  int on = 0;
  checked(cuDevicePrimaryCtxGetState(device, &flags, &on), "cuDevicePrimaryCtxGetState");
  return on != 0;
}

size_t CudaDriver::usedBytes() const {
  size_t free = 0, total = 0;
  checked(cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return total - free;
}

bool CudaDriver::waitFor(void* stream, double seconds) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const int r = cuStreamQuery(stream);
    if (r != kNotReady) return r == kSuccess;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::unique_ptr<CaseBuffers> makeDriverBuffers() { return std::make_unique<DriverBuffers>(); }

}  // namespace tutti_test
