// What a host executor worker is blocked on: a record the worker publishes when a wait is about to
// sleep, so that another thread (a watchdog, tuttiCommDescribeWait) can name the peer it waits for.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "algorithms/plan.h"

namespace tutti::kern {

// What a waiting worker lacks.
enum class WaitFor : uint8_t {
  Nothing,       // not waiting (the record is empty)
  Data,          // a slot of its receive FIFO, from peer
  Space,         // a free slot of its send FIFO, at peer
  MailboxInput,  // peer's input in its mailbox (one-shot all-reduce, kernels/mailbox.h)
  DirectRead,    // peer to read what this rank sent it by address, before the operation may end
};

// Plain data, so that publishing one copies a few words and allocates nothing. opName must outlive
// the communicator (the executors' names are string literals).
struct WaitRecord {
  WaitFor what = WaitFor::Nothing;
  plan::Op step = plan::Op::Send;  // the lane's current step (FIFO waits)
  int peer = -1;
  int channel = 0;  // FIFO waits
  const char* opName = "";
  uint64_t opSeq = 0;
  uint64_t tile = 0, ntiles = 0;  // FIFO waits: the lane's progress
  int64_t sinceNs = 0;            // steady_clock: when the worker last made progress
};

// One worker's record. A mutex rather than a seqlock: the worker takes it only when a wait is
// about to sleep (a futex call follows anyway) and when it moves on after one, and readers are
// rare; and every field stays an ordinary field.
class WaitSlot {
 public:
  void publish(const WaitRecord& record) {
    std::lock_guard<std::mutex> lock(mutex_);
    record_ = record;
    if (record.what != WaitFor::Nothing) last_ = record;
  }
  void clear() { publish(WaitRecord{}); }
  WaitRecord read() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return record_;
  }
  // The worker's latest wait, also once it has moved on: a worker that timed out has cleared its
  // record by the time its failure is reported, and the flight recorder's dump still names the
  // peer it waited for (runtime/diagnostics/flight_recorder_dump.h).
  WaitRecord readLast() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_;
  }
  // The wait that ran out of time: kept after the worker stops (clear leaves it), for the
  // diagnosis that follows a timeout and for peers that ask what this rank waits for.
  void keepTimedOut(const WaitRecord& record) {
    std::lock_guard<std::mutex> lock(mutex_);
    timedOut_ = record;
  }
  WaitRecord timedOut() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return timedOut_;
  }

 private:
  mutable std::mutex mutex_;
  WaitRecord record_;
  WaitRecord last_;
  WaitRecord timedOut_;
};

// The operation and where in it the worker waits: "AllReduce #12 (channel 0, tile 1/4, step
// recvReduceSend)", with " on rank R" after the number when rank >= 0.
std::string describeWaitingOp(const WaitRecord& record, int rank = -1);
// What it waits for, given the peer's name: "data from rank 3 (host pid 1234)".
std::string describeWaitedFor(const WaitRecord& record, const std::string& peer);

}  // namespace tutti::kern
