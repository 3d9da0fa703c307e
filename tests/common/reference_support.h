// A float64 reference for reductions, written independently of kernels/: element conversions
// for every data type, generated per-rank inputs with known results, and tolerances.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace tutti_test {

const std::vector<ncclDataType_t>& allDataTypes();  // every ncclDataType_t, in enum order
size_t elementBytes(ncclDataType_t type);           // 0 for an unknown type
bool isFloatingType(ncclDataType_t type);
bool isSignedInteger(ncclDataType_t type);

// Element i of the buffer p, exactly, as a double. (int64/uint64 beyond 2^53 lose low bits.)
double toDouble(ncclDataType_t type, const void* p, size_t i);

// Stores v into element i of p. Floating types round to nearest even; fp16 and bf16 overflow
// to inf, fp8 saturates at its largest finite value (inf too), NaN stays NaN. Integer types
// take v truncated toward zero, wrapped modulo 2^bits (|v| must be below 2^64).
void fromDouble(ncclDataType_t type, void* p, size_t i, double v);

// v rounded to the type and back (the value the type would hold).
double roundToType(ncclDataType_t type, double v);

// The spacing of the type's values at |v| (its subnormal step near zero); 0 for integers.
double ulpOf(ncclDataType_t type, double v);

// How far a reduction over nranks may be from the exact float64 result when it is computed
// pairwise in the type, in any order, as every executor does (fp16/bf16/fp8 rounded after
// each operation). magnitude bounds every partial result: for sum and avg, the sum of the
// inputs' |values|; for PreMulSum (op >= ncclNumOps), the same over the scaled inputs; for
// prod, the |exact product|. Max, min and every integer type: 0.
double tolerance(ncclDataType_t type, ncclRedOp_t op, int nranks, double magnitude);

// ---- Generated inputs -----------------------------------------------------------------------
//
// inputValue(type, op, nranks, rank, index) is what rank contributes at index. The values are
// exactly representable in the type, deterministic, and chosen so that the reduction's exact
// result is known and, wherever the type allows it, exact in any order of operations:
//   sum, avg:  integers: k in [-K, K] (unsigned: [0, K]) with nranks * K within the type and
//              within 2^52. Floating: k / 4 with k in [-K, K], K = min(64, 2^p / nranks) for a
//              type with p significant bits, so every partial sum is representable (exact)
//              unless nranks > 2^p (fp8 e5m2 beyond 8 ranks, e4m3 beyond 16, bf16 beyond 256).
//              avg on floating types (nranks <= 2^p): nranks * k / 4 instead, so each input
//              scaled by 1/nranks (PreMulSum, as the runtime computes avg) is k / 4 again and
//              the sums stay exact up to float residues.
//   prod:      two ranks (index and index + 1, modulo nranks) contribute one of {2, 3} for
//              integers ({0.5, 1, 2, 4} for floating types), possibly negated for signed
//              types; every other rank contributes 1 or -1. |product| <= 16: exact everywhere.
//   max, min:  spread values (integers up to 2^40 in magnitude, floating k / 4 with
//              |k| <= 400 rounded to the type).
// avg on integers divides the exact sum by nranks, truncating toward zero; on floating
// types the reference is sum / nranks in float64, and expectedTolerance() covers the float
// roundings of the scaling.
double inputValue(ncclDataType_t type, ncclRedOp_t op, int nranks, int rank, size_t index);

// Writes inputValue(..., rank, firstIndex + i) into elements i < count of p.
void fillInput(ncclDataType_t type, ncclRedOp_t op, int nranks, int rank, void* p, size_t count, size_t firstIndex = 0);

// The exact float64 result of the reduction over every rank's inputValue at index.
double expectedValue(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t index);

// The tolerance that applies to expectedValue at index: 0 where the generated inputs make
// the result exact, tolerance() otherwise.
double expectedTolerance(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t index);

// Checks count elements of got against expectedValue(firstIndex + i) within
// expectedTolerance. Returns "" when all match, else a description of the first mismatch
// and how many there were.
std::string checkReduced(ncclDataType_t type, ncclRedOp_t op, int nranks, const void* got, size_t count,
                         size_t firstIndex = 0);

}  // namespace tutti_test
