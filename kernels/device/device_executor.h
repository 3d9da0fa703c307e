// The device executor's body: one thread block runs one worker of a launch (kernels/work.h),
// its queues side by side, with the lane engine (kernels/lane_engine.h). The block's first thread
// decides: it polls the FIFOs of each queue's current lane in turn, and when one can run, locates
// each part of its step; every thread then moves the part's bytes (block_mover.h); the first
// thread publishes. A wait is bounded: with no progress for the timeout, or once the host sets
// the abort word, or once another block has failed, the block records why in the launch's fault
// record (first writer wins) and returns. Built by nvcc as a kernel (kernels/cuda/executor_kernel.cu)
// and by g++ for the emulated device (kernels/emulated/emulated_device.cpp), from this one source.
#pragma once

#include <cstdint>

#include "kernels/device/block_mover.h"
#include "kernels/device/shim.h"
#include "kernels/lane_engine.h"
#include "kernels/work.h"

namespace tutti::kern::dev {

// What a launch's blocks share with the host: the abort word the host sets, the fault record the
// blocks fill, the wait bound, and the count of messages read in place (tuttiCommZeroCopyReads).
struct ExecControl {
  const uint32_t* abortWord;  // nonzero: stop (ncclCommAbort)
  ExecFault* fault;           // fault->fault != 0: a block failed; the others stop too
  uint64_t timeoutNs;         // a block with no progress for this long fails
  uint64_t* directReads;      // counts the direct messages read in place (null: not counted)
};

// The largest LL message the block stages on chip: kDeviceLLBytes (kernels/backend.h), what both
// ends of an LL connection of the device executors agreed to. A larger one (no executor of this
// tree sends one) is staged in its Simple slot instead.
constexpr uint64_t kLLStageBytes = 16 * 1024;

// The decisions the first thread shares with the block, in shared memory. The action alternates
// between two words, so that the first thread can decide the next round while slower threads
// still read this one's (every thread passes a barrier between two rounds of the same parity).
struct BlockShared {
  enum Action : uint32_t { Idle, Step, Done, Stop };
  uint32_t action[2];
  uint32_t stop;  // a part failed its checks
  uint32_t lane;  // the launch's lane index that runs
  engine::Run run;
  engine::Part part;
  // An LL run's message as plain bytes: the lines unpacked into llIn, the parts read it and write
  // llOut, which is packed into the receiver's lines (lane_engine.h, llUnpack and llPack). On
  // chip, where the Simple slot would cost a trip over the bus and back (in p2p write mode the
  // send slot is in the peer's memory; in read mode the receive slot is).
  alignas(16) char llIn[kLLStageBytes];
  alignas(16) char llOut[kLLStageBytes];
};

// The sync policy of the lane engine on a device: peers poll, so nothing is rung.
//  * Its loads are polls (shim.h loadPoll: relaxed, no L1 invalidation each time). runWorker adds
//    the one acquire a run needs (fenceAcquire) once a poll found it ready, where the block then
//    reads what the sender wrote before publishing: a Simple message (its size, signature, address
//    and bytes). An LL message needs none: each half carries its flag, and is read with volatile
//    loads that L1 does not serve. A send needs none either: the receiver's reads of the slot it
//    freed had completed (see storeFree).
//  * Its stores publish with one fence (shim.h publish), except the tail that finishRun frees,
//    `freed`, which only says that the block's reads of a slot are done (shim.h storeFree).
struct DeviceSync {
  const uint64_t* freed = nullptr;

