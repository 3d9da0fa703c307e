// Element types of every NCCL data type, and the exact bit-level conversions between the
// low-precision ones (fp16, bf16, fp8 e4m3, fp8 e5m2) and float. Compiled by g++ and nvcc.
#pragma once

#include <cstdint>
#include <cstring>

// TUTTI_HD marks a function both compilers build for their side (host and, under nvcc, device).
#if !defined(TUTTI_HD)
#if defined(__CUDACC__)
#define TUTTI_HD __host__ __device__
#define TUTTI_HD_INLINE __host__ __device__ __forceinline__
#else
#define TUTTI_HD
#define TUTTI_HD_INLINE inline __attribute__((always_inline))
#endif
#endif

namespace tutti::kern {

// The data types, numbered as ncclDataType_t numbers them (host_reduce.cpp checks this), so
// device code can dispatch on a type without including nccl.h.
enum class Dtype : uint8_t {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
  Fp8E4M3 = 10,
  Fp8E5M2 = 11,
};
constexpr int kDtypeCount = 12;

namespace detail {

// A branch-free choice. g++ (with its default -ftrapping-math) will not turn a ?: whose arms
// hold float arithmetic back into a select once it has sunk that arithmetic into a branch,
// and a branch in the loop stops vectorisation; masks keep the conversions straight-line.
TUTTI_HD_INLINE uint32_t select(bool condition, uint32_t ifTrue, uint32_t ifFalse) {
  uint32_t mask = 0u - uint32_t(condition);
  return (ifTrue & mask) | (ifFalse & ~mask);
}

TUTTI_HD_INLINE uint32_t floatToBits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

TUTTI_HD_INLINE float bitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// A binary floating-point format narrower than float: kExpBits of exponent with the usual
// bias, kManBits of stored mantissa, a sign bit on top. The three formats differ only in what
// the all-ones exponent means and in what an overflow becomes:
//   fp16:      all-ones exponent is inf/NaN; overflow rounds to inf (IEEE);
//   fp8 e5m2:  all-ones exponent is inf/NaN; overflow saturates to the largest finite value;
//   fp8 e4m3:  only S.1111.111 is NaN, there is no inf; overflow saturates.
// Saturation is what CUDA's fp8 constructors do (__NV_SATFINITE), and inf saturates too.
// NaN becomes the format's canonical NaN with the sign cleared, as in CUDA.
// Every step is integer or exact float arithmetic without branches (see select()), so g++
// vectorises loops over it, and nvcc runs the very same steps on the GPU.
template <int kExpBits, int kManBits, bool kIeeeSpecials, uint32_t kOverflowCode, uint32_t kNanCode>
struct MiniFloat {
  static constexpr int kBits = 1 + kExpBits + kManBits;
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr int kShift = 23 - kManBits;  // float mantissa bits dropped
  static constexpr uint32_t kSignBit = 1u << (kBits - 1);
  static constexpr uint32_t kMagnitudeMask = kSignBit - 1;
  static constexpr uint32_t kRebias = uint32_t(127 - kBias) << 23;
  // The smallest normal number of the format, as float bits: 2^(1 - bias).
  static constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
  // A float whose ulp is the format's subnormal step 2^(1 - bias - man): adding it to a value
  // below the smallest normal rounds that value (nearest-even, by the FPU) to a whole number
  // of subnormal steps, which are then the low bits of the sum.
  static constexpr uint32_t kSubnormalMagicBits = uint32_t(127 + 24 - kBias - kManBits) << 23;

  // Round to nearest, ties to even.
  static TUTTI_HD_INLINE uint32_t fromFloat(float value) {
    uint32_t bits = floatToBits(value);
    uint32_t sign = bits & 0x80000000u;
    uint32_t magnitude = bits ^ sign;
    uint32_t subnormal = floatToBits(bitsToFloat(magnitude) + bitsToFloat(kSubnormalMagicBits)) - kSubnormalMagicBits;
    uint32_t lsb = (magnitude >> kShift) & 1u;
    uint32_t normal = (magnitude - kRebias + ((1u << (kShift - 1)) - 1u) + lsb) >> kShift;
    uint32_t code = select(magnitude < kMinNormalBits, subnormal, normal);
    code = select(code < kOverflowCode, code, kOverflowCode);
    code |= sign >> (32 - kBits);
    return select(magnitude > 0x7f800000u, kNanCode, code);
  }

