// The one-shot all-reduce through shared mailboxes (see mailbox.h).
#include "kernels/mailbox.h"

#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/exec_fault.h"

namespace tutti::kern {
namespace {

// What a wait for rank p's input reports (built only once the wait sleeps).
WaitRecord waitingFor(const MailboxAllReduce& op, int p, std::chrono::steady_clock::time_point since) {
  WaitRecord r;
  r.what = WaitFor::MailboxInput;
  r.peer = p;
  r.opName = op.name;
  r.opSeq = op.opSeq;
  r.sinceNs = std::chrono::duration_cast<std::chrono::nanoseconds>(since.time_since_epoch()).count();
  return r;
}

// Waits until rank p's mailbox holds operation op.seq.
void awaitInput(const MailboxAllReduce& op, int p, const ExecutionContext& ctx) {
  using Clock = std::chrono::steady_clock;
  const std::atomic<uint64_t>& seq = op.boxes[p]->seq;
  // seq_cst (a plain load on x86): the look after announcing a sleep must be ordered after the
  // announcement, against the writer's fence (runMailboxAllReduce).
  auto arrived = [&] { return seq.load(std::memory_order_seq_cst) == op.seq; };
  Clock::time_point sleptSince{}, probeAt{};
  // Published for the length of the sleeping part of the wait (ctx.waitSlot), cleared however
  // it ends.
  struct Published {
    WaitSlot* slot = nullptr;
    ~Published() {
      if (slot) slot->clear();
    }
  } published;
  for (int idle = 0; !arrived(); idle++) {
    if (ctx.abortFlag && ctx.abortFlag->load(std::memory_order_relaxed))
      throw Error(ErrorCode::Aborted,
                  "rank " + std::to_string(ctx.rank) + ": operation aborted (ncclCommAbort or an earlier fatal error)");
    if (idlePoll(idle, ctx)) continue;
    if (sleptSince == Clock::time_point{}) {
      sleptSince = Clock::now();
      probeAt = sleptSince + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(ExecutionContext::kProbeAfterSeconds));
      if (ctx.waitSlot) {
        ctx.waitSlot->publish(waitingFor(op, p, sleptSince));
        published.slot = ctx.waitSlot;
      }
    }
    // Announce the sleep, then look again: a writer publishes, later fences and looks for
    // sleepers, so either it sees this one (and rings) or this look sees its input.
    Bell* bell = ctx.bell;
    bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = bell->seq.load(std::memory_order_seq_cst);
    if (!arrived()) sleepOnBell(bell, seen, 100 * 1000 * 1000L);
    bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    // Stalled: has the peer made another call of this number (one that does not go through the
    // mailboxes)? Asked each second from the first.
    if (!arrived() && op.signature != 0 && Clock::now() >= probeAt) {
      probeAt = Clock::now() + std::chrono::seconds(1);
      std::string mismatch = ctx.hooks->probeCall(p, op.signature, op.count);
      if (!mismatch.empty())
        throw Error(ErrorCode::InvalidUsage, std::string(op.name) + " #" + std::to_string(op.opSeq) + ": " + mismatch);
    }
    if (!arrived() && std::chrono::duration<double>(Clock::now() - sleptSince).count() > ctx.timeoutSeconds) {
      WaitRecord waiting = waitingFor(op, p, sleptSince);
      throw Error(ErrorCode::Timeout, describeWaitingOp(waiting, ctx.rank) + " is waiting for " +
                                          describeWaitedFor(waiting, ctx.describePeer(p)) +
                                          " and made no progress for " + std::to_string(int(ctx.timeoutSeconds)) +
                                          " s (TUTTI_TIMEOUT)");
    }
  }
}

}  // namespace

void runMailboxAllReduce(const MailboxAllReduce& op, const ExecutionContext& ctx) {
  const size_t bytes = op.count * dtypeSize(op.type);
  if (bytes > kMailboxBytes)
    throw Error(ErrorCode::Internal, "mailbox all-reduce of " + std::to_string(bytes) + " bytes");
  Mailbox* mine = op.boxes[op.rank];
  reduceHost(op.type, op.redop, mine->data, nullptr, op.in, op.count, kPreOnB);
  mine->signature = op.signature;
  mine->count = op.count;
  mine->seq.store(op.seq, std::memory_order_release);
  // The fold, in rank order with the accumulator on the left; own input from the mailbox too
  // (in place, the output overwrites the input). Each peer's call is checked before its input is
  // read.
  auto await = [&](int p) {
    if (p == op.rank) return;
    awaitInput(op, p, ctx);
    const Mailbox* box = op.boxes[p];
    if (op.signature != 0 && box->signature != 0 && (box->signature != op.signature || box->count != op.count))
      throw Error(ErrorCode::InvalidUsage, std::string(op.name) + " #" + std::to_string(op.opSeq) + ": " +
                                               describeCallMismatch(ctx.describePeer(p), box->signature, box->count,
                                                                    op.rank, op.signature, op.count));
  };
  auto postAt = [&](int p) { return p == op.nranks - 1 ? unsigned(kPost) : 0u; };
  if (op.nranks == 1) {
    reduceHost(op.type, op.redop, op.out, nullptr, op.boxes[0]->data, op.count, kPost);
  } else {
    await(0);
    await(1);
    reduceHost(op.type, op.redop, op.out, op.boxes[0]->data, op.boxes[1]->data, op.count, postAt(1));
    for (int p = 2; p < op.nranks; p++) {
      await(p);
      reduceHost(op.type, op.redop, op.out, op.out, op.boxes[p]->data, op.count, postAt(p));
    }
  }
  // Wake the peers that sleep waiting for this input. Only now: a fence right after the write
  // would hold this rank until the write reached every peer, and only then let it look for
  // theirs (a second cache-line round trip per operation). Waiting this long loses no wake-up:
  // every rank that waits has written its own input first, so the fold above never waits for
  // a sleeper, and the last rank to arrive (which waits for nobody) wakes everyone still asleep.
  // The fence orders the write before the look at sleepers, against the sleeper's count and its
  // look at the mailbox after it (awaitInput), both seq_cst: either that look sees the input or
  // this one sees the sleeper.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int p = 0; p < op.nranks; p++)
    if (p != op.rank && op.bells[p]->sleepers.load(std::memory_order_relaxed) != 0) ringBell(op.bells[p]);
}

}  // namespace tutti::kern
