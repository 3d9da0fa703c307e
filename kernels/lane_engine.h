// The lane engine: how a lane of a launch (kernels/work.h) advances, one step (or one joined run
// of steps) at a time, written once for every executor. The host executor runs it on one thread
// per worker; the device executor runs it with a thread block per worker, one thread deciding
// and every thread moving bytes; the emulated device runs the device executor's code on host
// threads. Because every executor takes the same decisions in the same order and reduces with the
// same functors, a plan with a fixed reduction order gives bitwise the same result on each.
//
// A step is run in four phases:
//   1. tryBegin (the deciding thread): is the receive FIFO non-empty and the send FIFO not full?
//   2. partGeometry (the deciding thread), for each part of a joined run: where its source and
//      destination lie in the current tile, how many elements it moves, checked against what
//      arrived; scratch extents are updated here, in order;
//   3. moveData (every thread of the worker): the part's bytes, through a Mover;
//   4. endPart / finishRun (the deciding thread): the joined table, then publication (the
//      receive slot freed, the send slot published with release semantics) and the lane's
//      progress.
// How a step is sized: by the chunk of the user buffer it names (its source if that is the input
// or output, else its destination). A step between scratch and FIFOs only moves what its scratch
// source holds, or, with no source, what arrived; a scratch chunk holds what was last written to
// it in the tile (at most one chunk). See plan.h for joined runs.
//
// Direct messages (zero-copy; plan.h, "Direct sends"; fifo.h). A lone Simple step flagged kDirect
// whose sent span lies in a buffer its operation lets peers read (OpWork::direct), on a connection
// whose receiver reads the sender's buffers (ConnEnd::direct: the ends share an address space, the
// receiver reads the sender's process, or it maps the sender's registered buffers), publishes the span's address and
// size instead of copying it into the slot (sendsDirect); whatever step receives that message reads the peer's buffer
// at that address as it would read the slot, so every receiving op serves both kinds of message. A worker whose
// operations sent direct messages does not finish before each such FIFO is drained (firstUndrained): the receiver frees
// a slot only after reading, so once the sender's operation ends its buffers are no longer read and may be reused.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/flat_plan.h"
#include "algorithms/tiling.h"
#include "kernels/dtypes.h"
#include "kernels/fifo.h"
#include "kernels/work.h"

#if defined(__CUDACC__)
#define TUTTI_ENGINE_HD __host__ __device__ inline
#else
#define TUTTI_ENGINE_HD inline
#endif

