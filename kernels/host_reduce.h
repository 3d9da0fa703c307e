// The host executor's reduction entry point: one typed, vectorised loop per data type,
// operation and aliasing case, picked once per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/redop.h"
#include "nccl.h"

namespace tutti::kern {

size_t dtypeSize(ncclDataType_t type);       // 0 for an unknown type
const char* dtypeName(ncclDataType_t type);  // "int8" ... "float32", "bfloat16", "float8e4m3"; "unknown"
bool dtypeIsFloating(ncclDataType_t type);   // fp16, bf16, fp32, fp64, fp8 types

// dst[i] = post( a[i] OP pre(b[i]) ) for i < n, where pre() multiplies by the PreMulSum scalar
// when kPreOnB is set (identity otherwise, and for every other kind) and post() divides by the
// SumPostDiv count when kPost is set (identity for every other kind). a == nullptr means
// dst[i] = post(pre(b[i])) (a copy when neither applies). dst may alias a or b exactly (not
// partially); a and b may be the same buffer. Pointers may have any byte alignment.
// Throws tutti::Error (InvalidArgument) for an unknown type or kind, or a SumPostDiv count of
// zero (or above INT64_MAX for a signed type). n == 0 does nothing, and the pointers may then
// be null.
void reduceHost(ncclDataType_t type, const RedOp& op, void* dst, const void* a, const void* b, size_t n,
                unsigned flags);

}  // namespace tutti::kern