  // Exact.
  static TUTTI_HD_INLINE float toFloat(uint32_t code) {
    uint32_t sign = (code & kSignBit) << (32 - kBits);
    uint32_t magnitude = code & kMagnitudeMask;
    uint32_t exponent = magnitude >> kManBits;
    uint32_t normal = (magnitude << kShift) + kRebias;
    // m * 2^(1 - bias - man) as (2^(1 - bias) * (1 + m / 2^man)) - 2^(1 - bias): exact.
    uint32_t subnormal = floatToBits(bitsToFloat(kMinNormalBits | (magnitude << kShift)) - bitsToFloat(kMinNormalBits));
    uint32_t result = select(exponent == 0, subnormal, normal);
    if constexpr (kIeeeSpecials) {
      uint32_t special = 0x7f800000u | (magnitude << kShift);  // inf, or NaN keeping its payload
      result = select(exponent == (1u << kExpBits) - 1u, special, result);
    } else {
      result = select(magnitude == kMagnitudeMask, 0x7fc00000u, result);
    }
    return bitsToFloat(result | sign);
  }
};

using HalfFormat = MiniFloat<5, 10, true, 0x7c00u, 0x7fffu>;
using Fp8E4M3Format = MiniFloat<4, 3, false, 0x7eu, 0x7fu>;
using Fp8E5M2Format = MiniFloat<5, 2, true, 0x7bu, 0x7fu>;

}  // namespace detail

// IEEE binary16, as CUDA's __half.
struct half_t {
  uint16_t bits;
  static TUTTI_HD_INLINE half_t fromFloat(float value) {
    return half_t{uint16_t(detail::HalfFormat::fromFloat(value))};
  }
  TUTTI_HD_INLINE float toFloat() const { return detail::HalfFormat::toFloat(bits); }
};

// bfloat16: the top half of a float, as CUDA's __nv_bfloat16.
struct bf16_t {
  uint16_t bits;
  // Round to nearest even on the dropped 16 bits. A carry out of the mantissa moves into the
  // exponent, which is also right at the top: the largest floats round to inf.
  static TUTTI_HD_INLINE bf16_t fromFloat(float value) {
    uint32_t in = detail::floatToBits(value);
    uint32_t rounded = (in + 0x7fffu + ((in >> 16) & 1u)) >> 16;
    return bf16_t{uint16_t((in & 0x7fffffffu) > 0x7f800000u ? 0x7fffu : rounded)};
  }
  TUTTI_HD_INLINE float toFloat() const { return detail::bitsToFloat(uint32_t(bits) << 16); }
};

// fp8 with 4 exponent and 3 mantissa bits (largest finite 448, no inf), as __nv_fp8_e4m3.
struct fp8e4m3_t {
  uint8_t bits;
  static TUTTI_HD_INLINE fp8e4m3_t fromFloat(float value) {
    return fp8e4m3_t{uint8_t(detail::Fp8E4M3Format::fromFloat(value))};
  }
  TUTTI_HD_INLINE float toFloat() const { return detail::Fp8E4M3Format::toFloat(bits); }
};

// fp8 with 5 exponent and 2 mantissa bits (largest finite 57344), as __nv_fp8_e5m2.
struct fp8e5m2_t {
  uint8_t bits;
  static TUTTI_HD_INLINE fp8e5m2_t fromFloat(float value) {
    return fp8e5m2_t{uint8_t(detail::Fp8E5M2Format::fromFloat(value))};
  }
  TUTTI_HD_INLINE float toFloat() const { return detail::Fp8E5M2Format::toFloat(bits); }
};

// The element type of each Dtype.
template <Dtype kType>
struct DtypeElement;
template <>
struct DtypeElement<Dtype::Int8> {
  using type = int8_t;
};
template <>
struct DtypeElement<Dtype::Uint8> {
  using type = uint8_t;
};
template <>
struct DtypeElement<Dtype::Int32> {
  using type = int32_t;
};
template <>
struct DtypeElement<Dtype::Uint32> {
  using type = uint32_t;
};
template <>
struct DtypeElement<Dtype::Int64> {
  using type = int64_t;
};
template <>
struct DtypeElement<Dtype::Uint64> {
  using type = uint64_t;
};
template <>
struct DtypeElement<Dtype::Float16> {
  using type = half_t;
};
template <>
struct DtypeElement<Dtype::Float32> {
  using type = float;
};
template <>
struct DtypeElement<Dtype::Float64> {
  using type = double;
};
template <>
struct DtypeElement<Dtype::Bfloat16> {
  using type = bf16_t;
};
template <>
struct DtypeElement<Dtype::Fp8E4M3> {
  using type = fp8e4m3_t;
};
template <>
struct DtypeElement<Dtype::Fp8E5M2> {
  using type = fp8e5m2_t;
};
template <Dtype kType>
using DtypeElementT = typename DtypeElement<kType>::type;

static_assert(sizeof(half_t) == 2 && sizeof(bf16_t) == 2, "16-bit storage types");
static_assert(sizeof(fp8e4m3_t) == 1 && sizeof(fp8e5m2_t) == 1, "8-bit storage types");

}  // namespace tutti::kern
