// The reduction functors of kernels/reduce.h built by nvcc for the GPU, every type and
// operation, so the header shared with the host executor cannot drift into host-only code;
// plus a check of the shared conversions against CUDA's own, runnable where a GPU is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtypes.h"
#include "kernels/reduce.h"

namespace tutti::kern::cuda_seam {

// dst[i] = reducer(a[i], b[i]), or reducer.first(b[i]) without a: the host loops' contract.
template <typename T, typename Op, bool kPre, bool kPost>
__global__ void reduceKernel(T* dst, const T* a, const T* b, size_t n, ElementReducer<T, Op, kPre, kPost> reducer) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = a != nullptr ? reducer(a[i], b[i]) : reducer.first(b[i]);
  }
}

// Runs reduceKernel over device buffers on the default stream; for tests/gpu, whose own
// translation unit cannot launch a kernel template defined here.
template <typename T, typename Op, bool kPre, bool kPost>
cudaError_t launchReduce(T* dst, const T* a, const T* b, size_t n, ElementReducer<T, Op, kPre, kPost> reducer) {
  reduceKernel<<<264, 256>>>(dst, a, b, n, reducer);
  return cudaGetLastError();
}

// Every operation the host executor runs, for every type: sum, prod, max, min, PreMulSum
// (sum with pre) and SumPostDiv (sum with post).
#define TUTTI_SEAM_KERNEL(T, Op, kPre, kPost)                                                    \
  template __global__ void reduceKernel<T, Op, kPre, kPost>(T*, const T*, const T*, size_t,      \
                                                            ElementReducer<T, Op, kPre, kPost>); \
  template cudaError_t launchReduce<T, Op, kPre, kPost>(T*, const T*, const T*, size_t,          \
                                                        ElementReducer<T, Op, kPre, kPost>);
#define TUTTI_SEAM_ALL_OPS(T)                \
  TUTTI_SEAM_KERNEL(T, OpSum, false, false)  \
  TUTTI_SEAM_KERNEL(T, OpProd, false, false) \
  TUTTI_SEAM_KERNEL(T, OpMax, false, false)  \
  TUTTI_SEAM_KERNEL(T, OpMin, false, false)  \
  TUTTI_SEAM_KERNEL(T, OpSum, true, false)   \
  TUTTI_SEAM_KERNEL(T, OpSum, false, true)

TUTTI_SEAM_ALL_OPS(int8_t)
TUTTI_SEAM_ALL_OPS(uint8_t)
TUTTI_SEAM_ALL_OPS(int32_t)
TUTTI_SEAM_ALL_OPS(uint32_t)
TUTTI_SEAM_ALL_OPS(int64_t)
TUTTI_SEAM_ALL_OPS(uint64_t)
TUTTI_SEAM_ALL_OPS(half_t)
TUTTI_SEAM_ALL_OPS(float)
TUTTI_SEAM_ALL_OPS(double)
TUTTI_SEAM_ALL_OPS(bf16_t)
TUTTI_SEAM_ALL_OPS(fp8e4m3_t)
TUTTI_SEAM_ALL_OPS(fp8e5m2_t)

#undef TUTTI_SEAM_ALL_OPS
#undef TUTTI_SEAM_KERNEL

// Counts disagreements between the shared conversions and CUDA's (the hardware's cvt
// instructions on the GPU): float bit pattern firstPattern + thread * stride narrowed to each
// type and, when widenCodes, every 16- and 8-bit code widened. NaN agrees with any NaN.
__global__ void conversionCheckKernel(unsigned long long* mismatches, uint32_t firstPattern, uint32_t stride,
                                      bool widenCodes) {
  uint32_t thread = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long bad = 0;
  if (widenCodes && thread < 65536u) {
    __half_raw halfRaw;
    halfRaw.x = uint16_t(thread);
    float mine = half_t{uint16_t(thread)}.toFloat(), theirs = __half2float(__half(halfRaw));
    bad += !(mine == theirs || (mine != mine && theirs != theirs));
    __nv_bfloat16_raw bfRaw;
    bfRaw.x = uint16_t(thread);
    mine = bf16_t{uint16_t(thread)}.toFloat();
    theirs = __bfloat162float(__nv_bfloat16(bfRaw));
    bad += !(mine == theirs || (mine != mine && theirs != theirs));
  }
  if (widenCodes && thread < 256u) {
    __nv_fp8_e4m3 e4m3;
    e4m3.__x = uint8_t(thread);
    float mine = fp8e4m3_t{uint8_t(thread)}.toFloat(), theirs = float(e4m3);
    bad += !(mine == theirs || (mine != mine && theirs != theirs));
    __nv_fp8_e5m2 e5m2;
    e5m2.__x = uint8_t(thread);
    mine = fp8e5m2_t{uint8_t(thread)}.toFloat();
    theirs = float(e5m2);
    bad += !(mine == theirs || (mine != mine && theirs != theirs));
  }
  uint64_t pattern = firstPattern + uint64_t(thread) * stride;
  if (pattern <= 0xffffffffull) {
    float value = __uint_as_float(uint32_t(pattern));
    bool isNan = value != value;
    __half_raw halfRaw = __float2half_rn(value);
    uint32_t mine = half_t::fromFloat(value).bits;
    bad += isNan ? ((mine & 0x7c00u) != 0x7c00u || (mine & 0x3ffu) == 0) : mine != halfRaw.x;
    __nv_bfloat16_raw bfRaw = __float2bfloat16_rn(value);
    mine = bf16_t::fromFloat(value).bits;
    bad += isNan ? ((mine & 0x7f80u) != 0x7f80u || (mine & 0x7fu) == 0) : mine != bfRaw.x;
    mine = fp8e4m3_t::fromFloat(value).bits;
    bad += isNan ? (mine & 0x7fu) != 0x7fu : mine != __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
    mine = fp8e5m2_t::fromFloat(value).bits;
    bad += isNan ? ((mine & 0x7cu) != 0x7cu || (mine & 3u) == 0)
                 : mine != __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2);
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

// Runs conversionCheckKernel over all 2^32 float patterns (in strides) on the current device.
// Returns the number of disagreements, or -1 if CUDA failed. For tests/gpu, where a GPU is.
long long countConversionMismatches() {
  unsigned long long* counter = nullptr;
  if (cudaMalloc(&counter, sizeof *counter) != cudaSuccess) return -1;
  long long result = -1;
  if (cudaMemset(counter, 0, sizeof *counter) == cudaSuccess) {
    // 2^24 threads a launch, patterns 256 apart; 256 launches, each starting one further,
    // cover all 2^32.
    const uint32_t threads = 256, blocks = (1u << 24) / threads;
    bool launched = true;
    for (uint32_t first = 0; first < 256 && launched; ++first) {
      conversionCheckKernel<<<blocks, threads>>>(counter, first, 256, first == 0);
      launched = cudaGetLastError() == cudaSuccess;
    }
    unsigned long long host = 0;
    if (launched && cudaMemcpy(&host, counter, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess)
      result = (long long)host;
  }
  cudaFree(counter);
  return result;
}

}  // namespace tutti::kern::cuda_seam
