// The device executor's data movement: copies and reductions spread over the threads of a block,
// 16 bytes per thread and iteration where the buffers allow it, one element otherwise. Every
// element is computed by the functors of kernels/reduce.h, as the host executor computes it, so
// results are bitwise the same; only the order in which threads touch memory differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device/shim.h"
#include "kernels/dtypes.h"
#include "kernels/lane_engine.h"
#include "kernels/reduce.h"
#include "kernels/redop.h"

namespace tutti::kern::dev {

TUTTI_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// dst[i] = src[i] for i < bytes, the block's threads together. dst and src may not overlap.
TUTTI_DEVICE void blockCopy(char* dst, char* dst2, const char* src, uint64_t bytes) {
  const int t = threadId(), nt = threadCount();
  uint64_t head = 0;
  const uintptr_t misalign = reinterpret_cast<uintptr_t>(dst) & 15u;
  const bool together = misalign == (reinterpret_cast<uintptr_t>(src) & 15u) &&
                        (dst2 == nullptr || misalign == (reinterpret_cast<uintptr_t>(dst2) & 15u));
  if (together) {
    head = misalign == 0 ? 0 : 16 - misalign;
    if (head > bytes) head = bytes;
    const uint64_t packs = (bytes - head) / 16;
    for (uint64_t p = uint64_t(t); p < packs; p += uint64_t(nt)) {
      const Pack16 v = loadPack(src + head + 16 * p);
      storePack(dst + head + 16 * p, v);
      if (dst2 != nullptr) storePack(dst2 + head + 16 * p, v);
    }
    for (uint64_t i = uint64_t(t); i < head; i += uint64_t(nt)) {
      dst[i] = src[i];
      if (dst2 != nullptr) dst2[i] = src[i];
    }
    for (uint64_t i = head + 16 * packs + uint64_t(t); i < bytes; i += uint64_t(nt)) {
      dst[i] = src[i];
      if (dst2 != nullptr) dst2[i] = src[i];
    }
    return;
  }
  const bool words = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) |
                       reinterpret_cast<uintptr_t>(dst2)) & 3u) == 0;
  const uint64_t nwords = words ? bytes / 4 : 0;
  for (uint64_t w = uint64_t(t); w < nwords; w += uint64_t(nt)) {
    const uint32_t v = reinterpret_cast<const uint32_t*>(src)[w];
    reinterpret_cast<uint32_t*>(dst)[w] = v;
    if (dst2 != nullptr) reinterpret_cast<uint32_t*>(dst2)[w] = v;
  }
  for (uint64_t i = 4 * nwords + uint64_t(t); i < bytes; i += uint64_t(nt)) {
    dst[i] = src[i];
    if (dst2 != nullptr) dst2[i] = src[i];
  }
}

// A copy whose ranges may overlap (a local copy within one buffer): the block's first thread
// alone, in the safe direction. Rare: the plans' local copies are between distinct chunks.
TUTTI_DEVICE void blockMove(char* dst, const char* src, uint64_t bytes) {
  if (dst + bytes <= src || src + bytes <= dst) {
    blockCopy(dst, nullptr, src, bytes);
    return;
  }
  if (threadId() == 0) {
    if (dst < src) {
      for (uint64_t i = 0; i < bytes; i++) dst[i] = src[i];
    } else {
      for (uint64_t i = bytes; i-- > 0;) dst[i] = src[i];
    }
  }
}

// dst[i] = reducer(a[i], b[i]) (reducer.first(b[i]) without a), and dst2[i] the same, for i < n.
// dst may be a or b (the same element is read then written by one thread).
template <typename T, class Reducer>
TUTTI_DEVICE void blockReduce(T* dst, T* dst2, const T* a, const T* b, uint64_t n, const Reducer& r) {
  const int t = threadId(), nt = threadCount();
  constexpr int kPer = int(16 / sizeof(T));
  uint64_t done = 0;
  if (aligned16(dst) && aligned16(b) && (a == nullptr || aligned16(a)) && (dst2 == nullptr || aligned16(dst2))) {
    union Lanes {
      Pack16 pack;
      T e[kPer];
    };
    const uint64_t packs = n / kPer;
    for (uint64_t p = uint64_t(t); p < packs; p += uint64_t(nt)) {
      Lanes vb, va, out;
      vb.pack = loadPack(b + p * kPer);
      if (a != nullptr) {
        va.pack = loadPack(a + p * kPer);
        for (int k = 0; k < kPer; k++) out.e[k] = r(va.e[k], vb.e[k]);
      } else {
        for (int k = 0; k < kPer; k++) out.e[k] = r.first(vb.e[k]);
      }
      storePack(dst + p * kPer, out.pack);
      if (dst2 != nullptr) storePack(dst2 + p * kPer, out.pack);
    }
    done = packs * kPer;
  }
  for (uint64_t i = done + uint64_t(t); i < n; i += uint64_t(nt)) {
    const T v = a != nullptr ? r(a[i], b[i]) : r.first(b[i]);
    dst[i] = v;
    if (dst2 != nullptr) dst2[i] = v;
  }
}

