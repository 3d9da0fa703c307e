// Work descriptors: what a launch asks an executor to run, as plain data that the host
// executor reads in host memory and a CUDA kernel reads in device memory. A launch is one arena
// (LaunchWork, then its arrays at byte offsets): the operations' arguments, the lanes (a compiled
// plan's lane bound to a range, connections and scratch), the queues that group lanes, and the
// workers (host threads, or thread blocks) that run the queues; then the mutable state the
// executor keeps while it runs, reset at the start of every run. Pointers in it (buffers, FIFOs,
// plans, scratch) are addresses in the executor's space. Read by both compilers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "algorithms/flat_plan.h"
#include "kernels/fifo.h"
#include "kernels/redop.h"

namespace tutti::kern {

struct MappedBufferTable;

// One operation's arguments, bound at launch.
struct OpWork {
  const void* in;
  void* out;
  uint64_t count;  // elements of the whole range (Split, Whole) or of one block (Blocks)
  uint64_t seq;    // the operation's number on its communicator (errors name it)
  RedOp redop;
  const void* scalar;  // PreMulSum's scalar in the executor's memory, read when the operation
                       // runs (ncclScalarDevice); null: redop's own scalar
  int32_t nranks;
  uint8_t dtype;  // kern::Dtype
  uint8_t eltSize;
  uint8_t coll;             // plan::Coll
  uint8_t direct;           // DirectBuffers: which buffers this rank's peers may read in place
  uint32_t directMinBytes;  // the smallest message sent by address from a buffer readable only by address
  uint64_t signature;       // callSignature: what the peers' calls must agree on; 0: not checked
  // Where this rank's registered buffers are mapped in peer processes (kDirectMapped), in the
  // executor's memory; null: nowhere.
  const MappedBufferTable* mapped;
};

// OpWork::direct: the buffers whose spans a kDirect step may send as their address (plan.h,
// "Direct sends"). kDirectIn, kDirectOut: registered on this rank (ncclCommRegister) for the whole
// range the call uses, so readable over every kind of direct connection, mapped ones included.
// kDirectInByAddress, kDirectOutByAddress: not registered, but readable where the receiver reaches
// any address of the sender (kDirectShared, kDirectAcrossProcesses), for messages of at least
// OpWork::directMinBytes.
enum DirectBuffers : uint8_t { kDirectIn = 1, kDirectOut = 2, kDirectInByAddress = 4, kDirectOutByAddress = 8 };

// What every rank's call of one operation must agree on, sent with each message and compared by
// the receiver (with signatureCount): the collective's number on the communicator (24 bits;
// send and receive are not numbered), the collective (send and receive alike), the data type and
// reduction where they matter, and the root (23 bits). 0 never results: the top bit is set for
// every valid call.
TUTTI_FLAT_HD uint64_t callSignature(uint32_t collSeq, uint32_t coll, uint32_t dtype, uint32_t redKind, uint32_t root) {
  return uint64_t(collSeq & 0xffffffu) | uint64_t(coll & 0xfu) << 24 | uint64_t(dtype & 0xfu) << 28 |
         uint64_t(redKind & 0xffu) << 32 | uint64_t(root & 0x7fffffu) << 40 | uint64_t(1) << 63;
}
TUTTI_FLAT_HD uint32_t signatureSeq(uint64_t s) { return uint32_t(s & 0xffffffu); }
TUTTI_FLAT_HD uint32_t signatureColl(uint64_t s) { return uint32_t(s >> 24) & 0xfu; }
TUTTI_FLAT_HD uint32_t signatureDtype(uint64_t s) { return uint32_t(s >> 28) & 0xfu; }
TUTTI_FLAT_HD uint32_t signatureRedKind(uint64_t s) { return uint32_t(s >> 32) & 0xffu; }
TUTTI_FLAT_HD uint32_t signatureRoot(uint64_t s) { return uint32_t(s >> 40) & 0x7fffffu; }
// The root field of a send's or receive's signature (which has no root): 0 for ncclSend and
// ncclRecv, kPartOfAllToAllv for a block of ncclAllToAllv, so that a mismatch names that call; a
// block's signature also carries its call's number among the communicator's ncclAllToAllv calls.
constexpr uint32_t kPartOfAllToAllv = 1;

// One end of one connection: the FIFO the lane reads (receive) or fills (send).
struct ConnEnd {
  FifoHeader* fifo;  // owned by the receiving rank
  char* slots;       // Simple slot 0 as this end reaches it, where the slots are not after the header
                     // (p2p read mode: in the sender's memory, mapped by the receiver); null: the
                     // FIFO's own (fifo.h, fifoSlot)
  void* bell;        // host executor: the kern::Bell to ring after moving the FIFO; null: the other
                     // side polls (a GPU rings no futex)
  int32_t peer;
  uint16_t ll;      // nonzero: this operation's unjoined messages on the FIFO go as LL lines (fifo.h)
  uint16_t direct;  // DirectKind: nonzero, a message may carry an address into the sender's user
                    // buffer (fifo.h); both ends see the same value
};

// ConnEnd::direct: how the receiver reaches an address the sender sent.
enum DirectKind : uint16_t {
  kDirectNone = 0,
  kDirectShared = 1,           // the ends share an address space: the receiver reads it as it is
  kDirectAcrossProcesses = 2,  // the receiver reads the sender's process (FifoHeader::senderPid)
                               // with a cross-memory read; host executor only
  kDirectMapped = 3            // the receiver maps the sender's registered buffers (exported memory,
                               // runtime/comm/peer_buffers.h): the sender sends the address in the
                               // receiver's mapping (OpWork::mapped), which the receiver reads as
                               // it is; a span not mapped there is copied
};

// A sender's registered buffers as its peer processes map them: [begin, end) in the sender's
// memory is at begin + delta in peer's. Written once per version by the host (a new table for
// each change, so a running launch never sees one half-written), read by the executor.
struct MappedBuffer {
  uint64_t begin, end;
  int64_t delta;
  int32_t peer;
  uint32_t pad;
};
struct MappedBufferTable {
  uint32_t count;
  uint32_t pad[3];
  MappedBuffer entries[1];  // `count` of them
};
constexpr size_t mappedBufferTableBytes(uint32_t count) {
  return 16 + size_t(count < 1 ? 1 : count) * sizeof(MappedBuffer);
}

// One lane of one operation on one channel.
struct LaneWork {
  const plan::FlatPlan* plan;  // the compiled plan the lane belongs to
  uint64_t begin, end;         // element range (within each block for Blocks)
  uint64_t chunkElems;         // elements per chunk (a joined run of them fits one slot); each
                               // scratch chunk holds this many
  uint64_t scratch;            // byte offset of the lane's scratch in the launch's scratch block
  uint32_t lane;               // index of the lane in its plan
  uint32_t op;                 // index in the launch's ops
  uint32_t sends, recvs;       // index of the lane's first send / receive ConnEnd (in the plan
                               // lane's peer order)
  uint32_t extents;            // index of the lane's first scratch extent (one per scratch chunk)
  int32_t channel;
};

// Lanes that share a connection run one after another, in order; queues run side by side.
struct QueueWork {
  uint32_t firstLane, nlanes;
};
// A worker (a host thread, or a thread block) runs its queues side by side.
struct WorkerWork {
  uint32_t firstQueue, nqueues;
};

// A lane's progress, reset when a run starts (prepareLane, lane_engine.h).
struct LaneState {
  uint64_t tile, ntiles;
  uint64_t tileChunk;   // Split: elements per chunk in the current tile
  uint32_t step;        // the next step of the tile
  uint32_t tileChunks;  // chunks per tile (Split: the plan lane's, 0 meaning nranks; else 1)
  uint32_t sentDirect;  // nonzero once the lane sent a message by address (its receiver must read it)
  uint32_t pad;
};
struct QueueState {
  uint32_t current;  // the queue's lane running now (nlanes: done)
  uint32_t pad;
};

constexpr uint32_t kLaunchWorkMagic = 0x776f726bu;  // "work"

// The arena's header. Read-only parts first, then the state; every array 8-byte aligned.
struct LaunchWork {
  uint32_t magic;
  uint32_t bytes;
  uint32_t nworkers, nqueues, nlanes, nops, nconns, nextents;
  uint32_t workersOffset, queuesOffset, lanesOffset, opsOffset, connsOffset;
  uint32_t laneStatesOffset, queueStatesOffset, extentsOffset;  // the state
  uint32_t stateOffset;  // where the state starts (the bytes up to it never change in a run)
  uint32_t pad;
  char* scratch;  // the launch's scratch block (null: none needed)

#define TUTTI_WORK_ARRAY(Type, name, offset)                                                             \
  TUTTI_FLAT_HD Type* name() { return reinterpret_cast<Type*>(reinterpret_cast<char*>(this) + offset); } \
  TUTTI_FLAT_HD const Type* name() const {                                                               \
    return reinterpret_cast<const Type*>(reinterpret_cast<const char*>(this) + offset);                  \
  }
  TUTTI_WORK_ARRAY(WorkerWork, workers, workersOffset)
  TUTTI_WORK_ARRAY(QueueWork, queues, queuesOffset)
  TUTTI_WORK_ARRAY(LaneWork, lanes, lanesOffset)
  TUTTI_WORK_ARRAY(OpWork, ops, opsOffset)
  TUTTI_WORK_ARRAY(ConnEnd, conns, connsOffset)
  TUTTI_WORK_ARRAY(LaneState, laneStates, laneStatesOffset)
  TUTTI_WORK_ARRAY(QueueState, queueStates, queueStatesOffset)
  TUTTI_WORK_ARRAY(uint64_t, extents, extentsOffset)  // elements last written to each scratch chunk
#undef TUTTI_WORK_ARRAY
};

static_assert(std::is_trivially_copyable_v<OpWork> && sizeof(OpWork) == 96, "OpWork layout");
static_assert(sizeof(MappedBuffer) == 32 && offsetof(MappedBufferTable, entries) == 16, "MappedBufferTable layout");
static_assert(std::is_trivially_copyable_v<ConnEnd> && sizeof(ConnEnd) == 32, "ConnEnd layout");
static_assert(std::is_trivially_copyable_v<LaneWork> && sizeof(LaneWork) == 64, "LaneWork layout");
static_assert(std::is_trivially_copyable_v<LaneState> && sizeof(LaneState) == 40, "LaneState layout");
static_assert(std::is_trivially_copyable_v<LaunchWork> && sizeof(LaunchWork) == 80, "LaunchWork layout");
static_assert(std::is_trivially_copyable_v<RedOp> && sizeof(RedOp) == 24, "RedOp layout");

// Why an executor stopped an operation. Written by the executor (a kernel writes it into memory
// the host maps), turned into words by describeFault (host only), the same words for every
// executor.
enum class Fault : uint32_t {
  None = 0,
  SizeMismatch,   // a message of `got` bytes where the plan expects `expected`
  PartsMismatch,  // a message of `got` joined parts (0: not joined) where the plan joins `expected`
  SlotOverflow,   // a joined run larger than a FIFO slot (`got` bytes, slot `expected`)
  Timeout,        // no progress for the timeout: waiting for data from `peer` (waitingForData) or space at it
  Aborted,        // the abort word was set
  BadReduction,   // a reduction the executor cannot apply (`got`: RedKind, `expected`: its count)
  CallMismatch,   // the peer's call differs from this rank's: `got` the peer's callSignature and
                  // `tile` its count, `expected` and `ntiles` this rank's
};

struct ExecFault {
  uint32_t fault;  // Fault
  int32_t peer;    // -1: none
  int32_t channel;
  uint32_t coll;  // plan::Coll
  uint64_t opSeq;
  uint64_t got, expected;
  uint64_t tile, ntiles;
  uint32_t step;            // plan::Op of the step
  uint32_t waitingForData;  // Timeout: 1 data from peer, 0 space at peer, 2 peer's direct reads (fifo.h)
  uint64_t waitedNs;        // Timeout: how long
};
static_assert(std::is_trivially_copyable_v<ExecFault> && sizeof(ExecFault) == 72, "ExecFault layout");

}  // namespace tutti::kern