namespace tutti::kern::engine {

using plan::Buf;
using plan::BufRef;
using plan::Layout;
using plan::Op;
using plan::Step;

// Fairness between a worker's queues: a lane runs at most this many steps in a row while another
// queue of its worker may be able to move (kernels/README.md, "The worker's rules", rule 3).
constexpr uint32_t kQueueBurst = 64;

// A lane of a launch, with everything the engine reads and writes for it.
struct LaneRef {
  const LaneWork* work;
  const plan::FlatPlan* plan;
  const plan::FlatLane* spec;
  const OpWork* op;
  LaneState* state;
  uint64_t* extents;     // elements last written to each scratch chunk
  char* scratch;         // the lane's scratch, or null
  const ConnEnd* sends;  // by Step::sendConn
  const ConnEnd* recvs;  // by Step::recvConn
};

// `ops`: the launch's operations, where the executor keeps them (the arena's own, or a copy passed
// with the launch).
TUTTI_ENGINE_HD LaneRef laneRef(LaunchWork& w, uint32_t index, const OpWork* ops) {
  const LaneWork& lw = w.lanes()[index];
  LaneRef l;
  l.work = &lw;
  l.plan = lw.plan;
  l.spec = &lw.plan->lane(lw.lane);
  l.op = &ops[lw.op];
  l.state = &w.laneStates()[index];
  l.extents = w.extents() + lw.extents;
  l.scratch = l.spec->scratchChunks > 0 && w.scratch != nullptr ? w.scratch + lw.scratch : nullptr;
  l.sends = w.conns() + lw.sends;
  l.recvs = w.conns() + lw.recvs;
  return l;
}

TUTTI_ENGINE_HD const Step& currentStep(const LaneRef& l) { return l.plan->step(*l.spec, l.state->step); }
TUTTI_ENGINE_HD bool laneDone(const LaneRef& l) { return l.state->tile >= l.state->ntiles; }

// Split tiles shrink their chunks at the end of the range so that every chunk of the last tile
// gets a share (tiling.h).
TUTTI_ENGINE_HD void startTile(const LaneRef& l) {
  LaneState& s = *l.state;
  if (l.spec->layout != Layout::Split || s.tile >= s.ntiles) return;
  s.tileChunk = tiling::splitTileChunk(l.work->begin, l.work->end, s.tile, l.work->chunkElems, s.tileChunks);
}

// Resets the lane's progress: tiles from its range, layout and chunk.
TUTTI_ENGINE_HD void prepareLane(const LaneRef& l) {
  LaneState& s = *l.state;
  const plan::FlatLane& spec = *l.spec;
  s.tileChunks = 1;
  if (spec.layout == Layout::Split)
    s.tileChunks = spec.tileChunks > 0 ? uint32_t(spec.tileChunks) : uint32_t(l.op->nranks);
  const uint64_t range = l.work->end > l.work->begin ? l.work->end - l.work->begin : 0;
  s.ntiles = range == 0 || spec.nsteps == 0 ? 0 : tiling::ceilDiv(range, l.work->chunkElems * s.tileChunks);
  for (int32_t c = 0; c < spec.scratchChunks; c++) l.extents[c] = 0;
  s.tile = 0;
  s.step = 0;
  s.tileChunk = 0;
  s.sentDirect = 0;
  startTile(l);
}

struct Span {
  char* ptr = nullptr;
  uint64_t elems = 0;
};

TUTTI_ENGINE_HD bool isUserBuffer(Buf buf) { return buf == Buf::In || buf == Buf::Out; }

// Where a buffer reference of the current tile lies. A scratch chunk's extent is what was last
// written to it in this tile.
TUTTI_ENGINE_HD Span resolve(const LaneRef& l, const BufRef& ref) {
  const OpWork& op = *l.op;
  const LaneState& s = *l.state;
  const uint64_t C = l.work->chunkElems;
  Span span;
  if (ref.buf == Buf::None) return span;
  if (ref.buf == Buf::Scratch) {
    span.ptr = l.scratch + uint64_t(ref.chunk) * C * op.eltSize;
    span.elems = l.extents[ref.chunk];
    return span;
  }
  char* base = ref.buf == Buf::In ? const_cast<char*>(static_cast<const char*>(op.in)) : static_cast<char*>(op.out);
  uint64_t offset = 0, elems = 0;
  const uint64_t begin = l.work->begin, end = l.work->end;
  switch (l.spec->layout) {
    case Layout::Split: {
      uint64_t tileStart = begin + s.tile * s.tileChunks * C;
      offset = tileStart + uint64_t(ref.chunk) * s.tileChunk;
      elems = offset >= end ? 0 : tiling::minSize(s.tileChunk, end - offset);
      break;
    }
    case Layout::Blocks: {
      uint64_t start = begin + s.tile * C;
      elems = tiling::minSize(C, end - start);
      offset = ref.chunk >= 0 ? uint64_t(ref.chunk) * op.count + start : start;
      break;
    }
    case Layout::Whole: {
      offset = begin + s.tile * C;
      elems = tiling::minSize(C, end - offset);
      break;
    }
  }
  span.ptr = base + offset * op.eltSize;
  span.elems = elems;
  return span;
}

// A step, or a joined run of steps, that the FIFOs allow to run now.
struct Run {
  uint32_t parts;
  bool recv, send;
  bool rll, sll;  // the message arrives / leaves as LL lines (fifo.h); its slot is then the staging
  FifoHeader* rf;
  FifoHeader* sf;
  uint64_t rtail, shead;
  char* rslot;
  char* sslot;
  uint64_t got;                   // bytes in the received slot
  uint64_t theirSig, theirCount;  // the received message's call signature and count (0: not carried)
  uint64_t roff, soff;            // where the next part starts in each slot
  uint64_t sent;                  // bytes written to the send slot (or sent by address)
  const char* raddr;              // the received message's address in the sender's buffer (null: in the slot)
  uint64_t saddr;                 // the address the run sends instead of bytes (0: the bytes, in the slot)
};

// One part of a run, ready to move.
struct Part {
  Op op;
  unsigned flags;  // ReduceFlags
  char* src;
  char* dst;
  const char* rptr;  // what arrived for it (null: it receives nothing)
  char* sptr;        // where it goes in the send slot (null: it sends nothing)
  uint64_t elems, bytes;
};

TUTTI_ENGINE_HD void setFault(ExecFault& f, Fault kind, const LaneRef& l, int32_t peer, uint64_t got,
                              uint64_t expected) {
  f.fault = uint32_t(kind);
  f.peer = peer;
  f.channel = l.work->channel;
  f.coll = l.op->coll;
  f.opSeq = l.op->seq;
  f.got = got;
  f.expected = expected;
  f.tile = l.state->tile;
  f.ntiles = l.state->ntiles;
  f.step = uint32_t(currentStep(l).op);
  f.waitingForData = 0;
  f.waitedNs = 0;
}

// Phase 1: whether the lane's current step (or joined run) can run now; if so, fills `run`.
// Sync provides loadAcquire(const uint64_t*) for the counters the other side writes.
template <class Sync>
TUTTI_ENGINE_HD bool tryBegin(const LaneRef& l, Run& run, const Sync& sync) {
  const Step& step = currentStep(l);
  run.parts = (step.flags & plan::kJoin) ? plan::joinedRunLength(*l.plan, *l.spec, l.state->step) : 1;
  run.recv = plan::stepReceives(step.op);
  run.send = plan::stepSends(step.op);
  run.rf = run.recv ? l.recvs[step.recvConn].fifo : nullptr;
  run.sf = run.send ? l.sends[step.sendConn].fifo : nullptr;
  run.rll = run.recv && run.parts == 1 && l.recvs[step.recvConn].ll != 0;
  run.sll = run.send && run.parts == 1 && l.sends[step.sendConn].ll != 0;
  run.rtail = run.shead = 0;
  uint64_t line0 = 0;
  if (run.recv) {
    run.rtail = run.rf->tail;  // only this side writes it
    if (run.rll) {
      line0 = sync.loadAcquire(fifoLLSlot(run.rf, run.rtail));
      if (uint32_t(line0 >> 32) != llFlag(run.rtail)) return false;
    } else if (sync.loadAcquire(&run.rf->head) <= run.rtail) {
      // Not "==": the receiver may be past head. It takes an LL message once its line 0 lands,
      // and a p2p copy proxy (NCCL_P2P_USE_CUDA_MEMCPY) moves head only after it copied the
      // message's Simple words as well; a Simple message that follows at once must wait for its
      // own head, or its slot's words are a lap old.
      return false;
    }
  }
  if (run.send) {
    run.shead = run.sf->head;  // only this side writes it
    if (run.shead - sync.loadAcquire(&run.sf->tail) >= run.sf->nsteps) return false;
  }
  run.rslot = run.recv ? fifoSlot(run.rf, l.recvs[step.recvConn].slots, run.rtail) : nullptr;
  run.sslot = run.send ? fifoSlot(run.sf, l.sends[step.sendConn].slots, run.shead) : nullptr;
  run.got = run.rll ? uint32_t(line0) : run.recv ? run.rf->sizes[run.rtail % run.rf->nsteps] : 0;
  run.theirSig = run.theirCount = 0;
  if (run.rll) {
    // The header's other halves left the sender with line 0; each is valid once its flag is.
    const uint64_t* header = fifoLLSlot(run.rf, run.rtail);
    const uint32_t flag = llFlag(run.rtail);
    uint64_t h[kLLHeaderHalves];
    for (size_t i = 1; i < kLLHeaderHalves; i++) {
      h[i] = sync.loadAcquire(&header[i]);
      while (uint32_t(h[i] >> 32) != flag) h[i] = sync.loadAcquire(&header[i]);
    }
    run.theirCount = uint32_t(h[1]);
    run.theirSig = uint64_t(uint32_t(h[2])) | uint64_t(uint32_t(h[3])) << 32;
  } else if (run.recv) {
    run.theirSig = run.rf->sigs[run.rtail % run.rf->nsteps];
    run.theirCount = run.rf->sigCounts[run.rtail % run.rf->nsteps];
  }
  // Read only on a connection that may carry addresses, whose sender writes the word with each
  // Simple message (finishRun).
  run.raddr = nullptr;
  if (run.recv && !run.rll && l.recvs[step.recvConn].direct != 0)
    run.raddr = reinterpret_cast<const char*>(static_cast<uintptr_t>(run.rf->addrs[run.rtail % run.rf->nsteps]));
  run.saddr = 0;
  run.roff = run.soff = 0;
  run.sent = 0;
  return true;
}

// Where the peer process `peer` maps [span, span + bytes) of this rank's registered buffers
// (kDirectMapped), or 0 where it does not.
TUTTI_ENGINE_HD uint64_t mappedAddress(const MappedBufferTable* table, int32_t peer, uint64_t span, uint64_t bytes) {
  if (table == nullptr) return 0;
  for (uint32_t i = 0; i < table->count; i++) {
    const MappedBuffer& m = table->entries[i];
    if (m.peer == peer && span >= m.begin && span < m.end && bytes <= m.end - span)
      return uint64_t(int64_t(span) + m.delta);
  }
  return 0;
}

// Whether the run's lone step sends its span by address (a direct message; see the top).
TUTTI_ENGINE_HD bool sendsDirect(const LaneRef& l, const Run& run, const Step& step, uint64_t bytes) {
  if (!(step.flags & plan::kDirect) || !run.send || run.sll || run.parts != 1 || l.sends[step.sendConn].direct == 0)
    return false;
  const BufRef& sent = step.op == Op::Send ? step.src : step.dst;
  const uint8_t registered = sent.buf == Buf::In ? kDirectIn : sent.buf == Buf::Out ? kDirectOut : 0;
  // A buffer readable only by address goes so where the receiver reaches any address of this
  // rank (not through mappings of registered buffers), and only for messages worth the wait for
  // the receiver's read.
  const uint8_t byAddress = registered == kDirectIn    ? kDirectInByAddress
                            : registered == kDirectOut ? kDirectOutByAddress
                                                       : 0;
  const bool readable = (l.op->direct & registered) != 0 ||
                        ((l.op->direct & byAddress) != 0 && l.sends[step.sendConn].direct != kDirectMapped &&
                         bytes >= l.op->directMinBytes);
  if (registered == 0 || !readable || !plan::directSendable(step.op)) return false;
  // A Send that applies PreMulSum's scalar sends other bytes than its span holds.
  return !(step.op == Op::Send && (step.flags & plan::kPre) && l.op->redop.kind == RedKind::PreMulSum);
}

// The count peers compare with the signature: elements, or bytes for send and receive (a pair
// may differ in type as long as the bytes agree).
TUTTI_ENGINE_HD uint64_t signatureCount(const OpWork& op) {
  const plan::Coll c = plan::Coll(op.coll);
  return c == plan::Coll::Send || c == plan::Coll::Recv ? op.count * op.eltSize : op.count;
}

TUTTI_ENGINE_HD unsigned reduceFlagsOf(const Step& step) {
  unsigned flags = 0;
  if (step.flags & plan::kPre) flags |= kPreOnB;
  if (step.flags & plan::kPost) flags |= kPost;
  return flags;
}

// Phase 2: part j of the run, located and checked. Returns false with `fault` set when what
// arrived disagrees with the plan (the ranks' calls or plans differ).
TUTTI_ENGINE_HD bool partGeometry(const LaneRef& l, Run& run, uint32_t j, Part& part, ExecFault& fault) {
  const Step& step = l.plan->step(*l.spec, l.state->step + j);
  const OpWork& op = *l.op;
  const uint64_t elt = op.eltSize;
  const int32_t rpeer = run.recv ? l.recvs[step.recvConn].peer : -1;
  uint64_t arrived = run.got;
  // The peer's call first: a message of another call would otherwise be read as this one's.
  if (j == 0 && run.recv && run.theirSig != 0 && op.signature != 0) {
    const uint64_t ourCount = signatureCount(op);
    // LL carries the count's low 32 bits (its operations are small).
    const bool countDiffers = run.rll ? uint32_t(run.theirCount) != uint32_t(ourCount) : run.theirCount != ourCount;
    if (run.theirSig != op.signature || countDiffers) {
      setFault(fault, Fault::CallMismatch, l, rpeer, run.theirSig, op.signature);
      fault.tile = run.theirCount;
      fault.ntiles = ourCount;
      return false;
    }
  }
  if (run.parts > 1) {
    if (j == 0) {
      const uint64_t table = plan::joinTableBytes(run.parts);
      if (run.recv) {
        if (run.got < table) return setFault(fault, Fault::SizeMismatch, l, rpeer, run.got, table), false;
        const uint32_t parts = fifoJoinParts(run.rslot);
        if (parts != run.parts) return setFault(fault, Fault::PartsMismatch, l, rpeer, parts, run.parts), false;
      }
      if (run.send) fifoJoinStart(run.sslot, run.parts);
      run.roff = run.soff = table;
    }
    if (run.recv) {
      arrived = fifoJoinSizes(run.rslot)[j];
      if (run.roff + arrived > run.got)
        return setFault(fault, Fault::SizeMismatch, l, rpeer, run.got, run.roff + arrived), false;
    }
    // The chunk was cut so that the run fits (joinedChunkBytes); a plan whose ranks disagree on
    // it must not write past the slot.
    if (run.send && run.soff + l.work->chunkElems * elt > run.sf->slotBytes)
      return setFault(fault, Fault::SlotOverflow, l, l.sends[step.sendConn].peer, run.soff + l.work->chunkElems * elt,
                      run.sf->slotBytes),
             false;
  }
  const Span src = resolve(l, step.src), dst = resolve(l, step.dst);
  // How many elements it moves: as many as its user buffer chunk holds; between scratch and
  // FIFOs only, what its scratch source holds, or what arrived.
  uint64_t elems;
  if (isUserBuffer(step.src.buf)) {
    elems = src.elems;
  } else if (isUserBuffer(step.dst.buf)) {
    elems = dst.elems;
  } else if (step.src.buf == Buf::Scratch) {
    elems = src.elems;
  } else if (run.recv) {
    if (arrived % elt != 0 || arrived / elt > l.work->chunkElems)
      return setFault(fault, Fault::SizeMismatch, l, rpeer, arrived, l.work->chunkElems * elt), false;
    elems = arrived / elt;
  } else {
    elems = l.spec->layout == Layout::Split ? l.state->tileChunk : l.work->chunkElems;
  }
  if (step.dst.buf == Buf::Scratch) l.extents[step.dst.chunk] = elems;
  const uint64_t bytes = elems * elt;
  if (run.recv && arrived != bytes) return setFault(fault, Fault::SizeMismatch, l, rpeer, arrived, bytes), false;
  // The launch chose LL only for operations whose messages fit an LL slot (ConnEnd::ll).
  const uint64_t capacity = run.sll ? llCapacity(run.sf->llSlotBytes) : 0;
  if (run.sll && bytes > capacity)
    return setFault(fault, Fault::SlotOverflow, l, l.sends[step.sendConn].peer, bytes, capacity), false;
  part.op = step.op;
  part.flags = reduceFlagsOf(step);
  part.src = src.ptr;
  part.dst = dst.ptr;
  part.rptr = run.recv ? (run.raddr != nullptr && run.parts == 1 ? run.raddr : run.rslot + run.roff) : nullptr;
  part.sptr = run.send ? run.sslot + run.soff : nullptr;
  if (sendsDirect(l, run, step, bytes)) {
    // The span goes by address: a Send's source, else the destination it is written to; to a
    // peer process that maps it, its address there (or, not mapped there, it is copied).
    const uint64_t span = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(step.op == Op::Send ? src.ptr : dst.ptr));
    const ConnEnd& to = l.sends[step.sendConn];
    run.saddr = to.direct == kDirectMapped ? mappedAddress(l.op->mapped, to.peer, span, bytes) : span;
    if (run.saddr != 0) part.sptr = nullptr;
  }
  part.elems = elems;
  part.bytes = bytes;
  return true;
}

