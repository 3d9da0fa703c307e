// The host executor: lanes as non-blocking state machines, tiles mapped onto user buffers, and
// a wait that spins briefly, then sleeps on the worker's bell with a bounded timeout.
#include "kernels/host_executor.h"

#include <sched.h>

#include <chrono>
#include <cstring>

#include "base/error.h"

namespace tutti::kern {

using plan::Buf;
using plan::BufRef;
using plan::Layout;
using plan::Op;
using plan::Step;

namespace {

size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

struct Span {
  char* ptr = nullptr;
  size_t elems = 0;
};

bool isUserBuffer(Buf buf) { return buf == Buf::In || buf == Buf::Out; }

// Where a buffer reference of the current tile lies. A scratch chunk's extent is what was last
// written to it in this tile.
Span resolve(const Lane& lane, const BufRef& ref) {
  const OpBinding& op = *lane.op;
  const size_t C = lane.chunkElems;
  switch (ref.buf) {
    case Buf::None: return {};
    case Buf::Scratch:
      return {lane.scratch + size_t(ref.chunk) * C * op.eltSize, lane.scratchElems[size_t(ref.chunk)]};
    case Buf::In:
    case Buf::Out: break;
  }
  char* base = ref.buf == Buf::In ? const_cast<char*>(static_cast<const char*>(op.in)) : static_cast<char*>(op.out);
  size_t offset = 0, elems = 0;
  switch (lane.spec->layout) {
    case Layout::Split: {
      size_t tileStart = lane.begin + lane.tile * lane.tileChunks * C;
      offset = tileStart + size_t(ref.chunk) * lane.tileChunk;
      elems = offset >= lane.end ? 0 : std::min(lane.tileChunk, lane.end - offset);
      break;
    }
    case Layout::Blocks: {
      size_t start = lane.begin + lane.tile * C;
      elems = std::min(C, lane.end - start);
      offset = ref.chunk >= 0 ? size_t(ref.chunk) * op.count + start : start;
      break;
    }
    case Layout::Whole: {
      offset = lane.begin + lane.tile * C;
      elems = std::min(C, lane.end - offset);
      break;
    }
  }
  return {base + offset * op.eltSize, elems};
}

// Split tiles shrink their chunks at the end of the range so that every chunk of the last tile
// gets a share.
void startTile(Lane& lane) {
  if (lane.spec->layout != Layout::Split || lane.tile >= lane.ntiles) return;
  size_t tileStart = lane.begin + lane.tile * lane.tileChunks * lane.chunkElems;
  lane.tileChunk = std::min(lane.chunkElems, ceilDiv(lane.end - tileStart, lane.tileChunks));
}

unsigned reduceFlags(const Step& step) {
  unsigned flags = 0;
  if (step.flags & plan::kPre) flags |= kPreOnB;
  if (step.flags & plan::kPost) flags |= kPost;
  return flags;
}

bool opHasPre(const RedOp& op) { return op.kind == RedKind::PreMulSum; }
bool opHasPost(const RedOp& op) { return op.kind == RedKind::SumPostDiv; }

[[noreturn]] void sizeMismatch(const Lane& lane, const ExecutionContext& ctx, int peer, uint64_t got, uint64_t expected) {
  throw Error(ErrorCode::InvalidUsage,
              std::string(lane.op->name) + " #" + std::to_string(lane.op->seq) + ": rank " + std::to_string(ctx.rank) +
                  " received " + std::to_string(got) + " bytes from " + ctx.describePeer(peer) +
                  " where it expected " + std::to_string(expected) +
                  " (do all ranks make the same calls, with the same count, type and root?)");
}

[[noreturn]] void partsMismatch(const Lane& lane, const ExecutionContext& ctx, int peer, uint32_t got, size_t expected) {
  throw Error(ErrorCode::InvalidUsage,
              std::string(lane.op->name) + " #" + std::to_string(lane.op->seq) + ": rank " + std::to_string(ctx.rank) +
                  " received a message of " + (got == 0 ? std::string("one step (not joined)") : std::to_string(got) + " joined steps") +
                  " from " + ctx.describePeer(peer) +
                  " where its plan joins " + std::to_string(expected) +
                  " steps into one (do all ranks run the same algorithm, with the same count and type?)");
}

// How many elements a step moves: as many as its user buffer chunk holds; for a step between
// scratch and FIFOs only, what its scratch source holds, or what arrived (`arrived` bytes, for a
// step that receives).
size_t stepElems(const Lane& lane, const Step& step, const Span& src, const Span& dst, const uint64_t* arrived,
                 const ExecutionContext& ctx) {
  if (isUserBuffer(step.src.buf)) return src.elems;
  if (isUserBuffer(step.dst.buf)) return dst.elems;
  if (step.src.buf == Buf::Scratch) return src.elems;
  if (arrived != nullptr) {
    const size_t elt = lane.op->eltSize;
    if (*arrived % elt != 0 || *arrived / elt > lane.chunkElems)
      sizeMismatch(lane, ctx, lane.recvs[step.recvConn].peer, *arrived, lane.chunkElems * elt);
    return size_t(*arrived / elt);
  }
  return lane.spec->layout == Layout::Split ? lane.tileChunk : lane.chunkElems;
}

// Moves one step's data: from `rpart` (what arrived for it, `arrived` bytes; null if the step
// receives nothing) and into `spart` (null if it sends nothing). Returns the bytes it moved.
size_t moveStep(Lane& lane, const Step& step, const char* rpart, const uint64_t* arrived, char* spart, const ExecutionContext& ctx) {
  const OpBinding& op = *lane.op;
  Span src = resolve(lane, step.src), dst = resolve(lane, step.dst);
  const size_t elems = stepElems(lane, step, src, dst, arrived, ctx);
  if (step.dst.buf == Buf::Scratch) lane.scratchElems[size_t(step.dst.chunk)] = elems;
  const size_t bytes = elems * op.eltSize;
  const unsigned flags = reduceFlags(step);
  if (rpart != nullptr && *arrived != bytes) sizeMismatch(lane, ctx, lane.recvs[step.recvConn].peer, *arrived, bytes);

  switch (step.op) {
    case Op::Send:
      if ((flags & kPreOnB) && opHasPre(op.redop)) reduceHost(op.type, op.redop, spart, nullptr, src.ptr, elems, kPreOnB);
      else std::memcpy(spart, src.ptr, bytes);
      break;
    case Op::Recv:
      std::memcpy(dst.ptr, rpart, bytes);
      break;
    case Op::RecvSend:
      std::memcpy(spart, rpart, bytes);
      if (dst.ptr) std::memcpy(dst.ptr, rpart, bytes);
      break;
    case Op::RecvReduceSend:
      reduceHost(op.type, op.redop, spart, rpart, src.ptr, elems, flags & kPreOnB);
      break;
    case Op::RecvReduceCopy:
      reduceHost(op.type, op.redop, dst.ptr, rpart, src.ptr, elems, flags);
      break;
    case Op::RecvReduceCopySend:
      reduceHost(op.type, op.redop, dst.ptr, rpart, src.ptr, elems, flags);
      std::memcpy(spart, dst.ptr, bytes);
      break;
    case Op::Copy:
      if (((flags & kPreOnB) && opHasPre(op.redop)) || ((flags & kPost) && opHasPost(op.redop)))
        reduceHost(op.type, op.redop, dst.ptr, nullptr, src.ptr, elems, flags);
      else if (dst.ptr != src.ptr)
        std::memmove(dst.ptr, src.ptr, bytes);
      break;
    case Op::Reduce:
      reduceHost(op.type, op.redop, dst.ptr, dst.ptr, src.ptr, elems, flags);
      break;
  }
  return bytes;
}

// Runs the lane's current step, or joined run of steps (one message), if the FIFOs allow it.
// Returns false when blocked.
bool tryStep(Lane& lane, const ExecutionContext& ctx) {
  const std::vector<Step>& steps = lane.spec->steps;
  const Step& step = steps[lane.step];
  const size_t parts = (step.flags & plan::kJoin) ? plan::joinedRunLength(steps, lane.step) : 1;
  const bool recv = stepReceives(step.op), send = stepSends(step.op);
  FifoHeader* rf = recv ? lane.recvs[step.recvConn].fifo : nullptr;
  FifoHeader* sf = send ? lane.sends[step.sendConn].fifo : nullptr;
  uint64_t rtail = 0, shead = 0;
  if (recv) {
    rtail = rf->tail;  // only we write it
    if (fifoLoadAcquire(&rf->head) == rtail) return false;
  }
  if (send) {
    shead = sf->head;  // only we write it
    if (shead - fifoLoadAcquire(&sf->tail) >= sf->nsteps) return false;
  }
  char* rslot = recv ? fifoSlot(rf, rtail) : nullptr;
  char* sslot = send ? fifoSlot(sf, shead) : nullptr;
  const uint64_t got = recv ? rf->sizes[rtail % rf->nsteps] : 0;

  uint64_t sent = 0;
  if (parts == 1) {
    sent = moveStep(lane, step, rslot, recv ? &got : nullptr, sslot, ctx);
  } else {
    // One message: a table of the parts' sizes, then the parts (plan.h, "Joined steps").
    const size_t table = plan::joinTableBytes(parts);
    if (recv) {
      const int peer = lane.recvs[step.recvConn].peer;
      if (got < table) sizeMismatch(lane, ctx, peer, got, table);
      if (fifoJoinParts(rslot) != parts) partsMismatch(lane, ctx, peer, fifoJoinParts(rslot), parts);
    }
    if (send) fifoJoinStart(sslot, uint32_t(parts));
    size_t roff = table, soff = table;
    for (size_t j = 0; j < parts; j++) {
      const Step& part = steps[lane.step + j];
      uint64_t arrived = 0;
      if (recv) {
        arrived = fifoJoinSizes(rslot)[j];
        if (roff + arrived > got) sizeMismatch(lane, ctx, lane.recvs[step.recvConn].peer, got, roff + arrived);
      }
      // The chunk was cut so that the run fits (joinedChunkBytes); a plan whose ranks disagree
      // on it must not write past the slot.
      if (send && soff + lane.chunkElems * lane.op->eltSize > sf->slotBytes)
        throw Error(ErrorCode::InvalidUsage,
                    std::string(lane.op->name) + " #" + std::to_string(lane.op->seq) + ": rank " + std::to_string(ctx.rank) +
                        " joins " + std::to_string(parts) + " steps for " + ctx.describePeer(lane.sends[step.sendConn].peer) +
                        " into a message larger than a FIFO slot (" + std::to_string(sf->slotBytes) +
                        " bytes): the plan's join width and its chunk disagree");
      size_t bytes = moveStep(lane, part, recv ? rslot + roff : nullptr, recv ? &arrived : nullptr, send ? sslot + soff : nullptr, ctx);
      if (send) fifoJoinSizes(sslot)[j] = uint32_t(bytes);
      roff += bytes;
      soff += bytes;
    }
    sent = soff;
  }

  if (recv) {
    fifoStoreRelease(&rf->tail, rtail + 1);
    if (Bell* bell = lane.recvs[step.recvConn].peerBell) ringBell(bell);
  }
  if (send) {
    sf->sizes[shead % sf->nsteps] = sent;
    fifoStoreRelease(&sf->head, shead + 1);
    if (Bell* bell = lane.sends[step.sendConn].peerBell) ringBell(bell);
  }
  lane.step += uint32_t(parts);
  if (lane.step == steps.size()) {
    lane.step = 0;
    lane.tile++;
    startTile(lane);
  }
  return true;
}

bool laneDone(const Lane& lane) { return lane.tile >= lane.ntiles; }

// What a blocked lane waits for: its current step's receive FIFO if that is empty, else room in
// its send FIFO (tryStep looks at them in that order). The FIFOs may have moved since the lane
// was found blocked: a step that only receives reports its receive FIFO whatever it holds now.
WaitRecord blockedOn(const Lane& lane, std::chrono::steady_clock::time_point since) {
  const Step& step = lane.spec->steps[lane.step];
  WaitRecord r;
  const FifoEnd* recv = stepReceives(step.op) ? &lane.recvs[step.recvConn] : nullptr;
  const FifoEnd* send = stepSends(step.op) ? &lane.sends[step.sendConn] : nullptr;
  if (recv != nullptr && (send == nullptr || fifoLoadAcquire(&recv->fifo->head) == recv->fifo->tail)) {
    r.what = WaitFor::Data;
    r.peer = recv->peer;
  } else if (send != nullptr) {
    r.what = WaitFor::Space;
    r.peer = send->peer;
  }
  r.step = step.op;
  r.channel = lane.channel;
  r.opName = lane.op->name;
  r.opSeq = lane.op->seq;
  r.tile = lane.tile;
  r.ntiles = lane.ntiles;
  r.sinceNs = std::chrono::duration_cast<std::chrono::nanoseconds>(since.time_since_epoch()).count();
  return r;
}

}  // namespace

bool idlePoll(int idle, const ExecutionContext& ctx) {
  if (idle < ctx.spin) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return true;
  }
  if (idle < ctx.spin + ctx.yields) {
    sched_yield();
    return true;
  }
  return false;
}

