// The plan IR: what one rank does for one collective, as data. Algorithms produce it; the host
// executor (and later the CUDA executor) interpret it. Read by both compilers: POD only.
//
// A plan is a set of lanes. A lane is a list of steps that is repeated once per tile of the
// user's buffer; each step moves one chunk through the lane's connections. A lane may send to
// and receive from several peers; each step names which of the lane's send and receive
// connections it uses. Buffers are referred to symbolically (input, output or the lane's
// scratch, and which chunk or block of the tile), so a plan does not depend on counts or
// pointers, which are bound at launch. See kernels/host/host_executor.cpp for how tiles and chunks
// map to elements.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TUTTI_PLAN_HD __host__ __device__
#else
#define TUTTI_PLAN_HD
#endif

namespace tutti::plan {

// How a tile's chunks map onto a buffer.
enum class Layout : uint8_t {
  Split,   // the buffer is one range; a tile is nranks consecutive chunks of it (ring all-reduce)
  Blocks,  // the buffer is nranks blocks of `count` elements; chunk b of a tile lies in block b
  Whole,   // the buffer is one range; a tile is one chunk
};

// Scratch is the lane's own staging memory: `scratchChunks` chunks per tile, allocated once per
// communicator and reused; its contents do not outlive a tile.
enum class Buf : uint8_t { None, In, Out, Scratch };

struct BufRef {
  Buf buf = Buf::None;
  int32_t chunk = -1;  // Split: chunk index in the tile; Blocks: block index (-1: a single-block
                       // buffer, such as all-gather's input); Whole: unused; Scratch: the scratch
                       // chunk of the tile, 0 <= chunk < scratchChunks
};

enum class Op : uint8_t {
  Send,                // src -> send FIFO
  Recv,                // recv FIFO -> dst
  RecvSend,            // recv FIFO -> send FIFO, and -> dst when dst is set
  RecvReduceSend,      // recv FIFO (op) src -> send FIFO
  RecvReduceCopy,      // recv FIFO (op) src -> dst
  RecvReduceCopySend,  // recv FIFO (op) src -> dst, and dst -> send FIFO
  Copy,                // src -> dst, locally
  Reduce,              // dst (op) src -> dst, locally
};

// Flags of a step.
enum StepFlags : uint8_t {
  kPre = 1,     // apply the reduction's pre-operation (PreMulSum's scalar) to src
  kPost = 2,    // apply the reduction's post-operation (average's division) to the result
  kJoin = 4,    // this step and the next travel as one message (see "Joined steps" below)
  kDirect = 8,  // what the step sends may go as its address instead of its bytes ("Direct sends")
};

struct Step {
  Op op;
  uint8_t flags;
  BufRef src;
  BufRef dst;
  uint8_t sendConn = 0;  // which of the lane's sendPeers a sending step uses
  uint8_t recvConn = 0;  // which of the lane's recvPeers a receiving step uses
};

// Joined steps. A run of consecutive steps of a lane, each flagged kJoin except the last, is one
// message: the same op, on the same connection(s); the sender writes each step's chunk into one
// FIFO slot, one part after the other, and the receiver takes each step's part from that one
// slot, so a round of an algorithm that moves several blocks to one peer costs one step
// overhead, not one per block. Receiver and sender must cut a connection's messages alike. The
// slot holds a table (one 8-byte word: kJoinMagic and the number of parts; then each part's size
// in bytes, 4 bytes each), padded to kJoinAlign, then the parts back to back (every part is a
// whole number of elements, so each starts aligned to its element). A lone step (no kJoin on it
// or before it) is a message of one part with no table, as before. kernels/fifo.h reads and
// writes the table.
constexpr uint32_t kJoinMagic = 0x6a6f696eu;  // "join"
constexpr size_t kJoinAlign = 16;
TUTTI_PLAN_HD constexpr size_t joinTableBytes(size_t parts) {
  return (8 + 4 * parts + kJoinAlign - 1) / kJoinAlign * kJoinAlign;
}
// The largest chunk (bytes) of which `parts` fit one slot of slotBytes with their table
// (slotBytes itself for a lone step; 0 if not even one byte each fits).
TUTTI_PLAN_HD constexpr size_t joinedChunkBytes(size_t slotBytes, size_t parts) {
  if (parts <= 1) return slotBytes;
  return slotBytes > joinTableBytes(parts) ? (slotBytes - joinTableBytes(parts)) / parts : 0;
}

// Direct sends (zero-copy). A sending step flagged kDirect promises that the span it sends (a Send's
// source, the destination of a RecvSend or RecvReduceCopySend) lies in the user's input or output
// and is final: this rank writes it no more in the operation, in place or not. Where the
// executor may (the span's buffer is registered, the connection shares the sender's address
// space, the message is a lone Simple step without a pre-operation to apply: kernels/lane_engine.h),
// the message then carries the span's address instead of its bytes, and the receiver reads the
// peer's buffer in place: one copy instead of two. Elsewhere the flag changes nothing.
TUTTI_PLAN_HD constexpr bool directSendable(Op op) {
  return op == Op::Send || op == Op::RecvSend || op == Op::RecvReduceCopySend;
}

// The collectives a plan can implement.
enum class Coll : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv
};
const char* collName(Coll coll);   // "allreduce", ... (NCCL_ALGO's per-collective prefixes)
const char* collTitle(Coll coll);  // "AllReduce", ... (as NCCL's logs and errors name them)
// Broadcast, reduce, gather and scatter: the collectives with a root.
inline bool rootedColl(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

// Which connections a lane uses. Ring lanes use the channel's ring connections; direct lanes
// use point-to-point connections. With the lane's tag, a plan can keep two uses of the same
// peer apart (the two trees of a double binary tree): connections of different tags are
// different FIFOs, so lanes on them run concurrently.
enum class ConnKind : uint8_t { None, Ring, Direct };

const char* opName(Op op);
// Whether a step of this op sends on one of its lane's connections, or receives on one.
bool opSends(Op op);
bool opReceives(Op op);

}  // namespace tutti::plan
