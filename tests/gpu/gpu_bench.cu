// The GPU benchmark of tests/gpu/run.sh (figures, not a test: it fails only on a wrong result):
//  1. the device executor's copy and reduce loops (kernels/device/block_mover.h) over a whole
//     GPU, against cudaMemcpyAsync device-to-device, in memory traffic per second;
//  2. all-reduce through the cuda backend with 2 ranks as threads sharing the GPU: the median
//     time per call from 8 bytes up, against cudaMemcpyAsync of the same bytes;
//  3. the copy loop with 1, 2, 4, ... blocks of the executor's size up to one per SM, from 1 MiB
//     up to 256 MiB: what one channel (a block) moves, and how many it takes to reach the
//     memory's speed, beside cudaMemcpyAsync of the same bytes.
// Prints Markdown tables. Exit status: 0, 1 on a wrong result, 77 without a CUDA device.
//   tutti_gpu_bench [MAXBYTES]   (default 1 GiB for the loops, 256 MiB for all-reduce and the
//                                 copy by blocks; run.sh passes 64 MiB)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/executor_params.h"
#include "kernels/device/block_mover.h"
#include "nccl.h"

namespace {

using tutti::kern::dev::blockCopy;
using tutti::kern::dev::blockReduce;
using tutti::kern::dev::kExecutorThreads;

#define CHECK_CUDA(call)                                                              \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      std::printf("FAIL %s: %s (line %d)\n", #call, cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

// Each block takes its slice of the buffer, as each channel takes its range of an operation.
__global__ void __launch_bounds__(kExecutorThreads) copyKernel(char* dst, const char* src, size_t bytes) {
  const size_t per = (bytes / gridDim.x + 15) / 16 * 16;
  const size_t begin = min(bytes, per * blockIdx.x), end = min(bytes, begin + per);
  blockCopy(dst + begin, nullptr, src + begin, end - begin);
}

__global__ void __launch_bounds__(kExecutorThreads) reduceKernel(float* dst, const float* a, const float* b, size_t n) {
  const size_t per = (n / gridDim.x + 3) / 4 * 4;
  const size_t begin = min(n, per * blockIdx.x), end = min(n, begin + per);
  tutti::kern::ElementReducer<float, tutti::kern::OpSum, false, false> sum;
  blockReduce<float>(dst + begin, nullptr, a + begin, b + begin, end - begin, sum);
}

__global__ void fillKernel(float* p, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(i % 1024) * scale;
}

__global__ void countDifferentWords(const uint32_t* a, const uint32_t* b, size_t n, unsigned long long* differ) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    mine += a[i] != b[i];
  if (mine != 0) atomicAdd(differ, mine);
}

// A reusable barrier for the rank threads (nvcc here builds C++17: no std::barrier).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned long generation = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      generation_++;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_, waiting_ = 0;
  unsigned long generation_ = 0;
};

template <typename Fn>
double medianMs(int iterations, Fn&& fn) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  fn();  // warm-up
  for (int i = 0; i < iterations; i++) {
    CHECK_CUDA(cudaEventRecord(start));
    fn();
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return times[times.size() / 2];
}