// Phase 3: the part's bytes. A Mover provides (for the operation's type and reduction):
//   copy(dst, src, bytes), move(dst, src, bytes) (may overlap), copy2(dst, dst2, src, bytes),
//   reduce(dst, dst2, a, b, elems, flags): dst = post(a OP pre(b)), or post(pre(b)) without a,
//   also written to dst2 when it is not null (ReduceFlags; see kernels/redop.h).
// A part that sends by address (sptr null) writes nothing to the slot.
template <class Mover>
TUTTI_ENGINE_HD void moveData(Mover& m, const OpWork& op, const Part& p) {
  const bool pre = (p.flags & kPreOnB) && op.redop.kind == RedKind::PreMulSum;
  const bool post = (p.flags & kPost) && op.redop.kind == RedKind::SumPostDiv;
  switch (p.op) {
    case Op::Send:
      if (p.sptr == nullptr) break;
      if (pre)
        m.reduce(p.sptr, nullptr, nullptr, p.src, p.elems, kPreOnB);
      else
        m.copy(p.sptr, p.src, p.bytes);
      break;
    case Op::Recv: m.copy(p.dst, p.rptr, p.bytes); break;
    case Op::RecvSend:
      if (p.sptr == nullptr)
        m.copy(p.dst, p.rptr, p.bytes);
      else if (p.dst != nullptr)
        m.copy2(p.sptr, p.dst, p.rptr, p.bytes);
      else
        m.copy(p.sptr, p.rptr, p.bytes);
      break;
    case Op::RecvReduceSend: m.reduce(p.sptr, nullptr, p.rptr, p.src, p.elems, p.flags & kPreOnB); break;
    case Op::RecvReduceCopy: m.reduce(p.dst, nullptr, p.rptr, p.src, p.elems, p.flags); break;
    case Op::RecvReduceCopySend: m.reduce(p.dst, p.sptr, p.rptr, p.src, p.elems, p.flags); break;
    case Op::Copy:
      if (pre || post)
        m.reduce(p.dst, nullptr, nullptr, p.src, p.elems, p.flags);
      else if (p.dst != p.src)
        m.move(p.dst, p.src, p.bytes);
      break;
    case Op::Reduce: m.reduce(p.dst, nullptr, p.dst, p.src, p.elems, p.flags); break;
  }
}

