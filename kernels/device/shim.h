// The few CUDA facilities the device executor uses, behind one small interface, so that its
// source builds twice: by nvcc for the GPU, and by g++ for the emulated device, where each thread
// block is a group of host threads (kernels/device/emulated_device.cpp) and these calls go to the
// group's barrier, the host's atomics and its clock.
//
//   threadId(), threadCount()   the thread's index in its block, the block's size
//   barrier()                   __syncthreads
//   loadAcquire / storeRelease  FIFO counters, with system scope (peers may be other devices or
//                               the host)
//   loadVolatile32, storeRelease32  the host-written abort word, the fault word
//   loadLL / storeLL            one half of an LL line (kernels/fifo.h): a single-copy atomic
//                               8-byte access, no fence (the flag in it validates the data)
//   nowNs()                     a clock in nanoseconds (the device's global timer)
//   countAdd                    adds to a counter the host reads (system scope, no order)
//   pause()                     a short back-off inside a poll loop
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TUTTI_DEVICE __device__ __forceinline__
#define TUTTI_DEVICE_HD __host__ __device__ __forceinline__
#else
#define TUTTI_DEVICE inline
#define TUTTI_DEVICE_HD inline
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

TUTTI_DEVICE uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Publishes: every write of the block before the barrier that preceded this call is visible
// before the new value is.
TUTTI_DEVICE void storeRelease(uint64_t* p, uint64_t v) {
  __threadfence_system();
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TUTTI_DEVICE uint32_t loadVolatile32(const uint32_t* p) { return *reinterpret_cast<const volatile uint32_t*>(p); }
TUTTI_DEVICE uint64_t loadLL(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
TUTTI_DEVICE void storeLL(uint64_t* p, uint64_t v) { asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }
TUTTI_DEVICE void storeRelease32(uint32_t* p, uint32_t v) {
  __threadfence_system();
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
inline uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline uint32_t loadVolatile32(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
// Release and acquire on the host: what a data half carries was written before it (the emulated
// "threads" are host threads, and C++ wants the order spelled out where a GPU's flag carries it).
inline uint64_t loadLL(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeLL(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
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