void loops(size_t maxBytes, int sms) {
  std::printf("\n### Copy and reduce loops against cudaMemcpyAsync (device to device)\n\n");
  std::printf(
      "| bytes | memcpy GB/s | copy loop GB/s | copy/memcpy | reduce loop GB/s | reduce/memcpy "
      "|\n|---|---|---|---|---|---|\n");
  char *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&a, maxBytes));
  CHECK_CUDA(cudaMalloc(&b, maxBytes));
  CHECK_CUDA(cudaMalloc(&c, maxBytes));
  fillKernel<<<1024, 256>>>(reinterpret_cast<float*>(a), maxBytes / 4, 1.0f);
  fillKernel<<<1024, 256>>>(reinterpret_cast<float*>(b), maxBytes / 4, 0.5f);
  CHECK_CUDA(cudaDeviceSynchronize());
  for (size_t bytes = size_t(16) << 20; bytes <= maxBytes; bytes *= 4) {
    // Memory traffic: a copy reads and writes each byte; a reduction reads two and writes one.
    const double memcpyMs = medianMs(20, [&] { CHECK_CUDA(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice)); });
    const double copyMs = medianMs(20, [&] { copyKernel<<<sms * 2, kExecutorThreads>>>(c, a, bytes); });
    const double reduceMs = medianMs(20, [&] {
      reduceKernel<<<sms * 2, kExecutorThreads>>>(reinterpret_cast<float*>(c), reinterpret_cast<float*>(a),
                                                  reinterpret_cast<float*>(b), bytes / 4);
    });
    const double memcpyGBs = 2.0 * bytes / memcpyMs / 1e6, copyGBs = 2.0 * bytes / copyMs / 1e6,
                 reduceGBs = 3.0 * bytes / reduceMs / 1e6;
    std::printf("| %zu MiB | %.0f | %.0f | %.2f | %.0f | %.2f |\n", bytes >> 20, memcpyGBs, copyGBs,
                copyGBs / memcpyGBs, reduceGBs, reduceGBs / memcpyGBs);
  }
  // The reduction's result, checked on the host at a few places.
  const size_t n = maxBytes / 4;
  std::vector<float> host(16);
  for (size_t k = 0; k < 16; k++) {
    const size_t i = (n - 1) / 15 * k;
    CHECK_CUDA(cudaMemcpy(&host[k], reinterpret_cast<float*>(c) + i, 4, cudaMemcpyDeviceToHost));
    const float want = float(i % 1024) * 1.0f + float(i % 1024) * 0.5f;
    if (host[k] != want) {
      std::printf("FAIL reduce loop: element %zu is %g, want %g\n", i, host[k], want);
      std::exit(1);
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

// The copy loop by number of blocks (one line per size and count), each block copying its slice as
// a channel copies its range: 1, 2, 4, ... blocks, and one per SM. Median of 5 runs after one to
// warm up; the traffic is read plus written bytes, as in loops().
void copyByBlocks(size_t maxBytes, int sms) {
  std::printf(
      "\n### Copy loop by blocks of %d threads (one per SM at most) against cudaMemcpyAsync (device to device)\n\n",
      kExecutorThreads);
  std::printf(
      "| bytes | blocks | copy loop GB/s | GB/s per block | memcpy GB/s | copy/memcpy |\n|---|---|---|---|---|---|\n");
  const size_t top = std::min(maxBytes, size_t(256) << 20);
  char *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, top));
  CHECK_CUDA(cudaMalloc(&dst, top));
  fillKernel<<<1024, 256>>>(reinterpret_cast<float*>(src), top / 4, 1.0f);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> counts;
  for (int blocks = 1; blocks < sms; blocks *= 2) counts.push_back(blocks);
  counts.push_back(sms);
  size_t largest = 0;  // the largest copy, which the check below reads back
  for (size_t bytes = size_t(1) << 20; bytes <= top; bytes *= 4) {
    largest = bytes;
    const double memcpyGBs =
        2.0 * bytes / medianMs(5, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }) /
        1e6;
    for (int blocks : counts) {
      const double copyGBs =
          2.0 * bytes / medianMs(5, [&] { copyKernel<<<blocks, kExecutorThreads>>>(dst, src, bytes); }) / 1e6;
      std::printf("| %zu MiB | %d | %.0f | %.1f | %.0f | %.2f |\n", bytes >> 20, blocks, copyGBs, copyGBs / blocks,
                  memcpyGBs, copyGBs / memcpyGBs);
    }
  }
  CHECK_CUDA(cudaGetLastError());
  // Every byte of the largest copy checked, over a destination cleared first, with one block, an
  // odd count (uneven slices, a last partial group of packs) and one per SM.
  unsigned long long* bad = nullptr;
  CHECK_CUDA(cudaMalloc(&bad, sizeof *bad));
  for (int blocks : {1, 3, sms}) {
    if (largest == 0) break;
    CHECK_CUDA(cudaMemset(dst, 0xff, largest));
    CHECK_CUDA(cudaMemset(bad, 0, sizeof *bad));
    copyKernel<<<blocks, kExecutorThreads>>>(dst, src, largest);
    countDifferentWords<<<1024, 256>>>(reinterpret_cast<const uint32_t*>(dst), reinterpret_cast<const uint32_t*>(src),
                                       largest / 4, bad);
    unsigned long long differ = 0;
    CHECK_CUDA(cudaMemcpy(&differ, bad, sizeof differ, cudaMemcpyDeviceToHost));
    if (differ != 0) {
      std::printf("FAIL copy loop, %d block(s): %llu of %zu words differ\n", blocks, differ, largest / 4);
      std::exit(1);
    }
  }
  cudaFree(bad);
  cudaFree(src);
  cudaFree(dst);
}

