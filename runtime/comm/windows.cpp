// Windows' parts by rank, and the signal counters of one-sided operations (windows.h).
#include "runtime/comm/windows.h"

#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "runtime/api/config.h"
#include "runtime/comm/comm.h"

namespace tutti {

namespace {
// What the signal counters of one rank may take: far more than any sensible config asks for.
constexpr uint64_t kMostSignalBytes = uint64_t(256) << 20;
}  // namespace

void Windows::makeSignals(ncclComm* comm, Offer* offer) {
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  bool allLocalInProcess = true;
  for (const RankInfo& p : comm->identity.peers)
    if (p.hostHash == me.hostHash && p.processToken != me.processToken) allLocalInProcess = false;
  // A config that turns signals off still gets a counter: the calls that would raise it are refused.
  contexts_ = std::max(1, contextsAllowed(comm->identity.config));
  signals_ = std::max(1, signalsAllowed(comm->identity.config));
  nranks_ = comm->identity.nranks;
  offer->contexts = contexts_;
  offer->signalIndices = signals_;
  offer->signals = transport::SegmentDescriptor{};
  own_.reset();
  // Too many counters are refused after the allGather (mapSignals), on every rank alike.
  if (signalBytes() > kMostSignalBytes) return;
  own_ = transport::createSegment(size_t(signalBytes()), allLocalInProcess, &offer->signals,
                                  "signal counters of " + comm->where(), transport::kSegmentMultiAttach);
}

void Windows::mapSignals(ncclComm* comm, const std::vector<Offer>& offers) {
  const int me = comm->identity.rank;
  const uint64_t host = comm->identity.peers[size_t(me)].hostHash;
  // Every origin computes where its counter lies in the target's segment from its own config, so
  // the layouts must agree.
  for (int r = 0; r < nranks_; r++)
    if (offers[size_t(r)].contexts != contexts_ || offers[size_t(r)].signalIndices != signals_)
      throw Error(ErrorCode::InvalidUsage,
                  "ncclCommWindowRegister: " + comm->where() + " asks for " + std::to_string(contexts_) +
                      " contexts and " + std::to_string(signals_) + " signal indices where " + comm->describePeer(r) +
                      " asks for " + std::to_string(offers[size_t(r)].contexts) + " and " +
                      std::to_string(offers[size_t(r)].signalIndices) +
                      " (ncclConfig_t.numRmaCtx and numRmaSig must be the same on every rank)");
  if (signalBytes() > kMostSignalBytes)
    throw Error(ErrorCode::InvalidArgument, "ncclCommWindowRegister: " + comm->where() + ": the signal counters of " +
                                                std::to_string(nranks_) + " ranks x " + std::to_string(contexts_) +
                                                " contexts (ncclConfig_t.numRmaCtx) x " + std::to_string(signals_) +
                                                " signal indices (numRmaSig) would take " +
                                                std::to_string(signalBytes()) + " bytes of every rank, more than the " +
                                                std::to_string(kMostSignalBytes) + " tutti allows");
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
  expected_.assign(slot(nranks_, 0, 0), 0);
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

uint64_t Windows::signalBytes() const {
  const double bytes = double(sizeof(uint64_t)) * double(nranks_) * double(contexts_) * double(signals_);
  return bytes >= double(UINT64_MAX) ? UINT64_MAX : uint64_t(bytes);
}

int Windows::contextsAllowed(const CommConfig& config) { return config.numRmaCtx.value_or(1); }

int Windows::signalsAllowed(const CommConfig& config) { return config.numRmaSig.value_or(1); }

uint64_t* Windows::counter(int target, int origin, int ctx, int sigIdx) const {
  uint64_t* base = counters_[size_t(target)];
  return base == nullptr ? nullptr : base + slot(origin, ctx, sigIdx);
}

uint64_t Windows::expect(int peer, int ctx, int sigIdx, uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& total = expected_[slot(peer, ctx, sigIdx)];
  total += count;
  return total;
}

}  // namespace tutti
