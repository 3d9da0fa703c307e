// ncclCommShrink's and ncclCommRevoke's work on a communicator (comm_shrink.h).
#include "runtime/comm/comm_shrink.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "runtime/comm/comm.h"

namespace tutti {

namespace {

// Above the connections' tags (runtime/comm/connection_setup.cpp) and apart from calibration's.
constexpr uint32_t kShrinkTag = 0x5B1E0000u;
constexpr uint32_t kSplitRevokedTag = kShrinkTag + 0x100;
constexpr uint64_t kInvitationMagic = 0x7475747469534852ull;

// What travels down the survivors' tree: the new root, and what the lowest rank took the
// membership to be, so that a survivor given another exclude list finds out.
struct Invitation {
  uint64_t magic;
  uint64_t membership;  // membershipHash of the survivors
  int32_t survivors;
  int32_t leader;  // its parent rank
  ncclUniqueId id;
};

uint64_t membershipHash(const std::vector<int>& survivors) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int r : survivors)
    for (int b = 0; b < 4; b++) {
      h ^= uint64_t((uint32_t(r) >> (8 * b)) & 0xffu);
      h *= 1099511628211ull;
    }
  return h;
}

std::string shrinkWhere(const ncclComm* comm) { return "ncclCommShrink: " + comm->where(); }

}  // namespace

std::vector<int> shrinkSurvivors(const ncclComm* parent, const int* excludeRanks, int excludeCount) {
  const int nranks = parent->identity.nranks;
  if (excludeCount < 0)
    throw Error(ErrorCode::InvalidArgument,
                shrinkWhere(parent) + ": excludeRanksCount " + std::to_string(excludeCount) + " is negative");
  if (excludeCount > 0 && excludeRanks == nullptr)
    throw Error(ErrorCode::InvalidArgument, shrinkWhere(parent) + ": excludeRanksList is NULL with excludeRanksCount " +
                                                std::to_string(excludeCount));
  std::vector<bool> excluded(size_t(nranks), false);
  for (int i = 0; i < excludeCount; i++) {
    const int r = excludeRanks[i];
    const std::string entry = "excludeRanksList[" + std::to_string(i) + "] = " + std::to_string(r);
    if (r < 0 || r >= nranks)
      throw Error(ErrorCode::InvalidArgument,
                  shrinkWhere(parent) + ": " + entry + " is out of range (0.." + std::to_string(nranks - 1) + ")");
    if (r == parent->identity.rank)
      throw Error(ErrorCode::InvalidArgument,
                  shrinkWhere(parent) + ": " + entry + " is this rank; an excluded rank does not call ncclCommShrink");
    if (excluded[size_t(r)])
      throw Error(ErrorCode::InvalidArgument,
                  shrinkWhere(parent) + ": " + entry + " names rank " + std::to_string(r) + " twice");
    excluded[size_t(r)] = true;
  }
  std::vector<int> survivors;
  for (int r = 0; r < nranks; r++)
    if (!excluded[size_t(r)]) survivors.push_back(r);
  return survivors;
}

std::string describeShrunkRanks(const std::vector<int>& survivors) {
  constexpr size_t kShown = 16;
  std::string news, olds;
  for (size_t i = 0; i < survivors.size() && i < kShown; i++) {
    news += (i ? ", " : "") + std::to_string(i);
    olds += (i ? ", " : "") + std::to_string(survivors[i]);
  }
  if (survivors.size() > kShown) {
    news += ", ...";
    olds += ", ...";
  }
  return "the shrunk communicator's ranks " + news + " are parent ranks " + olds;
}

void checkShrinkable(const ncclComm* parent) {
  if (parent->error.asyncError.load() == ncclInProgress)
    throw Error(
        ErrorCode::InvalidUsage,
        shrinkWhere(parent) + ": the nonblocking init has not finished (poll ncclCommGetAsyncError until ncclSuccess)");
  if (!parent->identity.bootstrap || !parent->identity.peersKnown.load(std::memory_order_acquire))
    throw Error(ErrorCode::InvalidUsage,
                shrinkWhere(parent) +
                    ": its init never joined every rank, so there is nothing to shrink; make a new "
                    "communicator with ncclCommInitRank");
}

void abortForShrink(ncclComm* parent) {
  if (parent->error.asyncError.load() == ncclSuccess && parent->identity.nranks > 1)
    parent->identity.bootstrap->broadcastNotice(kShrinkAbortNotice);
  parent->fail(Error(ErrorCode::Aborted, parent->where() + ": aborted by ncclCommShrink with NCCL_SHRINK_ABORT"),
               false);
}

