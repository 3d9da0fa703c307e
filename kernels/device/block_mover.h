// The device executor's data movement: copies and reductions spread over the threads of a block,
// in 16-byte packs where the buffers allow it, one element otherwise. Each thread keeps several
// packs' loads in flight before it stores any (kCopyUnroll, kReduceUnroll): one load at a time
// leaves a thread waiting a whole memory latency per 16 bytes, far below what an SM can move.
// Every element is computed by the functors of kernels/reduce.h, as the host executor computes it,
// so results are bitwise the same; only the order in which threads touch memory differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/device/shim.h"
#include "kernels/dtypes.h"
#include "kernels/lane_engine.h"
#include "kernels/redop.h"
#include "kernels/reduce.h"

namespace tutti::kern::dev {

TUTTI_DEVICE bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Packs in flight per thread and iteration. Thread t of nt takes packs t, t + nt, ...,
// t + (U - 1) nt of each group of U nt packs, so that every load and every store of the block is
// contiguous across its threads; packs past the last whole group go one at a time. With 4 packs (8
// loads in flight for a reduction) ptxas gives the executor's kernel 128 registers a thread (64
// with one pack), so one 512-thread block fits an SM; holding it to 64 (two blocks, by its launch
// bounds) spills registers to local memory. The cuda backend sizes a group by the occupancy the
// driver reports (cuda_backend.cpp), whatever it is. The loops over u are unrolled, so that the
// arrays stay in registers. Reductions unroll for sum only (the common case, and the reductions of
// averages go through it when they carry no scalar): prod, max, min and the scalar steps keep one
// pack in flight, since every (type, op) pair unrolled more than tripled the time ptxas takes over
// the kernel, which every build pays (sum alone: a third more).
constexpr int kCopyUnroll = 4;
constexpr int kReduceUnroll = 4;

// dst[p] = src[p] (and dst2[p]) for the packs p < packs, the block's threads together.
TUTTI_DEVICE void blockCopyPacks(Pack16* dst, Pack16* dst2, const Pack16* src, uint64_t packs) {
  constexpr int U = kCopyUnroll;
  const uint64_t nt = uint64_t(threadCount());
  uint64_t p = uint64_t(threadId());
  for (; p + (U - 1) * nt < packs; p += U * nt) {
    Pack16 v[U];
    TUTTI_UNROLL for (int u = 0; u < U; u++) v[u] = loadPack(src + p + u * nt);
    TUTTI_UNROLL for (int u = 0; u < U; u++) storePack(dst + p + u * nt, v[u]);
    if (dst2 != nullptr) {
      TUTTI_UNROLL for (int u = 0; u < U; u++) storePack(dst2 + p + u * nt, v[u]);
    }
  }
  for (; p < packs; p += nt) {  // the last, partial group
    const Pack16 v = loadPack(src + p);
    storePack(dst + p, v);
    if (dst2 != nullptr) storePack(dst2 + p, v);
  }
}

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
    blockCopyPacks(reinterpret_cast<Pack16*>(dst + head),
                   dst2 != nullptr ? reinterpret_cast<Pack16*>(dst2 + head) : nullptr,
                   reinterpret_cast<const Pack16*>(src + head), packs);
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
  const bool words =
      ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst2)) &
       3u) == 0;
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

// One pack of a reduction: reducer(a, b) element by element, or reducer.first(b) without a. The
// elements are taken apart in a union of this function's own, which stays in registers (an array
// of such unions would not: its element-wise accesses would put it in local memory).
template <bool HasA, typename T, class Reducer>
TUTTI_DEVICE Pack16 reducePack(Pack16 a, Pack16 b, const Reducer& r) {
  union Lanes {
    Pack16 pack;
    T e[16 / sizeof(T)];
  };
  Lanes va, vb, out;
  va.pack = a;
  vb.pack = b;
  TUTTI_UNROLL for (int k = 0; k < int(16 / sizeof(T)); k++) {
    if constexpr (HasA)
      out.e[k] = r(va.e[k], vb.e[k]);
    else
      out.e[k] = r.first(vb.e[k]);
  }
  return out.pack;
}

// The packs p < packs of blockReduce (a unused without HasA), the block's threads together, as
// blockCopyPacks.
template <bool HasA, int U, typename T, class Reducer>
TUTTI_DEVICE void blockReducePacks(T* dst, T* dst2, const T* a, const T* b, uint64_t packs, const Reducer& r) {
  constexpr int kPer = int(16 / sizeof(T));
  const uint64_t nt = uint64_t(threadCount());
  uint64_t p = uint64_t(threadId());
  for (; p + (U - 1) * nt < packs; p += U * nt) {
    Pack16 va[U], vb[U];
    TUTTI_UNROLL for (int u = 0; u < U; u++) {
      vb[u] = loadPack(b + (p + u * nt) * kPer);
      va[u] = HasA ? loadPack(a + (p + u * nt) * kPer) : vb[u];
    }
    TUTTI_UNROLL for (int u = 0; u < U; u++) {
      const Pack16 out = reducePack<HasA, T>(va[u], vb[u], r);
      storePack(dst + (p + u * nt) * kPer, out);
      if (dst2 != nullptr) storePack(dst2 + (p + u * nt) * kPer, out);
    }
  }
  for (; p < packs; p += nt) {  // the last, partial group
    const Pack16 vb = loadPack(b + p * kPer);
    const Pack16 out = reducePack<HasA, T>(HasA ? loadPack(a + p * kPer) : vb, vb, r);
    storePack(dst + p * kPer, out);
    if (dst2 != nullptr) storePack(dst2 + p * kPer, out);
  }
}

