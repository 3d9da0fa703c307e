// The host executor: the lane engine on host threads, with host copies and reductions, bells
// rung after each FIFO move, and a wait that spins briefly, then sleeps on the worker's bell with
// a bounded timeout.
#include "kernels/host/host_executor.h"

#include <chrono>
#include <cstring>

#include "base/cross_memory.h"
#include "base/error.h"
#include "kernels/exec_fault.h"
#include "kernels/lane_engine.h"

namespace tutti::kern::host {

using plan::Op;
using plan::Step;

namespace {

// The lane engine's sync policy on the host: GCC atomics, and the peer's bell rung after each move.
struct HostSync {
  uint64_t loadAcquire(const uint64_t* p) const { return fifoLoadAcquire(p); }
  void storeRelease(uint64_t* p, uint64_t v) const { fifoStoreRelease(p, v); }
  // The host executor sends no LL messages (its connections' ConnEnd::ll is 0); the engine's
  // publication still names the call.
  void storeLL(uint64_t* p, uint64_t v) const { fifoStoreRelease(p, v); }
  void notify(const ConnEnd& end) const {
    if (end.bell != nullptr) ringBell(static_cast<Bell*>(end.bell));
  }
};

// The lane engine's mover on the host: one thread, memcpy and the vectorised reduction loops.
struct HostMover {
  ncclDataType_t type;
  RedOp redop;
  size_t eltSize;
  void copy(char* dst, const char* src, uint64_t bytes) const { std::memcpy(dst, src, bytes); }
  void move(char* dst, const char* src, uint64_t bytes) const { std::memmove(dst, src, bytes); }
  void copy2(char* dst, char* dst2, const char* src, uint64_t bytes) const {
    std::memcpy(dst, src, bytes);
    std::memcpy(dst2, src, bytes);
  }
  void reduce(char* dst, char* dst2, const char* a, const char* b, uint64_t n, unsigned flags) const {
    reduceHost(type, redop, dst, a, b, n, flags);
    if (dst2 != nullptr) std::memcpy(dst2, dst, n * eltSize);
  }
};

// A direct message from another process (kDirectAcrossProcesses): its bytes are in the sender's
// process, at part.rptr there. The copying steps read them straight to where they go (the output,
// or the send slot: one copy instead of the sender's copy into the slot and ours out of it); the
// reducing ones read them into the receive slot, which the message left empty, and reduce from
// there. Returns true when the part has moved. A failed read (the peer gone: ESRCH; a range not
// mapped there: EFAULT) fails the operation naming the peer and its pid.
bool readAcrossProcesses(const engine::LaneRef& l, const engine::Run& run, engine::Part& part,
                         const ExecutionContext& ctx) {
  const Step& step = engine::currentStep(l);
  const ConnEnd& end = l.recvs[step.recvConn];
  const pid_t pid = pid_t(run.rf->senderPid);
  const char* remote = part.rptr;
  auto read = [&](char* to) {
    const int error = cma::read(pid, remote, to, part.bytes);
    if (error == 0) return;
    const std::string op = std::string(plan::collTitle(plan::Coll(l.op->coll))) + " #" + std::to_string(l.op->seq);
    throw Error(error == ESRCH ? ErrorCode::Remote : ErrorCode::System,
                "rank " + std::to_string(ctx.rank) + ": " + op + ", channel " + std::to_string(l.work->channel) +
                    ": reading " + std::to_string(part.bytes) + " bytes of the registered buffer of " +
                    ctx.describePeer(end.peer) + " with process_vm_readv (pid " + std::to_string(pid) +
                    ") failed: " + cma::errnoName(error) + (error == ESRCH ? ": the peer process has exited" : ""));
  };
  if (ctx.directReads != nullptr) ctx.directReads->fetch_add(1, std::memory_order_relaxed);
  switch (part.op) {
    case Op::Recv: read(part.dst); return true;
    case Op::RecvSend:
      if (part.sptr == nullptr || part.dst == nullptr) {
        read(part.sptr == nullptr ? part.dst : part.sptr);
        return true;
      }
      read(part.dst);
      std::memcpy(part.sptr, part.dst, part.bytes);
      return true;
    default:
      read(run.rslot);
      part.rptr = run.rslot;
      return false;
  }
}

// Runs the lane's current step, or joined run of steps (one message), if the FIFOs allow it.
// Returns false when blocked.
bool tryStep(const engine::LaneRef& l, const ExecutionContext& ctx) {
  const HostSync sync;
  engine::Run run;
  if (!engine::tryBegin(l, run, sync)) return false;
  const HostMover mover{ncclDataType_t(l.op->dtype), engine::resolvedRedOp(*l.op), l.op->eltSize};
  for (uint32_t j = 0; j < run.parts; j++) {
    engine::Part part;
    ExecFault fault{};
    if (!engine::partGeometry(l, run, j, part, fault))
      throw Error(ErrorCode::InvalidUsage,
                  describeFault(
                      fault, ctx.rank, [&](int peer) { return ctx.describePeer(peer); }, ctx.timeoutSeconds));
    // (A direct message is always a run of one part.)
    const bool across = run.raddr != nullptr && run.parts == 1 &&
                        l.recvs[engine::currentStep(l).recvConn].direct == kDirectAcrossProcesses;
    if (run.raddr != nullptr && !across && ctx.directReads != nullptr)
      ctx.directReads->fetch_add(1, std::memory_order_relaxed);
    if (!across || !readAcrossProcesses(l, run, part, ctx)) engine::moveData(mover, *l.op, part);
    engine::endPart(run, j, part);
  }
  engine::finishRun(l, run, sync);
  return true;
}

}  // namespace

void runWorker(LaunchWork& w, const OpWork* ops, uint32_t worker, const ExecutionContext& ctx) {
  const WorkerWork ww = w.workers()[worker];
  for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++) {
    const QueueWork& qw = w.queues()[q];
    w.queueStates()[q].current = 0;
    for (uint32_t i = 0; i < qw.nlanes; i++) engine::prepareLane(engine::laneRef(w, qw.firstLane + i, ops));
  }
  using Clock = std::chrono::steady_clock;
  auto lastProgress = Clock::now();
  Clock::time_point probeAt = Clock::time_point::max();  // when a stalled wait next compares calls
  int idle = 0;
  const WaitHooks& hooks = *ctx.hooks;
  const bool network = hooks.drivesNetwork();  // whether this worker moves network FIFOs itself
  // Whether this worker is driving the network (hooks.pollNetwork): from its first network poll
  // until a wait is about to sleep or the operation ends, however it ends.
  using Drive = WaitHooks::Drive;
  struct Driving {
    const WaitHooks& hooks;
    bool on = false;
    void start() {
      if (!on) hooks.driveNetwork(Drive::Start);
      on = true;
    }
    void end(Drive how) {
      if (on) hooks.driveNetwork(how);
      on = false;
    }
    ~Driving() { end(Drive::Stop); }
  } driving{hooks};
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
  auto firstWaiting = [&]() {
    for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++)
      if (w.queueStates()[q].current < w.queues()[q].nlanes)
        return engine::laneRef(w, w.queues()[q].firstLane + w.queueStates()[q].current, ops);
    return engine::laneRef(w, 0, ops);  // not reached: called only while a queue is unfinished
  };
  for (;;) {
    const uint32_t seen = ctx.bell->seq.load(std::memory_order_acquire);
    bool progress = false, allDone = true;
    for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++) {
      const QueueWork& qw = w.queues()[q];
      QueueState& qs = w.queueStates()[q];
      while (qs.current < qw.nlanes) {
        const engine::LaneRef lane = engine::laneRef(w, qw.firstLane + qs.current, ops);
        for (int burst = 0; !engine::laneDone(lane) && burst < int(engine::kQueueBurst) && tryStep(lane, ctx); burst++)
          progress = true;
        if (!engine::laneDone(lane)) break;
        qs.current++;
      }
      if (qs.current < qw.nlanes) allDone = false;
    }
    // Direct messages (lane_engine.h): done only once their receivers have read them.
    const ConnEnd* undrained = allDone ? engine::firstUndrained(w, ops, ww, HostSync{}) : nullptr;
    if (allDone && undrained == nullptr) {
      // Slots published since the last pass (often the last round's sends; all of an
      // operation's, if it never waited) leave now, not when the proxy thread next looks. Then
      // the sockets are released rather than handed back: the next operation's worker usually
      // takes them again before the proxy thread would (a switch to it and back per operation,
      // on a core the rank's threads share).
      if (network && hooks.networkSendsWaiting()) {
        driving.start();
        hooks.pollNetwork();
      }
      driving.end(Drive::Release);
      return;
    }
    if (progress) {
      // A driving worker that keeps finding work would hold the slots it fills until it next
      // waits, and the link would idle meanwhile: it passes them on after every round.
      if (driving.on) hooks.pollNetwork();
      published.clear();
      idle = 0;
      continue;
    }
    if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Aborted,
                  "rank " + std::to_string(ctx.rank) + ": operation aborted (ncclCommAbort or an earlier fatal error)");
    if (network && idle < ctx.spin + ctx.yields) {
      driving.start();
      if (hooks.pollNetwork()) {
        idle = 0;
        continue;
      }
    }
    // (Yielding before sleeping, on 2 cores with 4 ranks: 8-byte all-reduce 50 us, not 280 us.)
    if (idlePoll(++idle, ctx)) continue;
    if (idle == ctx.spin + ctx.yields) {
      lastProgress = Clock::now();
      probeAt = lastProgress + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(ExecutionContext::kProbeAfterSeconds));
    }
    driving.end(Drive::Stop);  // a worker never sleeps holding the sockets
    // Again before every sleep, not only the first: a step that waited for data may now wait for
    // room at another peer.
    // What this worker waits for: a blocked lane, or a receiver still to read its direct messages.
    auto waitingFault = [&] {
      ExecFault f{};
      if (undrained != nullptr)
        engine::undrainedFault(w, ops, ww, *undrained, f);
      else
        engine::blockedOn(firstWaiting(), f, HostSync{});
      return f;
    };
    if (published.slot) {
      WaitRecord record = waitRecordOf(waitingFault());
      record.sinceNs = std::chrono::duration_cast<std::chrono::nanoseconds>(lastProgress.time_since_epoch()).count();
      published.set(record);
    }
    waitBell(ctx.bell, seen, 100 * 1000 * 1000L);
    // Stalled: does the awaited peer's call of this number differ (a mismatch that took it down
    // another path)? Asked again each second, as a peer may simply not have reached the call yet.
    if (undrained == nullptr && Clock::now() >= probeAt) {
      probeAt = Clock::now() + std::chrono::seconds(1);
      const engine::LaneRef l = firstWaiting();
      ExecFault f{};
      engine::blockedOn(l, f, HostSync{});
      if (f.peer >= 0 && l.op->signature != 0) {
        std::string mismatch = hooks.probeCall(f.peer, l.op->signature, engine::signatureCount(*l.op));
        if (!mismatch.empty()) throw Error(ErrorCode::InvalidUsage, mismatch);
      }
    }
    if (std::chrono::duration<double>(Clock::now() - lastProgress).count() > ctx.timeoutSeconds) {
      ExecFault f = waitingFault();
      if (published.slot) published.slot->keepTimedOut(waitRecordOf(f));
      throw Error(ErrorCode::Timeout,
                  describeFault(
                      f, ctx.rank, [&](int peer) { return ctx.describePeer(peer); }, ctx.timeoutSeconds));
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

}  // namespace tutti::kern::host