// LL, every thread of the worker (thread t of nt): before the run's parts move, the message's
// lines into the run's receive staging (run.rslot: the device executor's block stages on chip,
// kernels/device/device_executor.h), each half once its flag says it landed (the sender wrote
// line 0 after the data, so every half is on its way); after they moved, the send staging
// (run.sslot) into the send FIFO's lines. Whole lines go in one 16-byte access where the lines are
// aligned to it (they are unless a FIFO's slot size is not a multiple of 16); a lone last half,
// alone. Both copy whole 4-byte words: up to 3 bytes past the message, inside the staging. What
// lands in the lines is what one half at a time wrote before: the wire format is fifo.h's.
// Sync provides loadLL / storeLL (one half) and loadLLLine / storeLLLine (two halves, each
// single-copy atomic), without fences.
template <class Sync>
TUTTI_ENGINE_HD void llUnpack(const Run& run, uint32_t t, uint32_t nt, const Sync& sync) {
  const uint64_t* halves = fifoLLSlot(run.rf, run.rtail) + kLLHeaderHalves;
  const uint32_t flag = llFlag(run.rtail);
  uint32_t* out = reinterpret_cast<uint32_t*>(run.rslot);
  const uint64_t words = (run.got + 3) / 4;
  uint64_t first = 0;  // the first word read half by half
  if (reinterpret_cast<uintptr_t>(halves) % kLLLineBytes == 0) {
    const uint64_t lines = words / 2;
    for (uint64_t i = t; i < lines; i += nt) {
      uint64_t a, b;
      sync.loadLLLine(&halves[2 * i], a, b);
      while (uint32_t(a >> 32) != flag || uint32_t(b >> 32) != flag) sync.loadLLLine(&halves[2 * i], a, b);
      out[2 * i] = uint32_t(a);
      out[2 * i + 1] = uint32_t(b);
    }
    first = 2 * lines;
  }
  for (uint64_t i = first + t; i < words; i += nt) {
    uint64_t v = sync.loadLL(&halves[i]);
    while (uint32_t(v >> 32) != flag) v = sync.loadLL(&halves[i]);
    out[i] = uint32_t(v);
  }
}
template <class Sync>
TUTTI_ENGINE_HD void llPack(const Run& run, uint32_t t, uint32_t nt, const Sync& sync) {
  uint64_t* halves = fifoLLSlot(run.sf, run.shead) + kLLHeaderHalves;
  const uint32_t flag = llFlag(run.shead);
  const uint32_t* in = reinterpret_cast<const uint32_t*>(run.sslot);
  const uint64_t words = (run.sent + 3) / 4;
  uint64_t first = 0;  // the first word written half by half
  if (reinterpret_cast<uintptr_t>(halves) % kLLLineBytes == 0) {
    const uint64_t lines = words / 2;
    for (uint64_t i = t; i < lines; i += nt)
      sync.storeLLLine(&halves[2 * i], llHalf(in[2 * i], flag), llHalf(in[2 * i + 1], flag));
    first = 2 * lines;
  }
  for (uint64_t i = first + t; i < words; i += nt) sync.storeLL(&halves[i], llHalf(in[i], flag));
}