// dst[i] = reducer(a[i], b[i]) (reducer.first(b[i]) without a), and dst2[i] the same, for i < n.
// dst may be a or b (the same element is read then written by one thread). U packs in flight per
// thread (kReduceUnroll, or 1 where the code size matters more than the speed).
template <typename T, int U = kReduceUnroll, class Reducer>
TUTTI_DEVICE void blockReduce(T* dst, T* dst2, const T* a, const T* b, uint64_t n, const Reducer& r) {
  const int t = threadId(), nt = threadCount();
  constexpr int kPer = int(16 / sizeof(T));
  uint64_t done = 0;
  if (aligned16(dst) && aligned16(b) && (a == nullptr || aligned16(a)) && (dst2 == nullptr || aligned16(dst2))) {
    const uint64_t packs = n / kPer;
    if (a != nullptr)
      blockReducePacks<true, U>(dst, dst2, a, b, packs, r);
    else
      blockReducePacks<false, U>(dst, dst2, a, b, packs, r);
    done = packs * kPer;
  }
  for (uint64_t i = done + uint64_t(t); i < n; i += uint64_t(nt)) {
    const T v = a != nullptr ? r(a[i], b[i]) : r.first(b[i]);
    dst[i] = v;
    if (dst2 != nullptr) dst2[i] = v;
  }
}

// The reduction of one step, for element type T: the same choice of functor as the host's
// reduceHost (kernels/host_reduce.cpp), so the same bits come out. Each loop is instantiated once
// per functor (a PreMulSum or SumPostDiv step without its scalar is a sum, a step without a and
// without a scalar a copy), and only sum's unrolled (kReduceUnroll), which keeps the code small.
template <typename T>
TUTTI_DEVICE void blockReduceTyped(const RedOp& op, char* dst, char* dst2, const char* a, const char* b, uint64_t n,
                                   unsigned flags) {
  using Compute = typename Arith<T>::Compute;
  T* d = reinterpret_cast<T*>(dst);
  T* d2 = reinterpret_cast<T*>(dst2);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  const bool pre = op.kind == RedKind::PreMulSum && (flags & kPreOnB);
  const bool post = op.kind == RedKind::SumPostDiv && (flags & kPost);
  if (x == nullptr && !pre && !post) {  // b itself (nothing to do in place)
    if (dst != b || dst2 != nullptr) blockCopy(dst == b ? dst2 : dst, dst == b ? nullptr : dst2, b, n * sizeof(T));
    return;
  }
  if (pre) {
    ElementReducer<T, OpSum, true, false> reducer;
    if constexpr (IntegerTraits<T>::kIsInteger)
      reducer.preScalar = T(op.intScalar);
    else
      reducer.preScalar = Compute(op.floatScalar);
    return blockReduce<T, 1>(d, d2, x, y, n, reducer);
  }
  if (post) {
    ElementReducer<T, OpSum, false, true> reducer;
    reducer.postDivisor.count = op.intScalar;
    return blockReduce<T, 1>(d, d2, x, y, n, reducer);
  }
  switch (op.kind) {
    case RedKind::Prod: return blockReduce<T, 1>(d, d2, x, y, n, ElementReducer<T, OpProd, false, false>{});
    case RedKind::Max: return blockReduce<T, 1>(d, d2, x, y, n, ElementReducer<T, OpMax, false, false>{});
    case RedKind::Min: return blockReduce<T, 1>(d, d2, x, y, n, ElementReducer<T, OpMin, false, false>{});
    default: return blockReduce<T>(d, d2, x, y, n, ElementReducer<T, OpSum, false, false>{});  // Sum, and the two above
  }
}

// The Mover of the lane engine (lane_engine.h, moveData) for a thread block.
struct BlockMover {
  const OpWork* op;
  RedOp redop;  // the operation's, with a device-resident scalar read

  TUTTI_DEVICE void copy(char* dst, const char* src, uint64_t bytes) const { blockCopy(dst, nullptr, src, bytes); }
  TUTTI_DEVICE void move(char* dst, const char* src, uint64_t bytes) const { blockMove(dst, src, bytes); }
  TUTTI_DEVICE void copy2(char* dst, char* dst2, const char* src, uint64_t bytes) const {
    blockCopy(dst, dst2, src, bytes);
  }
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
