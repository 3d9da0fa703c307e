// Windows' parts by rank, and the signal counters of one-sided operations (windows.h).
#include "runtime/comm/windows.h"

#include <algorithm>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "runtime/comm/comm.h"

namespace tutti {

transport::SegmentDescriptor Windows::makeSignals(ncclComm* comm) {
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  bool allLocalInProcess = true;
  for (const RankInfo& p : comm->identity.peers)
    if (p.hostHash == me.hostHash && p.processToken != me.processToken) allLocalInProcess = false;
  contexts_ = std::max(1, comm->identity.config.numRmaCtx.value_or(1));
  nranks_ = comm->identity.nranks;
  transport::SegmentDescriptor descriptor{};
  own_ = transport::createSegment(sizeof(uint64_t) * size_t(nranks_) * size_t(contexts_), allLocalInProcess,
                                  &descriptor, "signal counters of " + comm->where(), transport::kSegmentMultiAttach);
  return descriptor;
}

void Windows::mapSignals(ncclComm* comm, const std::vector<Offer>& offers) {
  const int me = comm->identity.rank;
  const uint64_t host = comm->identity.peers[size_t(me)].hostHash;
  peers_.clear();
  peers_.resize(size_t(nranks_));
  counters_.assign(size_t(nranks_), nullptr);
  for (int r = 0; r < nranks_; r++) {
    if (r == me) {
      counters_[size_t(r)] = static_cast<uint64_t*>(own_->base());
    } else if (comm->identity.peers[size_t(r)].hostHash == host) {
      try {
        peers_[size_t(r)] = transport::attachSegment(offers[size_t(r)].signals, "");
      } catch (const Error& e) {
        throw Error(e.code(), "ncclCommWindowRegister: signal counters of " + comm->describePeer(r) + ", attached by " +
                                  comm->where() + ": " + e.message());
      }
      counters_[size_t(r)] = static_cast<uint64_t*>(peers_[size_t(r)]->base());
    }
  }
  expected_.assign(size_t(nranks_) * size_t(contexts_), 0);
  comm->identity.bootstrap->barrier();
  own_->seal();
  ready_ = true;
}

void Windows::add(const void* handle, WindowParts parts) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_[handle] = std::make_shared<const WindowParts>(std::move(parts));
}

void Windows::remove(const void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.erase(handle);
}

std::shared_ptr<const WindowParts> Windows::find(const void* handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windows_.find(handle);
  return it == windows_.end() ? nullptr : it->second;
}

uint64_t* Windows::counter(int target, int origin, int ctx) const {
  uint64_t* base = counters_[size_t(target)];
  return base == nullptr ? nullptr : base + size_t(origin) * size_t(contexts_) + size_t(ctx);
}

uint64_t Windows::expect(int peer, int ctx, uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& total = expected_[size_t(peer) * size_t(contexts_) + size_t(ctx)];
  total += count;
  return total;
}

}  // namespace tutti
