// The host reduction loops: reduceHost() resolves type, operation, flags and aliasing once,
// then runs a contiguous loop that g++ -O3 vectorises.
#include "kernels/host_reduce.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/reduce.h"

namespace tutti::kern {

static_assert(int(Dtype::Int8) == ncclInt8 && int(Dtype::Uint8) == ncclUint8 && int(Dtype::Int32) == ncclInt32 &&
                  int(Dtype::Uint32) == ncclUint32 && int(Dtype::Int64) == ncclInt64 &&
                  int(Dtype::Uint64) == ncclUint64 && int(Dtype::Float16) == ncclFloat16 &&
                  int(Dtype::Float32) == ncclFloat32 && int(Dtype::Float64) == ncclFloat64 &&
                  int(Dtype::Bfloat16) == ncclBfloat16 && int(Dtype::Fp8E4M3) == ncclFloat8e4m3 &&
                  int(Dtype::Fp8E5M2) == ncclFloat8e5m2 && kDtypeCount == ncclNumTypes,
              "kern::Dtype must number the types as ncclDataType_t does");

namespace {

// Elements are moved with memcpy so that any byte alignment is legal: g++ turns these into
// plain (unaligned) vector loads and stores.
template <typename T>
inline T loadElement(const unsigned char* base, size_t i) {
  T value;
  std::memcpy(&value, base + i * sizeof(T), sizeof(T));
  return value;
}
template <typename T>
inline void storeElement(unsigned char* base, size_t i, T value) {
  std::memcpy(base + i * sizeof(T), &value, sizeof(T));
}

// How the loops are compiled:
//  * no fused multiply-add: PreMulSum's product is rounded before the sum, as documented and
//    as the GPU does (reduce.h uses __fmul_rn there); g++ would otherwise contract a + b * s
//    wherever the target has FMA (AVX2 clones, aarch64);
//  * on x86-64 each loop is also built for AVX2 and AVX-512 machines and the best one is
//    picked when the library loads (an ifunc): the low-precision conversions are
//    compute-bound, and wider vectors with blend, pack and unsigned-min instructions run them
//    2-5x faster than the SSE2 baseline. fp32/fp64/integer loops are memory-bound either way.
#if defined(__GNUC__) && !defined(__clang__)
#define TUTTI_NO_FMA_CONTRACTION __attribute__((optimize("fp-contract=off")))
#else
#define TUTTI_NO_FMA_CONTRACTION
#endif
// (Defining TUTTI_NO_VECTOR_CLONES builds the baseline loops only, to test them on a machine
// that would otherwise pick a wider clone.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(TUTTI_NO_VECTOR_CLONES)
#define TUTTI_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TUTTI_VECTOR_CLONES
#endif
#define TUTTI_REDUCE_LOOP TUTTI_NO_FMA_CONTRACTION TUTTI_VECTOR_CLONES

// One loop per aliasing case, so that each can promise the compiler (with __restrict__) that
// its output does not overlap what it reads. Reading a and b through two restrict pointers
// to the same buffer is fine: neither is written through.

template <typename T, typename Reducer>
TUTTI_REDUCE_LOOP void combineDistinct(unsigned char* __restrict__ dst, const unsigned char* __restrict__ a,
                                       const unsigned char* __restrict__ b, size_t n, const Reducer reducer) {
  for (size_t i = 0; i < n; ++i) storeElement<T>(dst, i, reducer(loadElement<T>(a, i), loadElement<T>(b, i)));
}

// dst is a (kDstIsA) or b, and the other input is separate.
template <typename T, typename Reducer, bool kDstIsA>
TUTTI_REDUCE_LOOP void combineInPlace(unsigned char* __restrict__ dst, const unsigned char* __restrict__ other,
                                      size_t n, const Reducer reducer) {
  for (size_t i = 0; i < n; ++i) {
    T mine = loadElement<T>(dst, i);
    T theirs = loadElement<T>(other, i);
    storeElement<T>(dst, i, kDstIsA ? reducer(mine, theirs) : reducer(theirs, mine));
  }
}

// dst, a and b are one buffer.
template <typename T, typename Reducer>
TUTTI_REDUCE_LOOP void combineSelf(unsigned char* dst, size_t n, const Reducer reducer) {
  for (size_t i = 0; i < n; ++i) {
    T value = loadElement<T>(dst, i);
    storeElement<T>(dst, i, reducer(value, value));
  }
}

template <typename T, typename Reducer>
TUTTI_REDUCE_LOOP void firstDistinct(unsigned char* __restrict__ dst, const unsigned char* __restrict__ b, size_t n,
                                     const Reducer reducer) {
  for (size_t i = 0; i < n; ++i) storeElement<T>(dst, i, reducer.first(loadElement<T>(b, i)));
}

template <typename T, typename Reducer>
TUTTI_REDUCE_LOOP void firstInPlace(unsigned char* dst, size_t n, const Reducer reducer) {
  for (size_t i = 0; i < n; ++i) storeElement<T>(dst, i, reducer.first(loadElement<T>(dst, i)));
}

struct Buffers {
  unsigned char* dst;
  const unsigned char* a;  // null: no accumulator, dst = post(pre(b))
  const unsigned char* b;
  size_t n;
};

template <typename T, typename Reducer>
void runReducer(const Buffers& buffers, const Reducer& reducer) {
  unsigned char* dst = buffers.dst;
  const unsigned char* a = buffers.a;
  const unsigned char* b = buffers.b;
  if (a == nullptr) {
    if (dst == b)
      firstInPlace<T>(dst, buffers.n, reducer);
    else
      firstDistinct<T>(dst, b, buffers.n, reducer);
  } else if (dst == a && dst == b) {
    combineSelf<T>(dst, buffers.n, reducer);
  } else if (dst == a) {
    combineInPlace<T, Reducer, true>(dst, b, buffers.n, reducer);
  } else if (dst == b) {
    combineInPlace<T, Reducer, false>(dst, a, buffers.n, reducer);
  } else {
    combineDistinct<T>(dst, a, b, buffers.n, reducer);
  }
}

// a OP b, or with no accumulator (and nothing to scale) a plain copy, or nothing in place.
template <typename T, typename Op>
void combineOrCopy(const Buffers& buffers) {
  if (buffers.a != nullptr) return runReducer<T>(buffers, ElementReducer<T, Op, false, false>{});
  if (buffers.n > 0 && buffers.dst != buffers.b) std::memcpy(buffers.dst, buffers.b, buffers.n * sizeof(T));
}

[[noreturn]] void throwInvalid(const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, "reduceHost: " + message);
}

template <typename T>
void reduceTyped(const RedOp& op, const Buffers& buffers, unsigned flags) {
  using Compute = typename Arith<T>::Compute;
  switch (op.kind) {
    case RedKind::Sum: return combineOrCopy<T, OpSum>(buffers);
    case RedKind::Prod: return combineOrCopy<T, OpProd>(buffers);
    case RedKind::Max: return combineOrCopy<T, OpMax>(buffers);
    case RedKind::Min: return combineOrCopy<T, OpMin>(buffers);
    case RedKind::PreMulSum: {
      if (!(flags & kPreOnB)) return combineOrCopy<T, OpSum>(buffers);
      ElementReducer<T, OpSum, true, false> reducer;
      if constexpr (IntegerTraits<T>::kIsInteger)
        reducer.preScalar = T(op.intScalar);
      else
        reducer.preScalar = Compute(op.floatScalar);
      return runReducer<T>(buffers, reducer);
    }
    case RedKind::SumPostDiv: {
      // The count is validated whether or not this step divides, so a bad RedOp fails on
      // every rank's first step rather than only on the last one.
      if (op.intScalar == 0) throwInvalid("SumPostDiv count is zero");
      if constexpr (IntegerTraits<T>::kIsSigned) {
        if (op.intScalar > uint64_t(INT64_MAX))
          throwInvalid("SumPostDiv count " + std::to_string(op.intScalar) + " is too large for a signed type");
      }
      if (!(flags & kPost)) return combineOrCopy<T, OpSum>(buffers);
      ElementReducer<T, OpSum, false, true> reducer;
      reducer.postDivisor.count = op.intScalar;
      return runReducer<T>(buffers, reducer);
    }
  }
  throwInvalid("unknown reduction kind " + std::to_string(int(op.kind)));
}

}  // namespace