bool stepReceives(Op op) { return op != Op::Send && op != Op::Copy && op != Op::Reduce; }
bool stepSends(Op op) { return op == Op::Send || op == Op::RecvSend || op == Op::RecvReduceSend || op == Op::RecvReduceCopySend; }

void prepareLane(Lane& lane) {
  const plan::LaneSpec& spec = *lane.spec;
  lane.tileChunks = 1;
  if (spec.layout == Layout::Split) lane.tileChunks = spec.tileChunks > 0 ? size_t(spec.tileChunks) : size_t(lane.op->nranks);
  size_t range = lane.end > lane.begin ? lane.end - lane.begin : 0;
  lane.ntiles = range == 0 || spec.steps.empty() ? 0 : ceilDiv(range, lane.chunkElems * lane.tileChunks);
  lane.scratchElems.assign(size_t(spec.scratchChunks), 0);
  lane.tile = 0;
  lane.step = 0;
  startTile(lane);
}

void checkPlanBounds(const plan::RankPlan& plan, int rank, int nranks) {
  for (size_t l = 0; l < plan.lanes.size(); l++) {
    const plan::LaneSpec& lane = plan.lanes[l];
    auto fail = [&](size_t s, const std::string& what) {
      throw Error(ErrorCode::InvalidUsage, "algorithm \"" + plan.algorithm + "\", rank " + std::to_string(rank) + " of " +
                                               std::to_string(nranks) + ", lane " + std::to_string(l) +
                                               (s < lane.steps.size() ? ", step " + std::to_string(s) : std::string()) + ": " + what);
    };
    const size_t none = size_t(-1);
    if (lane.tileChunks < 0 || lane.scratchChunks < 0) fail(none, "negative tileChunks or scratchChunks");
    if (lane.kind == plan::ConnKind::None && !(lane.sendPeers.empty() && lane.recvPeers.empty()))
      fail(none, "a lane of kind None has peers");
    if (lane.sendPeers.size() > 256 || lane.recvPeers.size() > 256) fail(none, "more than 256 peers of one direction");
    for (const std::vector<int>* peers : {&lane.sendPeers, &lane.recvPeers})
      for (int p : *peers)
        if (p < 0 || p >= nranks || p == rank) fail(none, "peer " + std::to_string(p) + " is not another rank");
    const int splitChunks = lane.tileChunks > 0 ? lane.tileChunks : nranks;
    auto checkRef = [&](size_t s, const BufRef& ref, const char* role) {
      bool ok = true;
      if (ref.buf == Buf::Scratch) ok = ref.chunk >= 0 && ref.chunk < lane.scratchChunks;
      else if (ref.buf != Buf::None && lane.layout == Layout::Split) ok = ref.chunk >= 0 && ref.chunk < splitChunks;
      else if (ref.buf != Buf::None && lane.layout == Layout::Blocks) ok = ref.chunk >= -1 && ref.chunk < nranks;
      if (!ok) fail(s, std::string(role) + " chunk " + std::to_string(ref.chunk) + " is out of range");
    };
    for (size_t s = 0; s < lane.steps.size(); s++) {
      const Step& step = lane.steps[s];
      if (stepReceives(step.op) && step.recvConn >= lane.recvPeers.size())
        fail(s, std::string(plan::opName(step.op)) + " uses receive connection " + std::to_string(step.recvConn) + " of " +
                    std::to_string(lane.recvPeers.size()));
      if (stepSends(step.op) && step.sendConn >= lane.sendPeers.size())
        fail(s, std::string(plan::opName(step.op)) + " uses send connection " + std::to_string(step.sendConn) + " of " +
                    std::to_string(lane.sendPeers.size()));
      bool needsSrc = step.op == Op::Send || step.op == Op::Copy || step.op == Op::RecvReduceSend ||
                      step.op == Op::RecvReduceCopy || step.op == Op::RecvReduceCopySend || step.op == Op::Reduce;
      bool needsDst = step.op == Op::Recv || step.op == Op::Copy || step.op == Op::RecvReduceCopy || step.op == Op::RecvReduceCopySend ||
                      step.op == Op::Reduce;
      if (needsSrc && step.src.buf == Buf::None) fail(s, std::string(plan::opName(step.op)) + " has no source");
      if (needsDst && step.dst.buf == Buf::None) fail(s, std::string(plan::opName(step.op)) + " has no destination");
      checkRef(s, step.src, "source");
      checkRef(s, step.dst, "destination");
    }
    size_t bad = 0;
    std::string join = plan::joinProblem(lane, &bad);
    if (!join.empty()) fail(bad, join);
  }
}

