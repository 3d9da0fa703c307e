// What NCCL's users rely on beyond right values, through the cuda backend on a real GPU, ranks as
// threads sharing device 0 (TUTTI_ALLOW_SHARED_GPU=1):
//  1. stream order: the user's kernel writes the input, the all-reduce follows on the same stream,
//     the user's next kernel reads the output; the host returns before the GPU is done;
//  2. the device: ncclCommCuDevice is the device current at ncclCommInitRank (cudaSetDevice);
//  3. a timeout: a rank whose peer never calls stops within TUTTI_TIMEOUT (+ slack), and
//     ncclCommGetAsyncError names the peer and the operation;
//  4. abort: ncclCommAbort from the host ends a kernel stuck on an absent peer within a second;
//  5. graph capture: a collective on a capturing stream is refused with ncclInvalidUsage.
// Exit status 0: all held; 1: some failed (each listed); 77: no CUDA device (skipped).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) failures++;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

__global__ void fill(float* x, size_t n, float value, long long spinCycles) {
  // A slow producer: if the collective did not wait for it, it would read the old values.
  const long long start = clock64();
  while (clock64() - start < spinCycles) {
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] = value;
}

__global__ void scale(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] *= factor;
}

// Two ranks as threads; body(rank, comm, stream) on each.
template <typename Body>
void twoRanks(Body body) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; r++)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
        expect(false, "rank " + std::to_string(r) + ": ncclCommInitRank: " + ncclGetLastError(nullptr));
        return;
      }
      body(r, comm, stream);
      cudaStreamDestroy(stream);
    });
  for (auto& t : threads) t.join();
}

void streamOrder() {
  const size_t n = size_t(1) << 22;
  twoRanks([&](int rank, ncclComm_t comm, cudaStream_t stream) {
    float* x = nullptr;
    cudaMalloc(&x, n * sizeof(float));
    cudaMemsetAsync(x, 0, n * sizeof(float), stream);
    fill<<<64, 256, 0, stream>>>(x, n, float(rank + 1), 200000000LL);  // ~0.1 s of spinning first
    auto start = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream);
    const double enqueue = secondsSince(start);
    scale<<<64, 256, 0, stream>>>(x, n, 2.0f);
    std::vector<float> out(n);
    cudaMemcpyAsync(out.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    size_t wrong = 0;
    for (float v : out) wrong += v != 6.0f;  // (1 + 2) * 2
    expect(r == ncclSuccess && wrong == 0, "stream order, rank " + std::to_string(rank) + ": " + std::to_string(wrong) +
                                               " wrong of " + std::to_string(n) + " after fill -> all-reduce -> scale");
    expect(enqueue < 0.05, "stream order, rank " + std::to_string(rank) + ": ncclAllReduce returned in " +
                               std::to_string(enqueue * 1e3) + " ms, before the GPU was done");
    int device = -1;
    ncclCommCuDevice(comm, &device);
    expect(device == 0, "rank " + std::to_string(rank) + ": ncclCommCuDevice " + std::to_string(device) +
                            " (the current device, 0)");
    cudaFree(x);
    ncclCommDestroy(comm);
  });
}

// Rank 1 never calls: rank 0's kernel waits for it until a timeout or an abort ends the wait.
void stuckPeer(bool abortIt) {
  const size_t n = 1 << 20;
  setenv("TUTTI_TIMEOUT", "3", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  twoRanks([&](int rank, ncclComm_t comm, cudaStream_t stream) {
    comms[rank] = comm;
    if (rank == 1) return;
    float* x = nullptr;
    cudaMalloc(&x, n * sizeof(float));
    auto start = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream);
    std::thread aborter;
    if (abortIt)
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        ncclCommAbort(comm);
      });
    const cudaError_t synced = cudaStreamSynchronize(stream);
    const double seconds = secondsSince(start);
    if (aborter.joinable()) aborter.join();
    if (abortIt) {
      expect(r == ncclSuccess && synced == cudaSuccess && seconds < 1.5,
             "abort: the stuck kernel ended " + std::to_string(seconds) + " s after the call (abort at 0.5 s)");
    } else {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      const std::string message = ncclGetLastError(comm);
      expect(synced == cudaSuccess && seconds < 6,
             "timeout: the kernel gave up after " + std::to_string(seconds) + " s (TUTTI_TIMEOUT=3)");
      expect(async == ncclRemoteError || async == ncclSystemError || async == ncclInternalError,
             std::string("timeout: ncclCommGetAsyncError reports ") + ncclGetErrorString(async));
      expect(message.find("rank 1") != std::string::npos && message.find("AllReduce") != std::string::npos,
             "timeout: the message names the peer and the operation: " + message);
      ncclCommAbort(comm);
    }
    cudaFree(x);
  });
  if (comms[1]) ncclCommAbort(comms[1]);
  unsetenv("TUTTI_TIMEOUT");
}

void captureRefused() {
  twoRanks([&](int rank, ncclComm_t comm, cudaStream_t stream) {
    float* x = nullptr;
    cudaMalloc(&x, 1024 * sizeof(float));
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    ncclResult_t r = ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comm, stream);
    const std::string message = ncclGetLastError(comm);
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    expect(r == ncclInvalidUsage && message.find("captured into a CUDA graph") != std::string::npos,
           "capture, rank " + std::to_string(rank) + ": " + ncclGetErrorString(r) + ": " + message);
    cudaFree(x);
    ncclCommDestroy(comm);
  });
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  setenv("TUTTI_DEVICE", "cuda", 1);
  setenv("TUTTI_ALLOW_SHARED_GPU", "1", 1);
  streamOrder();
  stuckPeer(false);
  stuckPeer(true);
  captureRefused();
  std::printf("== %d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