  TUTTI_DEVICE uint64_t loadAcquire(const uint64_t* p) const { return loadPoll(p); }
  TUTTI_DEVICE void storeRelease(uint64_t* p, uint64_t v) const {
    if (p == freed)
      storeFree(p, v);
    else
      publish(p, v);
  }
  TUTTI_DEVICE void notify(const ConnEnd&) const {}
  TUTTI_DEVICE uint64_t loadLL(const uint64_t* p) const { return dev::loadLL(p); }
  TUTTI_DEVICE void storeLL(uint64_t* p, uint64_t v) const { dev::storeLL(p, v); }
  TUTTI_DEVICE void loadLLLine(const uint64_t* p, uint64_t& a, uint64_t& b) const { dev::loadLLLine(p, a, b); }
  TUTTI_DEVICE void storeLLLine(uint64_t* p, uint64_t a, uint64_t b) const { dev::storeLLLine(p, a, b); }
};

// Phase 1 on a device (lane_engine.h, tryBegin), by the first thread: polls with relaxed loads;
// a run found ready that reads a Simple message gets its one acquire, and is read again after it
// (the counters only grow, so it is still ready). An LL run's message is then staged on chip.
TUTTI_DEVICE bool tryBeginOnDevice(const engine::LaneRef& l, BlockShared& sh, const DeviceSync& sync) {
  engine::Run& run = sh.run;
  bool ready = engine::tryBegin(l, run, sync);
  if (ready && run.recv && !run.rll) {
    fenceAcquire();
    ready = engine::tryBegin(l, run, sync);
  }
  if (!ready) return false;
  if (run.rll && run.got <= kLLStageBytes) run.rslot = sh.llIn;
  if (run.sll && llCapacity(run.sf->llSlotBytes) <= kLLStageBytes) run.sslot = sh.llOut;
  return true;
}

// The fault word while its record is being written.
constexpr uint32_t kFaultBeingWritten = 0xffffffffu;

// Records the block's fault unless another block recorded one first: the fault word is claimed,
// the record written, then the fault published.
TUTTI_DEVICE void recordFault(const ExecControl& ctl, ExecFault f) {
  if (!claim(&ctl.fault->fault, kFaultBeingWritten)) return;
  const uint32_t kind = f.fault;
  f.fault = kFaultBeingWritten;
  *ctl.fault = f;
  storeRelease32(&ctl.fault->fault, kind);
}

// Which lane of the worker's queues a stopped worker was waiting on, as a fault of `kind`.
TUTTI_DEVICE ExecFault waitingFault(LaunchWork& w, const OpWork* ops, const WorkerWork& ww, Fault kind,
                                    const DeviceSync& sync) {
  ExecFault f{};
  f.peer = -1;
  for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++) {
    const uint32_t current = w.queueStates()[q].current;
    if (current < w.queues()[q].nlanes) {
      engine::blockedOn(engine::laneRef(w, w.queues()[q].firstLane + current, ops), f, sync);
      break;
    }
  }
  f.fault = uint32_t(kind);
  return f;
}