// Phase 4a: after part j has moved, its size in the joined table and the slots' offsets.
TUTTI_ENGINE_HD void endPart(Run& run, uint32_t j, const Part& part) {
  if (run.send && run.parts > 1) fifoJoinSizes(run.sslot)[j] = uint32_t(part.bytes);
  run.roff += part.bytes;
  run.soff += part.bytes;
  run.sent = run.soff;
}

// Phase 4b: publishes the run (the receive slot freed, the send slot published with its size)
// and advances the lane. Sync provides storeRelease(uint64_t*, uint64_t) and notify(const
// ConnEnd&) (the host rings the peer's bell; a device does nothing: its peers poll).
template <class Sync>
TUTTI_ENGINE_HD void finishRun(const LaneRef& l, const Run& run, const Sync& sync) {
  const Step& step = currentStep(l);
  if (run.recv) {
    sync.storeRelease(&run.rf->tail, run.rtail + 1);
    sync.notify(l.recvs[step.recvConn]);
  }
  if (run.send) {
    const uint64_t slot = run.shead % run.sf->nsteps;
    const uint64_t count = signatureCount(*l.op);
    // An LL message is the receiver's the moment line 0's size half lands (after its data:
    // llPack ran first); the call's signature travels in the header's other halves, so the
    // Simple words beside `sizes` are not written (no reader of an LL message reads them: the
    // receiver takes all from the lines, and the p2p copy proxy copies the lines, then the words
    // whatever they hold). `head` still moves, after the lines: the p2p copy proxy (p2p_copy_proxy.cpp)
    // copies a message once its head says so, and a Simple message that follows counts from it.
    if (run.sll) {
      uint64_t* header = fifoLLSlot(run.sf, run.shead);
      const uint32_t flag = llFlag(run.shead);
      sync.storeLL(&header[1], llHalf(uint32_t(count), flag));
      sync.storeLL(&header[2], llHalf(uint32_t(l.op->signature), flag));
      sync.storeLL(&header[3], llHalf(uint32_t(l.op->signature >> 32), flag));
      sync.storeLL(&header[0], llHalf(uint32_t(run.sent), flag));
    } else {
      run.sf->addrs[slot] = run.saddr;
      if (run.saddr != 0) l.state->sentDirect = 1;
      run.sf->sigs[slot] = l.op->signature;
      run.sf->sigCounts[slot] = count;
      run.sf->sizes[slot] = run.sent;
    }
    sync.storeRelease(&run.sf->head, run.shead + 1);
    sync.notify(l.sends[step.sendConn]);
  }
  LaneState& s = *l.state;
  s.step += run.parts;
  if (s.step == l.spec->nsteps) {
    s.step = 0;
    s.tile++;
    startTile(l);
  }
}

