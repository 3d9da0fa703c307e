// Windows (ncclCommWindowRegister) as one-sided operations see them: every rank's part of each
// window (where it lies in its owner's address space, and its size), and the signal counters that
// puts and signals raise and ncclWaitSignal reads (runtime/launch/rma.h). Decisions:
//   - A window is a registration (runtime/comm/registrations.h); its registration is collective,
//     and its allGather carries each rank's address and size, so an origin checks a put against the
//     peer's own size (ranks may register windows of different sizes) without asking it.
//   - Signals live in a segment per rank (transports/segment.h: plain memory when every rank of
//     the host is a thread of this process, else POSIX shared memory), made at the communicator's
//     first window registration and mapped by every rank of the host: one counter per (origin
//     rank, context, signal index), laid out in that order, which only that origin raises, by one
//     atomic add with release ordering after its data; the target reads it with acquire ordering.
//     Counters only grow, as NCCL counts signals: a wait's expected total per (peer, context,
//     signal index) grows by its opCnt.
//   - How many contexts and signal indices there are is the config's (numRmaCtx since 2.29,
//     numRmaSig in 2.31-style configs): unset is one of each, 0 turns one-sided signals off.
//   - A segment lives as long as the communicator: a put in flight never raises a counter that
//     is gone, and counts carry over from one window to the next as NCCL's do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/segment.h"

struct ncclComm;

namespace tutti {

struct CommConfig;

// One window: by rank, where its part lies in that rank's address space, and its size.
struct WindowParts {
  std::vector<uint64_t> address;
  std::vector<uint64_t> bytes;
};

class Windows {
 public:
  // What this rank adds to a window registration's allGather.
  struct Offer {
    uint64_t address;
    uint64_t bytes;
    transport::SegmentDescriptor signals;     // at the first registration only (kind 0 otherwise)
    int32_t contexts = 0, signalIndices = 0;  // its config's, at the first registration
  };

  // Whether the signal segments are mapped (after the first registration).
  bool ready() const { return ready_; }
  // The first registration, before its allGather: makes this rank's signal segment and fills in
  // the offer's signals, contexts and signal indices.
  void makeSignals(ncclComm* comm, Offer* offer);
  // After it: checks that every rank asked for the same contexts and signal indices, and maps the
  // segments of the host's peers (then a barrier, after which this rank's segment can no longer be
  // attached). Collective; throws on every rank alike when the offers disagree.
  void mapSignals(ncclComm* comm, const std::vector<Offer>& offers);

  // A window registered (again, for a range registered before) / its registration gone.
  void add(const void* handle, WindowParts parts);
  void remove(const void* handle);
  // The window `handle` names, or null when it is no window of this communicator.
  std::shared_ptr<const WindowParts> find(const void* handle) const;

  // The contexts (ncclConfig_t.numRmaCtx) and signal indices (numRmaSig) a config allows: one
  // when unset, 0 when it turns them off.
  static int contextsAllowed(const CommConfig& config);
  static int signalsAllowed(const CommConfig& config);

  // The counter that `origin` raises in `target`'s segment for (ctx, sigIdx); null when `target`
  // is on another host.
  uint64_t* counter(int target, int origin, int ctx, int sigIdx) const;
  // The total a new wait for `count` signals of (peer, ctx, sigIdx) expects: the last one's plus
  // count.
  uint64_t expect(int peer, int ctx, int sigIdx, uint64_t count);

 private:
  mutable std::mutex mutex_;
  std::map<const void*, std::shared_ptr<const WindowParts>> windows_;
  bool ready_ = false;
  int contexts_ = 1;
  int signals_ = 1;  // signal indices per context
  int nranks_ = 0;
  std::unique_ptr<transport::Segment> own_;
  std::vector<std::unique_ptr<transport::Segment>> peers_;  // by rank; null: self or another host
  std::vector<uint64_t*> counters_;                         // by rank: its segment here; null: another host
  std::vector<uint64_t> expected_;                          // laid out as a segment's counters
  // What this rank's counters take (saturating: the config's numbers may be large).
  uint64_t signalBytes() const;
  size_t slot(int origin, int ctx, int sigIdx) const {
    return (size_t(origin) * size_t(contexts_) + size_t(ctx)) * size_t(signals_) + size_t(sigIdx);
  }
};

}  // namespace tutti