// Runs worker `worker` of the launch with the calling block. ops: the launch's operations.
TUTTI_DEVICE void runWorker(LaunchWork& w, const OpWork* ops, uint32_t worker, const ExecControl& ctl,
                            BlockShared& sh) {
  const WorkerWork ww = w.workers()[worker];
  const bool lead = threadId() == 0;
  const DeviceSync sync;
  if (lead) {
    sh.stop = 0;
    for (uint32_t q = ww.firstQueue; q < ww.firstQueue + ww.nqueues; q++) {
      const QueueWork& qw = w.queues()[q];
      w.queueStates()[q].current = 0;
      for (uint32_t i = 0; i < qw.nlanes; i++) engine::prepareLane(engine::laneRef(w, qw.firstLane + i, ops));
    }
  }
  uint64_t lastProgress = lead ? nowNs() : 0;
  uint32_t polls = 0, next = 0, streak = 0;  // streak: steps in a row of queue `next`
  for (uint32_t round = 0;; round++) {
    uint32_t& action = sh.action[round & 1];
    if (lead) {
      // The queues in turn from the one that ran last, which goes on while it can move, for at most
      // kQueueBurst steps in a row; then the next queue is asked first, so that no queue starves.
      action = BlockShared::Done;
      for (uint32_t k = 0; k < ww.nqueues && action != BlockShared::Step; k++) {
        const uint32_t qi = (next + k) % ww.nqueues;
        const uint32_t q = ww.firstQueue + qi;
        const QueueWork& qw = w.queues()[q];
        QueueState& qs = w.queueStates()[q];
        while (qs.current < qw.nlanes && engine::laneDone(engine::laneRef(w, qw.firstLane + qs.current, ops)))
          qs.current++;
        if (qs.current == qw.nlanes) continue;
        action = BlockShared::Idle;
        const uint32_t lane = qw.firstLane + qs.current;
        if (tryBeginOnDevice(engine::laneRef(w, lane, ops), sh, sync)) {
          action = BlockShared::Step;
          sh.lane = lane;
          streak = qi == next ? streak + 1 : 1;
          next = qi;
          if (streak >= engine::kQueueBurst) {
            next = (qi + 1) % ww.nqueues;
            streak = 0;
          }
        }
      }
      // Direct messages (lane_engine.h): done only once their receivers have read them.
      const ConnEnd* undrained = action == BlockShared::Done ? engine::firstUndrained(w, ops, ww, sync) : nullptr;
      if (undrained != nullptr) action = BlockShared::Idle;
      if (action == BlockShared::Idle && (++polls & 63) == 0) {
        const uint32_t failed = loadVolatile32(&ctl.fault->fault);
        if (failed != 0) {
          action = BlockShared::Stop;  // another block failed and said why
        } else if (loadVolatile32(ctl.abortWord) != 0) {
          action = BlockShared::Stop;
          ExecFault f = waitingFault(w, ops, ww, Fault::Aborted, sync);
          if (undrained != nullptr) {
            engine::undrainedFault(w, ops, ww, *undrained, f);
            f.fault = uint32_t(Fault::Aborted);
          }
          recordFault(ctl, f);
        } else if (nowNs() - lastProgress > ctl.timeoutNs) {
          action = BlockShared::Stop;
          ExecFault f = waitingFault(w, ops, ww, Fault::Timeout, sync);
          if (undrained != nullptr) engine::undrainedFault(w, ops, ww, *undrained, f);
          f.waitedNs = nowNs() - lastProgress;
          recordFault(ctl, f);
        }
      }
      if (action == BlockShared::Idle) pause();
    }
    barrier();
    const uint32_t decided = action;
    if (decided == BlockShared::Done || decided == BlockShared::Stop) return;
    if (decided == BlockShared::Idle) continue;

    const engine::LaneRef l = engine::laneRef(w, sh.lane, ops);
    const BlockMover mover{l.op, engine::resolvedRedOp(*l.op)};
    const uint32_t parts = sh.run.parts;
    // Read now, while the run is this round's: once the last barrier below is passed, the first
    // thread may begin the next round's run.
    const bool rll = sh.run.rll, sll = sh.run.sll;
    if (rll) {  // the message's lines into its stage first (lane_engine.h, llUnpack)
      engine::llUnpack(sh.run, uint32_t(threadId()), uint32_t(threadCount()), sync);
      barrier();
    }
    for (uint32_t j = 0; j < parts; j++) {
      if (lead) {
        ExecFault f{};
        if (!engine::partGeometry(l, sh.run, j, sh.part, f)) {
          recordFault(ctl, f);
          sh.stop = 1;
        }
      }
      barrier();
      if (sh.stop) return;
      const engine::Part part = sh.part;
      engine::moveData(mover, *l.op, part);
      barrier();
      if (lead) engine::endPart(sh.run, j, part);
    }
    if (sll) {  // the stage into the receiver's lines, then line 0 (finishRun)
      barrier();
      engine::llPack(sh.run, uint32_t(threadId()), uint32_t(threadCount()), sync);
      barrier();
    }
    if (lead) {
      // A message that came by address (a direct message is always a run of one part).
      if (sh.run.raddr != nullptr && parts == 1 && ctl.directReads != nullptr) countAdd(ctl.directReads, 1);
      // The receive FIFO's tail frees what the block only read; the rest publishes (DeviceSync).
      // An LL message too large to stage on chip was unpacked into its Simple slot: the block
      // wrote that slot (in p2p read mode, the sender's memory), so its tail publishes too.
      const bool wroteSlot = sh.run.rll && sh.run.rslot != sh.llIn;
      engine::finishRun(l, sh.run, DeviceSync{sh.run.recv && !wroteSlot ? &sh.run.rf->tail : nullptr});
      lastProgress = nowNs();
      polls = 0;
    }
  }
}

}  // namespace tutti::kern::dev