// The reduction of one step, for element type T: the same choice of functor as the host's
// reduceHost (kernels/host_reduce.cpp), so the same bits come out.
template <typename T>
TUTTI_DEVICE void blockReduceTyped(const RedOp& op, char* dst, char* dst2, const char* a, const char* b, uint64_t n, unsigned flags) {
  using Compute = typename Arith<T>::Compute;
  T* d = reinterpret_cast<T*>(dst);
  T* d2 = reinterpret_cast<T*>(dst2);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  auto combineOrCopy = [&](auto reducer) {
    if (x != nullptr) blockReduce<T>(d, d2, x, y, n, reducer);
    else if (dst != b || dst2 != nullptr) blockCopy(dst == b ? dst2 : dst, dst == b ? nullptr : dst2, b, n * sizeof(T));
  };
  switch (op.kind) {
    case RedKind::Sum: return combineOrCopy(ElementReducer<T, OpSum, false, false>{});
    case RedKind::Prod: return combineOrCopy(ElementReducer<T, OpProd, false, false>{});
    case RedKind::Max: return combineOrCopy(ElementReducer<T, OpMax, false, false>{});
    case RedKind::Min: return combineOrCopy(ElementReducer<T, OpMin, false, false>{});
    case RedKind::PreMulSum: {
      if (!(flags & kPreOnB)) return combineOrCopy(ElementReducer<T, OpSum, false, false>{});
      ElementReducer<T, OpSum, true, false> reducer;
      if constexpr (IntegerTraits<T>::kIsInteger) reducer.preScalar = T(op.intScalar);
      else reducer.preScalar = Compute(op.floatScalar);
      return blockReduce<T>(d, d2, x, y, n, reducer);
    }
    case RedKind::SumPostDiv: {
      if (!(flags & kPost)) return combineOrCopy(ElementReducer<T, OpSum, false, false>{});
      ElementReducer<T, OpSum, false, true> reducer;
      reducer.postDivisor.count = op.intScalar;
      return blockReduce<T>(d, d2, x, y, n, reducer);
    }
  }
}

// The Mover of the lane engine (lane_engine.h, moveData) for a thread block.
struct BlockMover {
  const OpWork* op;
  RedOp redop;  // the operation's, with a device-resident scalar read

  TUTTI_DEVICE void copy(char* dst, const char* src, uint64_t bytes) const { blockCopy(dst, nullptr, src, bytes); }
  TUTTI_DEVICE void move(char* dst, const char* src, uint64_t bytes) const { blockMove(dst, src, bytes); }
  TUTTI_DEVICE void copy2(char* dst, char* dst2, const char* src, uint64_t bytes) const { blockCopy(dst, dst2, src, bytes); }
  TUTTI_DEVICE void reduce(char* dst, char* dst2, const char* a, const char* b, uint64_t n, unsigned flags) const {
    switch (Dtype(op->dtype)) {
      case Dtype::Int8: return blockReduceTyped<int8_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Uint8: return blockReduceTyped<uint8_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Int32: return blockReduceTyped<int32_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Uint32: return blockReduceTyped<uint32_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Int64: return blockReduceTyped<int64_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Uint64: return blockReduceTyped<uint64_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Float16: return blockReduceTyped<half_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Float32: return blockReduceTyped<float>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Float64: return blockReduceTyped<double>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Bfloat16: return blockReduceTyped<bf16_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Fp8E4M3: return blockReduceTyped<fp8e4m3_t>(redop, dst, dst2, a, b, n, flags);
      case Dtype::Fp8E5M2: return blockReduceTyped<fp8e5m2_t>(redop, dst, dst2, a, b, n, flags);
    }
  }
};

}  // namespace tutti::kern::dev
