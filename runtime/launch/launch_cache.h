// A communicator's finished launches of single operations, kept by shape so that the next call of
// the same shape only points one at its buffers (a loop of identical calls binds nothing and
// allocates nothing per call), and the slots of mailbox all-reduces queued on host streams.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/host_stream.h"
#include "kernels/redop.h"
#include "runtime/launch/task.h"

namespace tutti {

class CommLaunch;
namespace plan {
struct Algorithm;
}

// What a bound launch of one operation depends on besides its buffers: a later call of the same
// shape binds to the same lanes, plans, connections and scratch layout.
struct LaunchShape {
  plan::Coll coll;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  cudaStream_t stream;
  const plan::Algorithm* algorithm;
  int nchannels;
  bool operator==(const LaunchShape&) const = default;
};

// Taken by the caller's thread, given back by whichever thread ran the launch.
struct LaunchCache {
  // A loop of calls on one stream has up to a queue's worth in flight; all of them come back.
  static constexpr size_t kMaxIdle = kern::HostStream::kCapacity + 16;
  struct Idle {
    LaunchShape shape;
    std::unique_ptr<CommLaunch> launch;
  };
  std::mutex mutex;
  std::vector<Idle> idle;

  // Mailbox all-reduces queued on host streams need no launch: the caller fills a slot, the
  // stream's job (which captures only the communicator and the slot, so queueing it allocates
  // nothing) runs it and frees the slot. Taken in turn by the caller's thread; a slot still busy
  // (jobs on several streams finish out of order) sends the call down the launch path.
  static constexpr size_t kMailboxSlots = 2 * kern::HostStream::kCapacity + 8;
  struct MailboxJob {
    Task task;
    kern::RedOp redop;
    uint64_t opSeq = 0;
    uint64_t signature = 0;  // the call's (nextCallSignature)
    std::atomic<bool> busy{false};
  };
  MailboxJob mailboxJobs[kMailboxSlots];
  size_t mailboxJobsTaken = 0;

  ~LaunchCache();
};

// The communicator's cache, made by the caller's thread on its first launch.
LaunchCache& launchCacheOf(ncclComm* comm);
// A finished launch of this shape (the newest), or null.
std::unique_ptr<CommLaunch> takeIdleLaunch(ncclComm* comm, const LaunchShape& shape);
// Keeps a finished launch for the next call of its shape (the oldest is dropped when full).
void giveBackLaunch(ncclComm* comm, const LaunchShape& shape, std::unique_ptr<CommLaunch> launch);

}  // namespace tutti