ncclUniqueId meetSurvivors(ncclComm* parent, const std::vector<int>& survivors) {
  const int n = int(survivors.size());
  const int me = int(std::find(survivors.begin(), survivors.end(), parent->identity.rank) - survivors.begin());
  // A survivor may still be inside an operation of the failed parent for TUTTI_TIMEOUT (when no
  // notice reaches it), then arrives as late as a rank joining a bootstrap may.
  const double timeout = parent->settings.timeoutSeconds + bootstrap::wire::configuredTimeoutSeconds();
  const uint64_t membership = membershipHash(survivors);
  bootstrap::Bootstrap& bootstrap = *parent->identity.bootstrap;
  Invitation invitation{};
  if (me == 0) {
    invitation.magic = kInvitationMagic;
    invitation.membership = membership;
    invitation.survivors = n;
    invitation.leader = parent->identity.rank;
    bootstrap::newUniqueId(&invitation.id);
  } else {
    // Binomial tree over the survivors' indices: i hears from i with its lowest set bit cleared.
    const int from = survivors[size_t(me & (me - 1))];
    try {
      bootstrap.recvWatching(from, kShrinkTag, &invitation, sizeof invitation, timeout, nullptr);
    } catch (const Error& e) {
      throw Error(e.code() == ErrorCode::InvalidUsage ? ErrorCode::InvalidUsage : ErrorCode::Remote,
                  shrinkWhere(parent) + ": waiting for " + parent->describePeer(from) + " to pass on the new root of " +
                      parent->describePeer(survivors[0]) + ", the lowest surviving rank: " + e.message() +
                      " (every rank left out of excludeRanksList must call ncclCommShrink)");
    }
    if (invitation.magic != kInvitationMagic)
      throw Error(ErrorCode::Remote,
                  shrinkWhere(parent) + ": " + parent->describePeer(from) + " sent a malformed shrink invitation");
    if (invitation.survivors != n || invitation.membership != membership)
      throw Error(
          ErrorCode::InvalidUsage,
          shrinkWhere(parent) + ": " + parent->describePeer(invitation.leader) + " shrinks to " +
              std::to_string(invitation.survivors) + " ranks, " +
              (invitation.survivors == n ? "as many as this rank's excludeRanksList leaves, but not the same ones"
                                         : "but this rank's excludeRanksList leaves " + std::to_string(n)) +
              "; every surviving rank must pass the same exclude list");
  }
  // Children: i + 2^k for each 2^k below i's lowest set bit (every 2^k below n for the root),
  // the largest subtree first. One that cannot be reached (dead, yet not excluded) does not keep
  // the root from the others: they go on, and the new communicator's join, which this process's
  // root serves, names the missing rank.
  // Every survivor's listener has been open since the parent's init, so a child that does not
  // take a connection within the handshake time (10 s at most) is gone.
  const int lowest = me == 0 ? 1 << 30 : (me & -me);
  const double sendSeconds = bootstrap::wire::handshakeSeconds(timeout);
  std::string unreached;
  for (int step = 1 << 30; step >= 1; step >>= 1) {
    if (step >= lowest || me + step >= n) continue;
    const int to = survivors[size_t(me + step)];
    try {
      bootstrap.sendWatching(to, kShrinkTag, &invitation, sizeof invitation, sendSeconds, nullptr);
    } catch (const Error& e) {
      if (unreached.empty()) unreached = "passing the new root on to " + parent->describePeer(to) + ": " + e.message();
    }
  }
  if (!unreached.empty())
    TUTTI_WARN("%s: %s (a rank that died must be in excludeRanksList); the join will name it",
               shrinkWhere(parent).c_str(), unreached.c_str());
  TUTTI_INFO(log::Init, "%s: %d of %d ranks meet as rank %d of the shrunk communicator", shrinkWhere(parent).c_str(), n,
             parent->identity.nranks, me);
  return invitation.id;
}

void revokeComm(ncclComm* comm) {
  const bool healthy = comm->error.asyncError.load() == ncclSuccess;
  comm->error.revoked.store(true);
  if (healthy && comm->identity.bootstrap && comm->identity.nranks > 1)
    comm->identity.bootstrap->broadcastNotice(kRevokeNotice);
  comm->fail(Error(ErrorCode::InvalidUsage, comm->where() + ": the communicator was revoked by ncclCommRevoke"), false);
}

bool commBusy(const ncclComm* comm) {
  return comm->executor.pendingStreamJobs.load() > 0 || comm->executor.activeLaunches.load() > 0;
}

void allGatherRevoked(ncclComm* comm, void* data, size_t bytes, uint32_t round) {
  const int n = comm->identity.nranks, rank = comm->identity.rank;
  const double timeout = comm->settings.timeoutSeconds + bootstrap::wire::configuredTimeoutSeconds();
  const uint32_t gather = kSplitRevokedTag + 2 * round, scatter = gather + 1;
  bootstrap::Bootstrap& bootstrap = *comm->identity.bootstrap;
  auto* all = static_cast<char*>(data);
  const std::string where = "ncclCommSplit: " + comm->where() + " (revoked)";
  try {
    if (rank == 0) {
      for (int r = 1; r < n; r++) bootstrap.recvWatching(r, gather, all + size_t(r) * bytes, bytes, timeout, nullptr);
      for (int r = 1; r < n; r++) bootstrap.sendWatching(r, scatter, all, size_t(n) * bytes, timeout, nullptr);
    } else {
      bootstrap.sendWatching(0, gather, all + size_t(rank) * bytes, bytes, timeout, nullptr);
      bootstrap.recvWatching(0, scatter, all, size_t(n) * bytes, timeout, nullptr);
    }
  } catch (const Error& e) {
    throw Error(e.code() == ErrorCode::InvalidUsage ? ErrorCode::InvalidUsage : ErrorCode::Remote,
                where + ": exchanging colors and keys through rank 0: " + e.message() +
                    " (every rank of a revoked communicator must call ncclCommSplit)");
  }
}

}  // namespace tutti