// What a blocked lane waits for: its current step's receive FIFO if that is empty, else room in
// its send FIFO (tryBegin looks at them in that order). Fills fault's peer and waitingForData.
template <class Sync>
TUTTI_ENGINE_HD void blockedOn(const LaneRef& l, ExecFault& f, const Sync& sync) {
  const Step& step = currentStep(l);
  const ConnEnd* recv = plan::stepReceives(step.op) ? &l.recvs[step.recvConn] : nullptr;
  const ConnEnd* send = plan::stepSends(step.op) ? &l.sends[step.sendConn] : nullptr;
  setFault(f, Fault::Timeout, l, -1, 0, 0);
  // (For an LL message the counters tell the same: head moves after line 0, and may trail tail.)
  if (recv != nullptr && (send == nullptr || sync.loadAcquire(&recv->fifo->head) <= recv->fifo->tail)) {
    f.waitingForData = 1;
    f.peer = recv->peer;
  } else if (send != nullptr) {
    f.peer = send->peer;
  }
}

// A send end of the worker's lanes that may still hold a direct message its receiver has not read
// (its FIFO not drained), or null: a worker that sent direct messages finishes only at null (see
// the top). Only lanes that sent a message by address (LaneState::sentDirect) are looked at.
template <class Sync>
TUTTI_ENGINE_HD const ConnEnd* firstUndrained(LaunchWork& w, const OpWork* ops, const WorkerWork& ww,
                                              const Sync& sync) {
  for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++) {
    const QueueWork& qw = w.queues()[q];
    for (uint32_t i = qw.firstLane; i < qw.firstLane + qw.nlanes; i++) {
      const LaneWork& lw = w.lanes()[i];
      if (w.laneStates()[i].sentDirect == 0) continue;
      const uint32_t nsends = lw.plan->lane(lw.lane).nsendPeers;
      for (uint32_t c = 0; c < nsends; c++) {
        const ConnEnd& e = w.conns()[lw.sends + c];
        if (e.direct != 0 && e.ll == 0 && sync.loadAcquire(&e.fifo->tail) != e.fifo->head) return &e;
      }
    }
  }
  return nullptr;
}

