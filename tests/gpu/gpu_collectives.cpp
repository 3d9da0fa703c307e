// Every collective, data type and reduction through the cuda backend on a real GPU, ranks as
// threads sharing the device (TUTTI_ALLOW_SHARED_GPU=1), buffers in device memory on each rank's
// own stream:
//  1. each result against the float64 reference of tests/common (as every host test does);
//  2. each result bitwise against the host executor's for the same case, algorithm and channel
//     count (the same plan and tiling reduce in the same order on both executors).
// Prints one line per rank count and algorithm, and a summary. Exit status: 0 all right, 1 wrong
// values, 77 no CUDA device (skipped).
//   tutti_gpu_collectives [RANKS...]      (default 1 2 4 8)
//   tutti_gpu_collectives RANKS --smoke   one float32 all-reduce of 1023 and 1M elements only
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/backend_compare_support.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace {

using tutti_test::Case;

// Device buffers on the rank's own stream (a stream per rank: ranks sharing one GPU must not
// share a stream, or each kernel would wait behind the others'). One region is allocated up front
// and handed out in turn: cudaFree waits for the whole device, where the other ranks' kernels may
// be waiting for this rank's next call.
class DeviceBuffers final : public tutti_test::CaseBuffers {
 public:
  explicit DeviceBuffers(size_t bytes) : bytes_(bytes) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaMalloc(&region_, bytes), "cudaMalloc");
  }
  ~DeviceBuffers() override {
    cudaFree(region_);
    cudaStreamDestroy(stream_);
  }
  void* allocate(size_t bytes) override {
    const size_t at = used_;
    used_ += (bytes + 255) / 256 * 256;
    if (used_ > bytes_) throw tutti_test::RankFailure("the test's device region is too small");
    live_++;
    return region_ + at;
  }
  void release(void*) override {
    if (--live_ == 0) used_ = 0;
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void download(void* dst, const void* src, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  cudaStream_t stream() override { return stream_; }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (the collective)"); }

 private:
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw tutti_test::RankFailure(std::string(what) + ": " + cudaGetErrorString(e));
  }
  cudaStream_t stream_ = nullptr;
  char* region_ = nullptr;
  size_t bytes_ = 0, used_ = 0;
  int live_ = 0;
};

// Device buffers of 256 MiB for each rank, on device 0 (made on the rank's thread).
std::unique_ptr<tutti_test::CaseBuffers> deviceBuffers(int) {
  cudaSetDevice(0);
  return std::make_unique<DeviceBuffers>(size_t(256) << 20);
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  std::vector<int> rankCounts;
  bool smoke = false;
  for (int i = 1; i < argc; i++) {
    if (std::string(argv[i]) == "--smoke")
      smoke = true;
    else
      rankCounts.push_back(std::atoi(argv[i]));
  }
  if (rankCounts.empty()) rankCounts = {1, 2, 4, 8};
  setenv("TUTTI_ALLOW_SHARED_GPU", "1", 1);
  setenv("TUTTI_CALIBRATE", "0", 1);  // both backends' selectors then see the same fabric
  setenv("TUTTI_TIMEOUT", "60", 0);
  size_t totalWrong = 0, totalDiffer = 0, totalCases = 0, totalCompared = 0;
  if (smoke) {
    const std::vector<Case> cases = {
        Case{tutti_test::Coll::AllReduce, ncclFloat32, ncclSum, 1023, false, 0},
        Case{tutti_test::Coll::AllReduce, ncclFloat32, ncclSum, size_t(1) << 20, false, 0}};
    for (int nranks : rankCounts) {
      tutti_test::BackendRun gpu = tutti_test::runBackend("cuda", nranks, cases, deviceBuffers);
      std::printf("%s smoke: %d ranks, %zu all-reduces (%s), wrong %zu%s%s\n", gpu.wrong == 0 ? "ok  " : "FAIL", nranks,
                  cases.size(), gpu.algorithms.back().c_str(), gpu.wrong, gpu.firstFailure.empty() ? "" : ": ",
                  gpu.firstFailure.c_str());
      if (gpu.wrong) return 1;
    }
    return 0;
  }
  for (int nranks : rankCounts)
    for (const char* algorithm : {"", "ring", "tree"}) {
      if (*algorithm)
        setenv("NCCL_ALGO", algorithm, 1);
      else
        unsetenv("NCCL_ALGO");
      // Counts: none, one, odd, a few tiles, and several chunks over several channels.
      const std::vector<Case> cases = tutti_test::allCases({0, 1, 7, 1023, (size_t(1) << 18) + 5}, nranks);
      auto start = std::chrono::steady_clock::now();
      tutti_test::BackendRun host = tutti_test::runBackend("host", nranks, cases);
      tutti_test::BackendRun gpu = tutti_test::runBackend("cuda", nranks, cases, deviceBuffers);
      tutti_test::BitwiseComparison bitwise = tutti_test::compareBitwise(cases, nranks, host, gpu);
      const size_t compared = bitwise.compared, differ = bitwise.differ;
      const std::string& firstDiff = bitwise.firstDifference;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf(
          "%s %d ranks, NCCL_ALGO=%s: %zu cases, wrong host %zu cuda %zu; bitwise compared %zu, differ %zu (%.1f s)\n",
          gpu.wrong + host.wrong + differ == 0 ? "ok  " : "FAIL", nranks, *algorithm ? algorithm : "(selector)",
          cases.size(), host.wrong, gpu.wrong, compared, differ, seconds);
      if (!host.firstFailure.empty()) std::printf("     first failure: %s\n", host.firstFailure.c_str());
      if (!gpu.firstFailure.empty()) std::printf("     first failure: %s\n", gpu.firstFailure.c_str());
      if (!firstDiff.empty()) std::printf("     first bitwise difference: %s\n", firstDiff.c_str());
      std::fflush(stdout);
      totalWrong += host.wrong + gpu.wrong;
      totalDiffer += differ;
      totalCases += cases.size();
      totalCompared += compared;
    }
  std::printf("== %zu cases per backend, %zu wrong, %zu compared bitwise, %zu differ\n", totalCases, totalWrong,
              totalCompared, totalDiffer);
  return totalWrong + totalDiffer == 0 ? 0 : 1;
}