size_t dtypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

const char* dtypeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "unknown";
  }
}

bool dtypeIsFloating(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16:
    case ncclFloat32:
    case ncclFloat64:
    case ncclBfloat16:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return true;
    default: return false;
  }
}

void reduceHost(ncclDataType_t type, const RedOp& op, void* dst, const void* a, const void* b, size_t n,
                unsigned flags) {
  Buffers buffers{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(a),
                  static_cast<const unsigned char*>(b), n};
  switch (type) {
    case ncclInt8: return reduceTyped<int8_t>(op, buffers, flags);
    case ncclUint8: return reduceTyped<uint8_t>(op, buffers, flags);
    case ncclInt32: return reduceTyped<int32_t>(op, buffers, flags);
    case ncclUint32: return reduceTyped<uint32_t>(op, buffers, flags);
    case ncclInt64: return reduceTyped<int64_t>(op, buffers, flags);
    case ncclUint64: return reduceTyped<uint64_t>(op, buffers, flags);
    case ncclFloat16: return reduceTyped<half_t>(op, buffers, flags);
    case ncclFloat32: return reduceTyped<float>(op, buffers, flags);
    case ncclFloat64: return reduceTyped<double>(op, buffers, flags);
    case ncclBfloat16: return reduceTyped<bf16_t>(op, buffers, flags);
    case ncclFloat8e4m3: return reduceTyped<fp8e4m3_t>(op, buffers, flags);
    case ncclFloat8e5m2: return reduceTyped<fp8e5m2_t>(op, buffers, flags);
    default: break;
  }
  throwInvalid("unknown data type " + std::to_string(int(type)));
}

}  // namespace tutti::kern
