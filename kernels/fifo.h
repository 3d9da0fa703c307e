// The FIFO of the Simple protocol: one direction of one connection on one channel. The receiver
// owns the memory (a header, then nsteps slots); the sender waits for a free slot, writes it and
// publishes it by advancing `head` with release semantics; the receiver acquires `head`, consumes
// the slot and frees it by advancing `tail`. Read by the host executor now and by the CUDA
// executor later, so it stays free of heavy includes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/plan.h"

#if defined(__CUDACC__)
#define TUTTI_FIFO_HD __host__ __device__
#else
#define TUTTI_FIFO_HD
#endif

namespace tutti::kern {

constexpr uint32_t kFifoMagic = 0x7f1f0001u;
constexpr uint32_t kMaxFifoSteps = 64;
constexpr size_t kFifoSlotAlign = 4096;

struct alignas(64) FifoHeader {
  uint64_t head;  // slots published by the sender (written by the sender only)
  char pad0[56];
  uint64_t tail;  // slots consumed by the receiver (written by the receiver only)
  char pad1[56];
  uint32_t magic;
  uint32_t nsteps;
  uint64_t slotBytes;
  uint64_t slotOffset;                // from the start of the header to slot 0
  uint64_t attached;                  // set by the sender once it has mapped the FIFO
  uint64_t sizes[kMaxFifoSteps];      // bytes in each published slot
};

TUTTI_FIFO_HD inline size_t fifoBytes(uint32_t nsteps, size_t slotBytes) {
  size_t headerBytes = (sizeof(FifoHeader) + kFifoSlotAlign - 1) / kFifoSlotAlign * kFifoSlotAlign;
  return headerBytes + size_t(nsteps) * slotBytes;
}

TUTTI_FIFO_HD inline void fifoInit(FifoHeader* header, uint32_t nsteps, size_t slotBytes) {
  header->head = 0;
  header->tail = 0;
  header->attached = 0;
  header->nsteps = nsteps;
  header->slotBytes = slotBytes;
  header->slotOffset = (sizeof(FifoHeader) + kFifoSlotAlign - 1) / kFifoSlotAlign * kFifoSlotAlign;
  header->magic = kFifoMagic;
}

TUTTI_FIFO_HD inline char* fifoSlot(FifoHeader* header, uint64_t index) {
  return reinterpret_cast<char*>(header) + header->slotOffset + (index % header->nsteps) * header->slotBytes;
}

// A joined message's table at the start of its slot (plan.h, "Joined steps"): a word holding
// kJoinMagic and the number of parts, then each part's size in bytes.
TUTTI_FIFO_HD inline void fifoJoinStart(char* slot, uint32_t parts) {
  uint32_t* words = reinterpret_cast<uint32_t*>(slot);
  words[0] = plan::kJoinMagic;
  words[1] = parts;
}
// The number of parts of the joined message in `slot`, 0 if it holds none (no table).
TUTTI_FIFO_HD inline uint32_t fifoJoinParts(const char* slot) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(slot);
  return words[0] == plan::kJoinMagic ? words[1] : 0;
}
TUTTI_FIFO_HD inline uint32_t* fifoJoinSizes(char* slot) { return reinterpret_cast<uint32_t*>(slot) + 2; }

#if !defined(__CUDA_ARCH__)
// Host side of the protocol. The counters are plain uint64_t in the shared layout; the host
// reads and writes them with GCC atomics (lock-free on every target we build for).
inline uint64_t fifoLoadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void fifoStoreRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
#endif

}  // namespace tutti::kern
