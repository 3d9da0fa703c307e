// The FIFO of one direction of one connection on one channel. The receiver owns the memory (a
// header, then nsteps slots, then optionally nsteps LL slots); the sender waits for a free slot
// (`tail` says how many the receiver has consumed), writes it and publishes it.
//
//   * Simple: the message in the slot, then `head` advanced with release semantics; the receiver
//     acquires `head`, consumes the slot and frees it by advancing `tail`.
//   * LL (device executors, small unjoined messages, FIFOs of memory transports): the message in
//     the slot's LL lines, each 16-byte line two 8-byte halves of {4 data bytes, a 32-bit flag};
//     line 0 holds {size, flag}. The flag is the message's sequence number + 1, so a half is
//     valid the moment it lands, with no fence and no counter to wait for: the receiver polls
//     line 0, then each half. Line 1 holds the call's signature (below). The sender still advances `head` afterwards
//     (diagnostics, and the Simple messages that may follow on the same FIFO count from it).
// A Simple message may instead carry an address (`addrs`, nonzero): the bytes stay in the
// sender's user buffer, where the receiver reads them ("direct", zero-copy: plan.h, "Direct
// sends"). Only on connections whose ends share an address space, or whose receiver reads the
// sender's process with cross-memory reads (ConnEnd::direct, both ends alike); the sender's operation does not end
// before the receiver has freed the slot, so the buffer outlives the read (lane_engine.h, firstUndrained). Where the
// Simple slots live is the connection's business too: after the header (slotOffset), or, in p2p read mode
// (transports/p2p), in the sender's memory, which the receiver maps and reads (slotOffset 0: not here; each end's
// executor then reaches slot 0 through ConnEnd::slots, kernels/work.h). The header, the counters and the LL slots stay
// with the receiver either way. Every message also carries its call's signature (kernels/work.h, callSignature) and
// count: in `sigs` and `sigCounts` beside `sizes` (Simple), in lines 0 and 1 (LL); the receiver compares them with its
// own call's (0: not carried). The network proxy sends them in a header before each message
// (transports/net/net_proxy.cpp, WireHeader). Read by every executor (host, device, emulated), so it stays free of
// heavy includes.
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
constexpr size_t kFifoSetupBytes = 128;

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
  uint64_t llOffset;                  // from the start of the header to LL slot 0 (0: no LL slots)
  uint64_t llSlotBytes;               // bytes of one LL slot: line 0, then the data's lines
  uint64_t sizes[kMaxFifoSteps];      // bytes in each published slot
  uint64_t sigs[kMaxFifoSteps];       // the call signature of each published slot's message
  uint64_t sigCounts[kMaxFifoSteps];  // and its call's count (bytes for send and receive)
  uint64_t addrs[kMaxFifoSteps];      // a direct message's address in the sender's user buffer (0: in the slot)
  // Direct messages between processes (ConnEnd::direct kDirectAcrossProcesses; transports/shm):
  // the receiver reads the sender's buffer with a cross-memory read from senderPid. Written at
  // setup: the sender gives its pid and a probe word (its address and value) when it attaches;
  // the receiver reads the word and posts its verdict (crossReads) before its connection completes.
  uint64_t senderPid;
  uint64_t probeAddr;
  uint64_t probeValue;
  uint64_t crossReads;  // 0: no verdict yet, kCrossReadsYes, kCrossReadsNo
  // A transport's words from the sender to the receiver at setup, written before the sender
  // confirms that it attached: in p2p read mode, how the receiver maps the sender's Simple slots.
  uint8_t fromSender[kFifoSetupBytes];
};
constexpr uint64_t kCrossReadsYes = 1;
constexpr uint64_t kCrossReadsNo = 2;

