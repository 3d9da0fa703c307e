// Reduction functors for every data type and operation, shared by the host and CUDA executors:
// how an element is widened for arithmetic, combined, scaled, divided, and rounded back.
#pragma once

#include <cstdint>

#include "kernels/dtypes.h"

namespace tutti::kern {

// ---- How each element type computes ------------------------------------------------------
//
// Arith<T>::Compute is the type arithmetic on T happens in; widen() and narrow() move between
// the two. Low-precision types compute in float and are rounded back once per operation;
// fp32, fp64 and the integers compute in themselves.

template <typename T>
struct Arith {
  using Compute = T;
  static TUTTI_HD_INLINE T widen(T value) { return value; }
  static TUTTI_HD_INLINE T narrow(T value) { return value; }
};

template <typename T>
struct LowPrecisionArith {
  using Compute = float;
  static TUTTI_HD_INLINE float widen(T value) { return value.toFloat(); }
  static TUTTI_HD_INLINE T narrow(float value) { return T::fromFloat(value); }
};
template <>
struct Arith<half_t> : LowPrecisionArith<half_t> {};
template <>
struct Arith<bf16_t> : LowPrecisionArith<bf16_t> {};
template <>
struct Arith<fp8e4m3_t> : LowPrecisionArith<fp8e4m3_t> {};
template <>
struct Arith<fp8e5m2_t> : LowPrecisionArith<fp8e5m2_t> {};

// Integers add and multiply in their unsigned counterpart: wrap-around, never signed overflow.
template <typename T>
struct IntegerTraits {
  static constexpr bool kIsInteger = false;
  static constexpr bool kIsSigned = false;
};
template <typename T, typename UnsignedT, typename WideT>
struct IntegerTraitsOf {
  static constexpr bool kIsInteger = true;
  static constexpr bool kIsSigned = T(-1) < T(0);
  using Unsigned = UnsignedT;
  using Wide = WideT;  // 64 bits of the same signedness, for division by any count
};
template <>
struct IntegerTraits<int8_t> : IntegerTraitsOf<int8_t, uint8_t, int64_t> {};
template <>
struct IntegerTraits<uint8_t> : IntegerTraitsOf<uint8_t, uint8_t, uint64_t> {};
template <>
struct IntegerTraits<int32_t> : IntegerTraitsOf<int32_t, uint32_t, int64_t> {};
template <>
struct IntegerTraits<uint32_t> : IntegerTraitsOf<uint32_t, uint32_t, uint64_t> {};
template <>
struct IntegerTraits<int64_t> : IntegerTraitsOf<int64_t, uint64_t, int64_t> {};
template <>
struct IntegerTraits<uint64_t> : IntegerTraitsOf<uint64_t, uint64_t, uint64_t> {};

template <typename C>
TUTTI_HD_INLINE C addValues(C a, C b) {
  if constexpr (IntegerTraits<C>::kIsInteger) {
    using U = typename IntegerTraits<C>::Unsigned;
    return C(U(U(a) + U(b)));
  } else {
    return a + b;
  }
}

template <typename C>
TUTTI_HD_INLINE C multiplyValues(C a, C b) {
  if constexpr (IntegerTraits<C>::kIsInteger) {
    using U = typename IntegerTraits<C>::Unsigned;
    return C(U(U(a) * U(b)));
  } else {
#if defined(__CUDA_ARCH__)
    // Keep nvcc from fusing the product into a following add: the host rounds it separately.
    if constexpr (sizeof(C) == 8)
      return __dmul_rn(a, b);
    else
      return __fmul_rn(a, b);
#else
    return a * b;
#endif
  }
}

// ---- The operations ----------------------------------------------------------------------
//
// Each takes two Compute values. Max and min return NaN when either operand is NaN: "a wins
// when it is greater or NaN, otherwise b", with | rather than || so that both comparisons
// are plain values and the choice stays a vector select. Between +0 and -0 either may win.

struct OpSum {
  template <typename C>
  TUTTI_HD_INLINE C operator()(C a, C b) const {
    return addValues(a, b);
  }
};
struct OpProd {
  template <typename C>
  TUTTI_HD_INLINE C operator()(C a, C b) const {
    return multiplyValues(a, b);
  }
};
struct OpMax {
  template <typename C>
  TUTTI_HD_INLINE C operator()(C a, C b) const {
    if constexpr (IntegerTraits<C>::kIsInteger)
      return a > b ? a : b;
    else
      return ((a > b) | (a != a)) ? a : b;
  }
};
struct OpMin {
  template <typename C>
  TUTTI_HD_INLINE C operator()(C a, C b) const {
    if constexpr (IntegerTraits<C>::kIsInteger)
      return a < b ? a : b;
    else
      return ((a < b) | (a != a)) ? a : b;
  }
};

// ---- One element of a reduction step -----------------------------------------------------
//
// ElementReducer computes post(a OP pre(b)) for one element, where pre() multiplies by the
// PreMulSum scalar when kPre and post() divides by a count when kPost; both are chosen at
// compile time so the loops that use this carry no per-element branches.
//   pre:  scalar in the Compute type (float for low-precision types, exact for fp64, the
//         integer itself, wrapping, for integer types);
//   post: integers divide in 64 bits with C truncation toward zero (the count need not fit
//         the type: int8 averaged over 200 ranks divides by 200); floating types divide in
//         their Compute type.

template <typename T>
struct PostDivisor {
  using Compute = typename Arith<T>::Compute;
  uint64_t count = 1;
  TUTTI_HD_INLINE Compute apply(Compute value) const {
    if constexpr (IntegerTraits<T>::kIsInteger) {
      using Wide = typename IntegerTraits<T>::Wide;
      return Compute(Wide(value) / Wide(count));
    } else {
      return value / Compute(count);
    }
  }
};

template <typename T, typename Op, bool kPre, bool kPost>
struct ElementReducer {
  using Compute = typename Arith<T>::Compute;
  Compute preScalar = Compute(1);
  PostDivisor<T> postDivisor;

  TUTTI_HD_INLINE Compute pre(Compute value) const {
    if constexpr (kPre)
      return multiplyValues(value, preScalar);
    else
      return value;
  }
  TUTTI_HD_INLINE Compute post(Compute value) const {
    if constexpr (kPost)
      return postDivisor.apply(value);
    else
      return value;
  }
  // a OP b, both elements of the buffers.
  TUTTI_HD_INLINE T operator()(T a, T b) const {
    return Arith<T>::narrow(post(Op()(Arith<T>::widen(a), pre(Arith<T>::widen(b)))));
  }
  // The first contribution alone: post(pre(b)).
  TUTTI_HD_INLINE T first(T b) const { return Arith<T>::narrow(post(pre(Arith<T>::widen(b)))); }
};

}  // namespace tutti::kern
