// The checks of the code shared by the host and CUDA executors that need a GPU to run:
//  1. the shared conversions (half, bf16, fp8) against CUDA's own over every float bit pattern;
//  2. every reduction functor of kernels/reduce.h, for every type and operation, run by the GPU
//     and by the host on the same inputs: the results must be bitwise equal (so that a reduction
//     gives the same bytes whichever executor runs it; a contracted multiply-add on one side
//     would show here), and for the full-precision types equal to a float64 (or 64-bit integer)
//     reference computed here.
// Exit status 0: all agree; 1: disagreements (listed); 77: no usable CUDA device (skipped).
#include <cuda_runtime.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dtypes.h"
#include "kernels/reduce.h"

namespace tutti::kern::cuda_seam {
long long countConversionMismatches();  // kernels/cuda/reduce_seam.cu
template <typename T, typename Op, bool kPre, bool kPost>
cudaError_t launchReduce(T* dst, const T* a, const T* b, size_t n, ElementReducer<T, Op, kPre, kPost> reducer);
}  // namespace tutti::kern::cuda_seam

namespace {

using namespace tutti::kern;

int failures = 0;

void fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  failures++;
}

template <typename T>
constexpr bool kLowPrecision = std::is_same_v<T, half_t> || std::is_same_v<T, bf16_t> || std::is_same_v<T, fp8e4m3_t> ||
                               std::is_same_v<T, fp8e5m2_t>;

template <typename T>
uint64_t bitsOf(T v) {
  uint64_t out = 0;
  std::memcpy(&out, &v, sizeof v);
  return out;
}

template <typename T>
bool isNan(T v) {
  if constexpr (kLowPrecision<T>)
    return std::isnan(v.toFloat());
  else if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

// Equal bits, or both NaN (the payload of a NaN is not part of the contract).
template <typename T>
bool same(T a, T b) {
  return bitsOf(a) == bitsOf(b) || (isNan(a) && isNan(b));
}

// Inputs: random bit patterns for the narrow types (every code, NaN and inf included), random
// values over many magnitudes with a few special ones for float and double, random bits for
// integers.
template <typename T>
std::vector<T> inputs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) {
    uint64_t bits = rng();
    if constexpr (kLowPrecision<T> || std::is_integral_v<T>) {
      std::memcpy(&v[i], &bits, sizeof(T));
    } else {
      std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
      std::uniform_int_distribution<int> exponent(-30, 30);
      double x = std::ldexp(mantissa(rng), exponent(rng));
      switch (bits % 64) {
        case 0: x = INFINITY; break;
        case 1: x = -0.0; break;
        case 2: x = NAN; break;
        case 3: x = std::ldexp(1.0, std::is_same_v<T, float> ? -140 : -1060); break;  // subnormal
        default: break;
      }
      v[i] = T(x);
    }
  }
  return v;
}

// The float64 / 64-bit reference of `a OP b` for the full-precision types (no pre or post), or
// false when the operation has none here.
template <typename T, typename Op>
bool reference(T a, T b, T* out) {
  if constexpr (kLowPrecision<T>) {
    return false;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (std::is_same_v<Op, OpSum>)
      *out = T(U(uint64_t(a) + uint64_t(b)));
    else if constexpr (std::is_same_v<Op, OpProd>)
      *out = T(U(uint64_t(a) * uint64_t(b)));
    else if constexpr (std::is_same_v<Op, OpMax>)
      *out = a > b ? a : b;
    else
      *out = a < b ? a : b;
    return true;
  } else {
    // float: the double result of one operation on two floats rounds to the correctly rounded
    // float result. double: the host's IEEE double operation.
    using Wide = double;
    Wide x = a, y = b;
    if constexpr (std::is_same_v<Op, OpSum>)
      *out = T(x + y);
    else if constexpr (std::is_same_v<Op, OpProd>)
      *out = T(x * y);
    else if constexpr (std::is_same_v<Op, OpMax>)
      *out = (std::isnan(a) || std::isnan(b)) ? T(NAN) : (a > b ? a : b);
    else
      *out = (std::isnan(a) || std::isnan(b)) ? T(NAN) : (a < b ? a : b);
    return true;
  }
}