constexpr size_t kLLLineBytes = 16;
// Lines 0 and 1 of an LL slot: halves {size}, {count, low 32 bits}, {signature low}, {signature high}.
constexpr size_t kLLHeaderLines = 2;
constexpr size_t kLLHeaderHalves = 2 * kLLHeaderLines;
// An LL slot for messages of up to `dataBytes`: the header lines, then 8 data bytes per line.
TUTTI_FIFO_HD inline size_t llSlotBytesFor(size_t dataBytes) {
  return dataBytes == 0 ? 0 : kLLLineBytes * (kLLHeaderLines + (dataBytes + 7) / 8);
}
// The data an LL slot of `llSlotBytes` holds.
TUTTI_FIFO_HD inline size_t llCapacity(size_t llSlotBytes) {
  return llSlotBytes == 0 ? 0 : (llSlotBytes / kLLLineBytes - kLLHeaderLines) * 8;
}
// The flag of the message with sequence number `seq` (head or tail before it moves).
TUTTI_FIFO_HD inline uint32_t llFlag(uint64_t seq) { return uint32_t(seq + 1); }
// One half of an LL line: 4 data bytes (or line 0's size) and the flag.
TUTTI_FIFO_HD inline uint64_t llHalf(uint32_t data, uint32_t flag) { return (uint64_t(flag) << 32) | data; }

// The header's bytes, rounded up so that the slots after it stay aligned.
TUTTI_FIFO_HD inline size_t fifoHeaderBytes() {
  return (sizeof(FifoHeader) + kFifoSlotAlign - 1) / kFifoSlotAlign * kFifoSlotAlign;
}

// llDataBytes: the largest LL message (0: the FIFO has no LL slots). simpleElsewhere: the Simple
// slots are not in this memory (p2p read mode: the sender's memory holds them).
TUTTI_FIFO_HD inline size_t fifoBytes(uint32_t nsteps, size_t slotBytes, size_t llDataBytes = 0,
                                      bool simpleElsewhere = false) {
  return fifoHeaderBytes() + size_t(nsteps) * ((simpleElsewhere ? 0 : slotBytes) + llSlotBytesFor(llDataBytes));
}
// The Simple slots of a FIFO kept apart from its header (p2p read mode).
TUTTI_FIFO_HD inline size_t fifoSimpleBytes(uint32_t nsteps, size_t slotBytes) { return size_t(nsteps) * slotBytes; }

TUTTI_FIFO_HD inline void fifoInit(FifoHeader* header, uint32_t nsteps, size_t slotBytes, size_t llDataBytes = 0,
                                   bool simpleElsewhere = false) {
  header->head = 0;
  header->tail = 0;
  header->attached = 0;
  header->nsteps = nsteps;
  header->slotBytes = slotBytes;
  header->slotOffset = simpleElsewhere ? 0 : fifoHeaderBytes();
  header->llSlotBytes = llSlotBytesFor(llDataBytes);
  header->llOffset = llDataBytes == 0 ? 0 : fifoHeaderBytes() + (simpleElsewhere ? 0 : size_t(nsteps) * slotBytes);
  for (uint32_t i = 0; i < kMaxFifoSteps; i++) header->addrs[i] = 0;
  header->senderPid = header->probeAddr = header->probeValue = header->crossReads = 0;
  for (size_t i = 0; i < kFifoSetupBytes; i++) header->fromSender[i] = 0;
  header->magic = kFifoMagic;
}

// LL slot `index`'s halves: the header's first (kLLHeaderHalves of them), then the data's.
TUTTI_FIFO_HD inline uint64_t* fifoLLSlot(FifoHeader* header, uint64_t index) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(header) + header->llOffset +
                                     (index % header->nsteps) * header->llSlotBytes);
}

TUTTI_FIFO_HD inline char* fifoSlot(FifoHeader* header, uint64_t index) {
  return reinterpret_cast<char*>(header) + header->slotOffset + (index % header->nsteps) * header->slotBytes;
}
// Simple slot `index` where this end reaches slot 0 at `slots` (null: after the header).
TUTTI_FIFO_HD inline char* fifoSlot(FifoHeader* header, char* slots, uint64_t index) {
  return slots == nullptr ? fifoSlot(header, index) : slots + (index % header->nsteps) * header->slotBytes;
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