void runQueues(std::vector<LaneQueue>& queues, const ExecutionContext& ctx) {
  using Clock = std::chrono::steady_clock;
  auto lastProgress = Clock::now();
  int idle = 0;
  // Whether this worker is driving the network (ctx.pollNetwork): from its first network poll
  // until a wait is about to sleep or the operation ends, however it ends.
  using Drive = ExecutionContext::Drive;
  struct Driving {
    const ExecutionContext& ctx;
    bool on = false;
    void start() {
      if (!on) ctx.driveNetwork(ctx.networkArg, Drive::Start);
      on = true;
    }
    void end(Drive how) {
      if (on) ctx.driveNetwork(ctx.networkArg, how);
      on = false;
    }
    ~Driving() { end(Drive::Stop); }
  } driving{ctx};
  // What this worker waits for, published before each sleep (ctx.waitSlot) and cleared once it
  // moves again or the operation ends, however it ends; between sleeps only a local flag is
  // looked at.
  struct Published {
    WaitSlot* slot;
    bool on = false;
    void set(const WaitRecord& record) {
      slot->publish(record);
      on = true;
    }
    void clear() {
      if (on) slot->clear();
      on = false;
    }
    ~Published() { clear(); }
  } published{ctx.waitSlot};
  // The first lane still to run: what a blocked worker reports (every unfinished queue is blocked
  // when a pass made no progress).
  auto firstWaiting = [&]() -> const Lane* {
    for (LaneQueue& q : queues)
      if (q.current < q.lanes.size()) return &q.lanes[q.current];
    return nullptr;
  };
  for (;;) {
    const uint32_t seen = ctx.bell->seq.load(std::memory_order_acquire);
    bool progress = false, allDone = true;
    for (LaneQueue& q : queues) {
      while (q.current < q.lanes.size()) {
        Lane& lane = q.lanes[q.current];
        for (int burst = 0; !laneDone(lane) && burst < 64 && tryStep(lane, ctx); burst++) progress = true;
        if (!laneDone(lane)) break;
        q.current++;
      }
      if (q.current < q.lanes.size()) allDone = false;
    }
    if (allDone) {
      // Slots published since the last pass (often the last round's sends; all of an
      // operation's, if it never waited) leave now, not when the proxy thread next looks. Then
      // the sockets are released rather than handed back: the next operation's worker usually
      // takes them again before the proxy thread would (a switch to it and back per operation,
      // on a core the rank's threads share).
      if (ctx.pollNetwork && ctx.networkSendsWaiting && ctx.networkSendsWaiting(ctx.networkArg)) {
        driving.start();
        ctx.pollNetwork(ctx.networkArg);
      }
      driving.end(Drive::Release);
      return;
    }
    if (progress) {
      // A driving worker that keeps finding work would hold the slots it fills until it next
      // waits, and the link would idle meanwhile: it passes them on after every round.
      if (driving.on) ctx.pollNetwork(ctx.networkArg);
      published.clear();
      idle = 0;
      continue;
    }
    if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Aborted, "rank " + std::to_string(ctx.rank) + ": operation aborted (ncclCommAbort or an earlier fatal error)");
    if (ctx.pollNetwork && idle < ctx.spin + ctx.yields) {
      driving.start();
      if (ctx.pollNetwork(ctx.networkArg)) {
        idle = 0;
        continue;
      }
    }
    // (Yielding before sleeping, on 2 cores with 4 ranks: 8-byte all-reduce 50 us, not 280 us.)
    if (idlePoll(++idle, ctx)) continue;
    if (idle == ctx.spin + ctx.yields) lastProgress = Clock::now();
    driving.end(Drive::Stop);  // a worker never sleeps holding the sockets
    // Again before every sleep, not only the first: a step that waited for data may now wait for
    // room at another peer.
    if (published.slot) published.set(blockedOn(*firstWaiting(), lastProgress));
    waitBell(ctx.bell, seen, 100 * 1000 * 1000L);
    if (std::chrono::duration<double>(Clock::now() - lastProgress).count() > ctx.timeoutSeconds) {
      WaitRecord blocked = blockedOn(*firstWaiting(), lastProgress);
      throw Error(ErrorCode::Timeout, describeWaitingOp(blocked, ctx.rank) + " is waiting for " +
                                          describeWaitedFor(blocked, ctx.describePeer(blocked.peer)) + " and made no progress for " +
                                          std::to_string(int(ctx.timeoutSeconds)) + " s (TUTTI_TIMEOUT)");
    }
  }
}

HostWorkerPool::HostWorkerPool(int threads) : slots_(size_t(threads)) {
  for (int i = 0; i < threads; i++) threads_.emplace_back([this, i] { loop(i); });
}

HostWorkerPool::~HostWorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void HostWorkerPool::start(int i, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_[size_t(i)].job = std::move(job);
    slots_[size_t(i)].busy = true;
    slots_[size_t(i)].error = nullptr;
  }
  wake_.notify_all();
}

void HostWorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Jobs are bounded by their own timeouts and the abort flag, so this wait ends.
  done_.wait(lock, [this] {
    for (auto& s : slots_)
      if (s.busy) return false;
    return true;
  });
  for (auto& s : slots_)
    if (s.error) {
      std::exception_ptr e = s.error;
      for (auto& t : slots_) t.error = nullptr;
      std::rethrow_exception(e);
    }
}

void HostWorkerPool::loop(int i) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || (slots_[size_t(i)].busy && slots_[size_t(i)].job); });
    if (stopping_) return;
    std::function<void()> job = std::move(slots_[size_t(i)].job);
    slots_[size_t(i)].job = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    slots_[size_t(i)].error = error;
    slots_[size_t(i)].busy = false;
    done_.notify_all();
  }
}

}  // namespace tutti::kern
