// How elements combine: the reduction an operation applies and the flags a step adds to it,
// as plain data that the host and device executors both read. No heavy includes.
#pragma once

#include <cstdint>

namespace tutti::kern {

// How elements combine. The runtime maps ncclRedOp_t onto these:
//   ncclSum/ncclProd/ncclMax/ncclMin -> Sum/Prod/Max/Min;
//   ncclAvg on floating types        -> PreMulSum with floatScalar = 1/nranks;
//   ncclAvg on integer types         -> SumPostDiv with intScalar = nranks;
//   a user's ncclRedOpCreatePreMulSum -> PreMulSum with its scalar.
//
// The accumulation rule (every executor, host and CUDA, follows it):
//   * fp16, bf16, fp8 e4m3 and fp8 e5m2: each pairwise operation widens both operands to
//     float (exactly), computes in float and rounds the result back to the type once, to
//     nearest even. A reduction over R ranks therefore rounds R-1 times, in the order the
//     algorithm combines contributions. fp8 results saturate at the largest finite value
//     (448 for e4m3, 57344 for e5m2) instead of becoming inf or NaN; fp16 and bf16 overflow
//     to inf.
//   * PreMulSum on those types: b * scalar is computed in float, with the scalar kept as a
//     float (it is not rounded to the type), and added to a in float before the one rounding.
//   * fp32 computes in fp32 and fp64 in fp64; PreMulSum rounds the product to the type, then
//     the sum (no fused multiply-add, on the host or the GPU).
//   * Integers: sum and product wrap around modulo 2^bits (computed in the unsigned type).
//     SumPostDiv sums, then divides by the count with C's truncation toward zero.
//   * Max and min: if either operand is NaN the result is NaN. Between +0 and -0 either zero
//     may be returned.
enum class RedKind : uint8_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };

struct RedOp {
  RedKind kind = RedKind::Sum;
  double floatScalar = 1.0;  // PreMulSum on floating types (fp64 uses it exactly; others in float)
  uint64_t intScalar = 1;    // PreMulSum on integer types (as the type, zero-extended bits), or
                             // the divisor of SumPostDiv (avg on integer types: sum, then divide)
};

enum ReduceFlags : unsigned {
  kPreOnB = 1u,  // multiply b by the PreMulSum scalar (the contribution is a rank's own input)
  kPost = 2u,    // divide the result by the SumPostDiv count (the last step of a reduction)
};

}  // namespace tutti::kern