// 2 ranks as threads sharing the GPU, each on its own stream; both launch each call together
// (a barrier between calls) and rank 0's stream is timed with events.
void allReduce(size_t maxBytes) {
  std::printf("\n### All-reduce, 2 ranks sharing the GPU (float32 sum), against cudaMemcpyAsync of the same bytes\n\n");
  std::printf("| bytes | all-reduce us | memcpy us | ratio | busbw GB/s |\n|---|---|---|---|---|\n");
  setenv("TUTTI_ALLOW_SHARED_GPU", "1", 1);
  setenv("TUTTI_DEVICE", "cuda", 1);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  const int nranks = 2;
  std::vector<size_t> sizes;
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 8) sizes.push_back(bytes);
  std::vector<std::vector<double>> times(size_t(nranks), std::vector<double>(sizes.size()));
  std::vector<double> memcpyUs(sizes.size());
  Barrier sync(nranks);
  bool wrong = false;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; rank++)
    threads.emplace_back([&, rank] {
      CHECK_CUDA(cudaSetDevice(0));
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        std::printf("FAIL ncclCommInitRank: %s\n", ncclGetLastError(nullptr));
        std::exit(1);
      }
      cudaStream_t stream;
      CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      float *in = nullptr, *out = nullptr;
      CHECK_CUDA(cudaMalloc(&in, maxBytes));
      CHECK_CUDA(cudaMalloc(&out, maxBytes));
      fillKernel<<<1024, 256, 0, stream>>>(in, maxBytes / 4, float(rank + 1));
      cudaEvent_t start, stop;
      CHECK_CUDA(cudaEventCreate(&start));
      CHECK_CUDA(cudaEventCreate(&stop));
      for (size_t s = 0; s < sizes.size(); s++) {
        const size_t count = sizes[s] / 4 == 0 ? 2 : sizes[s] / 4;
        const int iterations = sizes[s] >= (size_t(64) << 20) ? 10 : 50;
        std::vector<float> samples;
        for (int i = -3; i < iterations; i++) {
          sync.arrive_and_wait();
          CHECK_CUDA(cudaEventRecord(start, stream));
          if (ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
            std::printf("FAIL ncclAllReduce: %s\n", ncclGetLastError(comm));
            std::exit(1);
          }
          CHECK_CUDA(cudaEventRecord(stop, stream));
          CHECK_CUDA(cudaEventSynchronize(stop));
          float ms = 0;
          CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
          if (i >= 0) samples.push_back(ms * 1000);
        }
        std::sort(samples.begin(), samples.end());
        times[size_t(rank)][s] = samples[samples.size() / 2];
        // (rank + 1) summed over ranks 1 and 2: 3 x the fill pattern.
        float last = 0;
        const size_t i = count - 1;
        CHECK_CUDA(cudaMemcpy(&last, out + i, 4, cudaMemcpyDeviceToHost));
        if (last != float(i % 1024) * 3.0f) wrong = true;
        if (rank == 0) {
          sync.arrive_and_wait();  // the other rank idles while the copy is timed
          memcpyUs[s] = 1000 * medianMs(iterations, [&] {
                          CHECK_CUDA(cudaMemcpyAsync(out, in, count * 4, cudaMemcpyDeviceToDevice));
                        });
          sync.arrive_and_wait();
        } else {
          sync.arrive_and_wait();
          sync.arrive_and_wait();
        }
      }
      cudaFree(in);
      cudaFree(out);
      ncclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  for (size_t s = 0; s < sizes.size(); s++) {
    const double us = times[0][s];
    const double bytes = double(std::max<size_t>(sizes[s], 8));
    std::printf("| %zu | %.1f | %.1f | %.2f | %.1f |\n", sizes[s], us, memcpyUs[s], us / memcpyUs[s],
                bytes / us / 1e3 * 2.0 * (nranks - 1) / nranks);
  }
  if (wrong) {
    std::printf("FAIL: an all-reduce gave a wrong result\n");
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const size_t maxBytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : size_t(1) << 30;
  std::printf("## %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  loops(maxBytes, prop.multiProcessorCount);
  allReduce(std::min(maxBytes, size_t(256) << 20));
  copyByBlocks(maxBytes, prop.multiProcessorCount);  // last: run.sh's summary shows a step's first lines
  return 0;
}