template <typename T, typename Op, bool kPre, bool kPost>
void checkOne(const char* typeName, const char* opName, size_t n, bool withA) {
  using Reducer = ElementReducer<T, Op, kPre, kPost>;
  Reducer reducer;
  if constexpr (kPre) reducer.preScalar = typename Reducer::Compute(std::is_integral_v<T> ? 3 : 0.37);
  if constexpr (kPost) reducer.postDivisor.count = 7;
  std::vector<T> a = inputs<T>(n, 1 + n), b = inputs<T>(n, 2 + n), got(n);
  T *da = nullptr, *db = nullptr, *dd = nullptr;
  std::string what = std::string(typeName) + " " + opName + (withA ? "" : " first") + " n=" + std::to_string(n);
  if (cudaMalloc(&da, n * sizeof(T)) != cudaSuccess || cudaMalloc(&db, n * sizeof(T)) != cudaSuccess ||
      cudaMalloc(&dd, n * sizeof(T)) != cudaSuccess) {
    fail(what + ": cudaMalloc failed");
    cudaFree(da), cudaFree(db), cudaFree(dd);
    return;
  }
  cudaMemcpy(da, a.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  cudaError_t err = cuda_seam::launchReduce<T, Op, kPre, kPost>(dd, withA ? da : nullptr, db, n, reducer);
  if (err == cudaSuccess) err = cudaMemcpy(got.data(), dd, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(da), cudaFree(db), cudaFree(dd);
  if (err != cudaSuccess) {
    fail(what + ": " + cudaGetErrorString(err));
    return;
  }
  size_t vsHost = 0, vsReference = 0, firstBad = n;
  for (size_t i = 0; i < n; i++) {
    T host = withA ? reducer(a[i], b[i]) : reducer.first(b[i]);
    if (!same(got[i], host)) {
      vsHost++;
      if (firstBad == n) firstBad = i;
    }
    T ref{};
    if (withA && !kPre && !kPost && reference<T, Op>(a[i], b[i], &ref) && !same(got[i], ref)) vsReference++;
  }
  if (vsHost != 0) {
    fail(what + ": " + std::to_string(vsHost) + " elements differ from the host's result (first at " +
         std::to_string(firstBad) + ": a bits " + std::to_string(bitsOf(a[firstBad])) + ", b bits " +
         std::to_string(bitsOf(b[firstBad])) + ", gpu bits " + std::to_string(bitsOf(got[firstBad])) + ")");
  }
  if (vsReference != 0)
    fail(what + ": " + std::to_string(vsReference) + " elements differ from the float64/int64 reference");
}

template <typename T>
void checkType(const char* typeName) {
  for (size_t n : {size_t(1), size_t(1000003)}) {
    checkOne<T, OpSum, false, false>(typeName, "sum", n, true);
    checkOne<T, OpProd, false, false>(typeName, "prod", n, true);
    checkOne<T, OpMax, false, false>(typeName, "max", n, true);
    checkOne<T, OpMin, false, false>(typeName, "min", n, true);
    checkOne<T, OpSum, true, false>(typeName, "premulsum", n, true);
    checkOne<T, OpSum, false, true>(typeName, "sum/postdiv", n, true);
    checkOne<T, OpSum, true, false>(typeName, "premulsum", n, false);
    checkOne<T, OpSum, false, true>(typeName, "sum/postdiv", n, false);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);

  long long conversions = cuda_seam::countConversionMismatches();
  if (conversions != 0)
    fail("conversions: " + std::to_string(conversions) + " disagreements with CUDA's (-1: CUDA failed)");
  else
    std::printf("ok   conversions: all 2^32 float patterns and every 16- and 8-bit code agree with CUDA's\n");

  int before = failures;
  checkType<int8_t>("int8");
  checkType<uint8_t>("uint8");
  checkType<int32_t>("int32");
  checkType<uint32_t>("uint32");
  checkType<int64_t>("int64");
  checkType<uint64_t>("uint64");
  checkType<half_t>("half");
  checkType<float>("float");
  checkType<double>("double");
  checkType<bf16_t>("bf16");
  checkType<fp8e4m3_t>("fp8e4m3");
  checkType<fp8e5m2_t>("fp8e5m2");
  if (failures == before)
    std::printf("ok   reductions: 12 types x 6 operations, GPU equals host bitwise and the float64 reference\n");

  std::printf("%s: %d failure(s)\n", failures == 0 ? "PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
