// The few CUDA facilities the device executor uses, behind one small interface, so that its
// source builds twice: by nvcc for the GPU, and by g++ for the emulated device, where each thread
// block is a group of host threads (kernels/emulated/emulated_device.cpp) and these calls go to the
// group's barrier, the host's atomics and its clock.
//
//   threadId(), threadCount()   the thread's index in its block, the block's size
//   barrier()                   __syncthreads
//   loadPoll                    a FIFO counter or LL word read in a poll loop: relaxed, system scope
//                               (no L1 invalidation at each poll, as an acquire load would do)
//   fenceAcquire                once a poll saw a counter move: what its writer published before
//                               it is visible to the reads that follow (and, after the next
//                               barrier, to the block's other threads)
//   publish                     a FIFO counter that publishes what the block wrote before the barrier
//                               that preceded the call (one system fence, then a relaxed store)
//   storeFree                   a FIFO counter that frees what the block only read (a tail): a
//                               relaxed store, no fence
//   loadVolatile32, storeRelease32  the host-written abort word, the fault word
//   loadLL / storeLL            one half of an LL line (kernels/fifo.h): a single-copy atomic
//                               8-byte access, no fence (the flag in it validates the data)
//   loadLLLine / storeLLLine    a whole LL line (two halves) in one 16-byte access
//   nowNs()                     a clock in nanoseconds (the device's global timer)
//   countAdd                    adds to a counter the host reads (system scope, no order)
//   pause()                     a short back-off inside a poll loop
//
// The host half spells out in C++'s memory model what the device half gets from the hardware: the
// emulated threads are real host threads, so a poll is an acquire load there and a free a release
// store (both plain moves on x86), where the device relies on a load having completed before the
// barrier that follows its use (see storeFree).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TUTTI_DEVICE __device__ __forceinline__
#define TUTTI_DEVICE_HD __host__ __device__ __forceinline__
#else
#define TUTTI_DEVICE inline
#define TUTTI_DEVICE_HD inline
#endif
// Before a loop of constant count whose body indexes arrays that must stay in registers: nvcc
// unrolls small loops by itself, not those whose body is large (a reduction of 8 halves or 16 fp8
// values), and an array indexed in a loop that is not unrolled goes to local memory.
#if defined(__CUDA_ARCH__)
#define TUTTI_UNROLL _Pragma("unroll")
#else
#define TUTTI_UNROLL
#endif

namespace tutti::kern::dev {

// Sixteen bytes, the unit of vectorised loads and stores.
struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

#if defined(__CUDA_ARCH__)

TUTTI_DEVICE int threadId() { return int(threadIdx.x); }
TUTTI_DEVICE int threadCount() { return int(blockDim.x); }
TUTTI_DEVICE void barrier() { __syncthreads(); }

// ld.relaxed.sys: served from L2 (or the peer's memory), never from a stale L1 line, and it leaves
// L1 alone (ld.acquire.sys invalidates the SM's L1 each time).
TUTTI_DEVICE uint64_t loadPoll(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// With the relaxed load before it that saw the new value, an acquire pattern (PTX memory model):
// the writer's release is then ordered before every later access of this thread, and of the
// block's threads once they pass a barrier after it. Invalidates L1, once per message.
TUTTI_DEVICE void fenceAcquire() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
// The caller is the one thread that publishes, after a barrier: the other threads' writes are
// ordered before it by that barrier, and fence.acq_rel.sys is cumulative, so the fence after the
// barrier orders them too, before the relaxed store (NCCL's postPeer does the same). The
// alternative, a fence in every thread before the barrier, costs a fence per thread; a
// st.release.sys after a __threadfence_system() (as before) is two fences for one.
TUTTI_DEVICE void publish(uint64_t* p, uint64_t v) {
  asm volatile("fence.acq_rel.sys;\n\tst.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Frees a slot that the block only read: the reads completed before the barrier that preceded
// this call (each value was used, to compute or to store, before its thread reached the barrier),
// so nothing of the peer's next write can reach them; no fence (NCCL frees its slots alike).
TUTTI_DEVICE void storeFree(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TUTTI_DEVICE uint32_t loadVolatile32(const uint32_t* p) { return *reinterpret_cast<const volatile uint32_t*>(p); }
TUTTI_DEVICE uint64_t loadLL(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE void storeLL(uint64_t* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// A vector access is single-copy atomic per element (PTX): each 8-byte half lands whole.
TUTTI_DEVICE void loadLLLine(const uint64_t* p, uint64_t& a, uint64_t& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
TUTTI_DEVICE void storeLLLine(uint64_t* p, uint64_t a, uint64_t b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
// Its own writes only (the fault record, by the same thread): a release store alone orders them.
TUTTI_DEVICE void storeRelease32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
TUTTI_DEVICE uint64_t nowNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
TUTTI_DEVICE void pause() { __nanosleep(64); }
TUTTI_DEVICE Pack16 loadPack(const void* p) {
  const ulonglong2 v = *reinterpret_cast<const ulonglong2*>(p);
  return Pack16{v.x, v.y};
}
TUTTI_DEVICE void storePack(void* p, Pack16 v) { *reinterpret_cast<ulonglong2*>(p) = make_ulonglong2(v.lo, v.hi); }
// Claims a word that starts at 0: true for the one caller that changed it.
TUTTI_DEVICE bool claim(uint32_t* word, uint32_t value) { return atomicCAS(word, 0u, value) == 0u; }
TUTTI_DEVICE void countAdd(uint64_t* p, uint64_t v) {
  atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

#else  // the emulated device, or host code that only needs the types

// The block a host thread emulates a thread of, and its place in it; set by the emulated
// device's launcher for each of its threads (emulated_device.cpp).
struct EmulatedBlock;
struct EmulatedThread {
  EmulatedBlock* block = nullptr;
  int thread = 0;
  int threads = 1;
};
EmulatedThread& emulatedThread();
void emulatedBarrier();
uint64_t emulatedNowNs();
void emulatedPause();

inline int threadId() { return emulatedThread().thread; }
inline int threadCount() { return emulatedThread().threads; }
inline void barrier() { emulatedBarrier(); }
inline uint64_t loadPoll(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void fenceAcquire() { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
// The emulated barrier orders the other threads' writes before the lead's release.
inline void publish(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline void storeFree(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline uint32_t loadVolatile32(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
// Release and acquire on the host: what a data half carries was written before it (the emulated
// "threads" are host threads, and C++ wants the order spelled out where a GPU's flag carries it).
inline uint64_t loadLL(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeLL(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline void loadLLLine(const uint64_t* p, uint64_t& a, uint64_t& b) {
  a = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  b = __atomic_load_n(p + 1, __ATOMIC_ACQUIRE);
}
inline void storeLLLine(uint64_t* p, uint64_t a, uint64_t b) {
  __atomic_store_n(p, a, __ATOMIC_RELEASE);
  __atomic_store_n(p + 1, b, __ATOMIC_RELEASE);
}
inline void storeRelease32(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline uint64_t nowNs() { return emulatedNowNs(); }
inline void pause() { emulatedPause(); }
inline Pack16 loadPack(const void* p) {
  Pack16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void storePack(void* p, Pack16 v) { __builtin_memcpy(p, &v, sizeof v); }
inline void countAdd(uint64_t* p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline bool claim(uint32_t* word, uint32_t value) {
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(word, &expected, value, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

#endif

}  // namespace tutti::kern::dev
