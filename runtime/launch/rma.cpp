// One-sided operations on their streams: puts, signals and waits (rma.h).
#include "runtime/launch/rma.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "base/cross_memory.h"
#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "runtime/comm/comm.h"
#include "runtime/diagnostics/flight_recorder.h"
#include "runtime/launch/group.h"
#include "runtime/launch/host_job.h"

namespace tutti {

namespace {

thread_local std::vector<RmaOp> tGroupRma;  // kept until the outermost ncclGroupEnd

// The operation in the flight recorder, queued; returns its number.
uint64_t recordQueued(const RmaOp& op) {
  ncclComm* comm = op.comm;
  const uint64_t seq = comm->executor.opSeq++;
  FlightRecorder* recorder = comm->executor.flight.get();
  if (recorder == nullptr) return seq;
  FlightCall call;
  call.seq = seq;
  call.coll = uint8_t(op.kind == RmaOp::Kind::Put      ? kFlightPutSignal
                      : op.kind == RmaOp::Kind::Signal ? kFlightSignal
                                                       : kFlightWaitSignal);
  call.count = op.kind == RmaOp::Kind::Wait ? uint64_t(op.waits.size()) : op.count;
  call.dtype = uint8_t(op.type);
  call.root = op.kind == RmaOp::Kind::Wait ? (op.waits.empty() ? -1 : op.waits.front().peer) : op.peer;
  call.signature = op.kind != RmaOp::Kind::Wait ? oneSidedSlot(op.ctx, op.sigIdx)
                   : op.waits.empty()           ? 0
                                                : oneSidedSlot(op.waits.front().ctx, op.waits.front().sigIdx);
  call.algorithm = "";
  call.stream = op.stream;
  recorder->queued(call, FlightRecorder::now());
  return seq;
}

// Queues `job` on the operation's stream, the flight recorder following operation `seq`.
void queueJob(const RmaOp& op, uint64_t seq, std::function<void()> job) {
  queueCommJob(op.comm, op.stream, std::move(job), seq);
}

void raise(uint64_t* counter) { __atomic_fetch_add(counter, uint64_t(1), __ATOMIC_RELEASE); }

void runPut(const RmaOp& op) {
  ncclComm* comm = op.comm;
  const int me = comm->identity.rank;
  const size_t bytes = op.count * kern::dtypeSize(op.type);
  void* dst = reinterpret_cast<void*>(uintptr_t(op.window->address[size_t(op.peer)] + op.offset));
  uint64_t* counter = comm->links.windows.counter(op.peer, me, op.ctx, op.sigIdx);
  const uint64_t seq = recordQueued(op);
  const RankInfo& target = comm->identity.peers[size_t(op.peer)];
  if (target.processToken == comm->identity.peers[size_t(me)].processToken) {
    // The same address space: the backend copies in stream order, and the signal follows it.
    if (bytes > 0) comm->executor.backend->enqueueCopy(op.stream, dst, op.local, bytes);
    queueJob(op, seq, [counter] { raise(counter); });
    return;
  }
  const pid_t pid = pid_t(target.pid);
  const void* src = op.local;
  const std::string where = comm->where();
  const std::string peer = comm->describePeer(op.peer);
  const size_t offset = op.offset;
  queueJob(op, seq, [=] {
    const int error = bytes > 0 ? cma::write(pid, dst, src, bytes) : 0;
    if (error != 0)
      throw Error(ErrorCode::System, "ncclPutSignal: " + where + ": writing " + std::to_string(bytes) +
                                         " bytes into the window of " + peer + " at offset " + std::to_string(offset) +
                                         ": process_vm_writev: " + cma::errnoName(error));
    raise(counter);
  });
}

void runSignal(const RmaOp& op) {
  uint64_t* counter = op.comm->links.windows.counter(op.peer, op.comm->identity.rank, op.ctx, op.sigIdx);
  queueJob(op, recordQueued(op), [counter] { raise(counter); });
}

struct Expected {
  int peer;
  int ctx;
  int sigIdx;
  const uint64_t* counter;
  uint64_t total;  // what the counter reaches once this wait's signals have come
  uint64_t count;  // this wait's opCnt
};

void runWait(const RmaOp& op) {
  ncclComm* comm = op.comm;
  std::vector<Expected> expected;
  for (const ncclWaitSignalDesc_t& d : op.waits) {
    const uint64_t count = uint64_t(d.opCnt);
    // The total grows now, in call order, whenever the wait itself runs.
    const uint64_t total = comm->links.windows.expect(d.peer, d.ctx, d.sigIdx, count);
    expected.push_back(Expected{d.peer, d.ctx, d.sigIdx,
                                comm->links.windows.counter(comm->identity.rank, d.peer, d.ctx, d.sigIdx), total,
                                count});
  }
  const double timeout = comm->settings.timeoutSeconds;
  queueJob(op, recordQueued(op), [comm, expected = std::move(expected), timeout] {
    using Clock = std::chrono::steady_clock;
    // TUTTI_TIMEOUT bounds a wait without progress, as it bounds the executors' waits: a signal
    // that comes starts the clock again.
    Clock::time_point start = Clock::now();
    uint64_t seen = 0;
    auto sleep = std::chrono::microseconds(1);
    for (int round = 0;; round++) {
      const Expected* missing = nullptr;
      uint64_t sum = 0;
      for (const Expected& e : expected) {
        const uint64_t now = __atomic_load_n(e.counter, __ATOMIC_ACQUIRE);
        sum += now;
        if (now < e.total && missing == nullptr) missing = &e;
      }
      if (missing == nullptr) return;
      if (sum != seen) {
        seen = sum;
        start = Clock::now();
      }
      const bool aborted = comm->error.abortFlag.load(std::memory_order_acquire);
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (aborted || waited > timeout) {
        const uint64_t now = __atomic_load_n(missing->counter, __ATOMIC_ACQUIRE);
        const uint64_t before = missing->total - missing->count;
        const uint64_t arrived = now > before ? now - before : 0;
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", waited);
        const std::string what = "signals from " + comm->describePeer(missing->peer) + " (ctx " +
                                 std::to_string(missing->ctx) + ", sigIdx " + std::to_string(missing->sigIdx) +
                                 "): " + std::to_string(arrived) + " of the " + std::to_string(missing->count) +
                                 " this wait expects arrived (" + std::to_string(now) + " of " +
                                 std::to_string(missing->total) + " since the communicator's first window)";
        if (aborted)
          throw Error(ErrorCode::Aborted, "ncclWaitSignal: " + comm->where() + ": aborted while waiting for " + what);
        throw Error(ErrorCode::Timeout, "ncclWaitSignal: " + comm->where() + ": waited " + seconds +
                                            " s without a new signal (TUTTI_TIMEOUT) for " + what);
      }
      if (round < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, std::chrono::microseconds(200));
      }
    }
  });
}

void run(const RmaOp& op) {
  switch (op.kind) {
    case RmaOp::Kind::Put: runPut(op); return;
    case RmaOp::Kind::Signal: runSignal(op); return;
    case RmaOp::Kind::Wait: runWait(op); return;
  }
}

}  // namespace

void enqueueRma(RmaOp op) {
  if (groupDepth() > 0) {
    tGroupRma.push_back(std::move(op));
    return;
  }
  run(op);
}

void endRmaGroup(bool drop) {
  std::vector<RmaOp> ops = std::move(tGroupRma);
  tGroupRma.clear();
  if (drop) return;
  for (const RmaOp& op : ops)
    if (op.kind != RmaOp::Kind::Wait) run(op);
  for (const RmaOp& op : ops)
    if (op.kind == RmaOp::Kind::Wait) run(op);
}

size_t rmaGroupSize() { return tGroupRma.size(); }

}  // namespace tutti