// The fault of a worker that waited too long for `end`'s receiver to read its direct messages.
TUTTI_ENGINE_HD void undrainedFault(LaunchWork& w, const OpWork* ops, const WorkerWork& ww, const ConnEnd& end,
                                    ExecFault& f) {
  const LaneWork& lw = w.lanes()[w.queues()[ww.firstQueue].firstLane];
  f.fault = uint32_t(Fault::Timeout);
  f.peer = end.peer;
  f.channel = lw.channel;
  f.coll = ops[lw.op].coll;
  f.opSeq = ops[lw.op].seq;
  f.got = f.expected = 0;
  f.tile = f.ntiles = w.laneStates()[w.queues()[ww.firstQueue].firstLane].ntiles;
  f.step = uint32_t(Op::Send);
  f.waitingForData = 2;
  f.waitedNs = 0;
}

// The operation's reduction with a device-resident PreMulSum scalar (OpWork::scalar) read, as the
// host reads a host-resident one: floating types as their value, integers as their bits.
TUTTI_ENGINE_HD RedOp resolvedRedOp(const OpWork& op) {
  RedOp r = op.redop;
  if (op.scalar == nullptr || r.kind != RedKind::PreMulSum) return r;
  const unsigned char* p = static_cast<const unsigned char*>(op.scalar);
  uint64_t bits = 0;
  for (unsigned i = 0; i < op.eltSize; i++) bits |= uint64_t(p[i]) << (8 * i);
  switch (Dtype(op.dtype)) {
    case Dtype::Float16: r.floatScalar = half_t{uint16_t(bits)}.toFloat(); break;
    case Dtype::Bfloat16: r.floatScalar = bf16_t{uint16_t(bits)}.toFloat(); break;
    case Dtype::Fp8E4M3: r.floatScalar = fp8e4m3_t{uint8_t(bits)}.toFloat(); break;
    case Dtype::Fp8E5M2: r.floatScalar = fp8e5m2_t{uint8_t(bits)}.toFloat(); break;
    case Dtype::Float32: r.floatScalar = detail::bitsToFloat(uint32_t(bits)); break;
    case Dtype::Float64: {
      double d;
      static_assert(sizeof d == sizeof bits);
      memcpy(&d, &bits, sizeof d);
      r.floatScalar = d;
      break;
    }
    default: r.intScalar = bits; break;
  }
  return r;
}

}  // namespace tutti::kern::engine
