// Entry points that make, split, query and end communicators.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_init.h"
#include "runtime/comm/comm_registry.h"
#include "runtime/comm/comm_shrink.h"

using namespace tutti;

namespace {

// Makes a communicator; blocking configs join now, nonblocking ones in a thread while the
// handle reports ncclInProgress. device -1: the calling thread's current CUDA device (NCCL's rule
// for ncclCommInitRank and its siblings), 0 off the cuda backend.
constexpr int kCurrentDevice = -1;
void createComm(const char* operation, ncclComm_t* out, const ncclUniqueId* ids, int nIds, int nranks, int rank,
                int device, const CommConfig& config) {
  if (out == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": comm (the output pointer) is NULL");
  *out = nullptr;
  if (nranks < 1)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": nranks " + std::to_string(nranks) + " must be at least 1");
  if (rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": rank " + std::to_string(rank) +
                                                " is out of range (0.." + std::to_string(nranks - 1) + ")");
  auto comm = std::make_unique<ncclComm>();
  comm->identity.backendName = kern::chooseBackend(operation);
  if (device == kCurrentDevice) device = kern::currentDevice(comm->identity.backendName);
  comm->identity.config = config;
  comm->identity.rank = rank;
  comm->identity.nranks = nranks;
  comm->identity.device = device;
  std::vector<ncclUniqueId> idCopy(ids, ids + nIds);
  if (config.blocking) {
    initCommunicator(comm.get(), idCopy.data(), nIds, rank, nranks, device);
    registerComm(comm.get());
    *out = comm.release();
    return;
  }
  comm->error.asyncError.store(ncclInProgress);
  ncclComm* raw = comm.get();
  registerComm(raw);
  raw->lifecycle.initThread = std::thread([raw, idCopy, nIds, rank, nranks, device] {
    try {
      initCommunicator(raw, idCopy.data(), nIds, rank, nranks, device);
      raw->error.asyncError.store(ncclSuccess);
    } catch (const Error& e) {
      raw->error.asyncError.store(ncclSuccess);  // let fail() record this error
      raw->fail(e);
      TUTTI_WARN("%s: nonblocking init failed: %s", raw->where().c_str(), e.what());
    } catch (const std::exception& e) {
      raw->error.asyncError.store(ncclSuccess);
      raw->fail(Error(ErrorCode::Internal, e.what()));
    }
  });
  *out = comm.release();
}

// Waits for a nonblocking init and for work queued on host streams to finish with this
// communicator. Stream work is bounded by TUTTI_TIMEOUT and ends at once after an abort.
void quiesce(ncclComm* comm) {
  if (comm->lifecycle.initThread.joinable()) comm->lifecycle.initThread.join();
  while (comm->executor.pendingStreamJobs.load() > 0 || comm->executor.activeLaunches.load() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace

TUTTI_API ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guard("ncclGetUniqueId", [&] {
    if (uniqueId == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    bootstrap::getUniqueId(uniqueId);
  });
}
TUTTI_NCCL_ALIAS(ncclGetUniqueId)

// Nonblocking communicators report ncclInProgress until their init has finished.
static ncclResult_t initResult(ncclResult_t result, ncclComm_t* comm) {
  if (result == ncclSuccess && comm && *comm && !(*comm)->identity.config.blocking) return ncclInProgress;
  return result;
}

TUTTI_API ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t* config) {
  return initResult(guard("ncclCommInitRankConfig",
                          [&] {
                            CommConfig c = readConfig(config, "ncclCommInitRankConfig");
                            createComm("ncclCommInitRankConfig", comm, &commId, 1, nranks, rank, kCurrentDevice, c);
                          }),
                    comm);
}
TUTTI_NCCL_ALIAS(ncclCommInitRankConfig)

TUTTI_API ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initResult(guard("ncclCommInitRank",
                          [&] {
                            createComm("ncclCommInitRank", comm, &commId, 1, nranks, rank, kCurrentDevice,
                                       readConfig(nullptr, "ncclCommInitRank"));
                          }),
                    comm);
}
TUTTI_NCCL_ALIAS(ncclCommInitRank)

TUTTI_API ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId* commIds, ncclConfig_t* config) {
  return initResult(
      guard("ncclCommInitRankScalable",
            [&] {
              if (nId < 1 || commIds == nullptr)
                throw Error(ErrorCode::InvalidArgument, "ncclCommInitRankScalable: needs nId >= 1 unique ids (nId " +
                                                            std::to_string(nId) + ", commIds " +
                                                            (commIds ? "set" : "NULL") + ")");
              if (nId > nranks)
                throw Error(ErrorCode::InvalidArgument, "ncclCommInitRankScalable: nId " + std::to_string(nId) +
                                                            " is larger than nranks " + std::to_string(nranks));
              CommConfig c = readConfig(config, "ncclCommInitRankScalable");
              createComm("ncclCommInitRankScalable", newcomm, commIds, nId, nranks, myrank, kCurrentDevice, c);
            }),
      newcomm);
}
TUTTI_NCCL_ALIAS(ncclCommInitRankScalable)

TUTTI_API ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guard("ncclCommInitAll", [&] {
    if (comms == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommInitAll: comms is NULL");
    if (ndev < 1)
      throw Error(ErrorCode::InvalidArgument, "ncclCommInitAll: ndev " + std::to_string(ndev) + " must be at least 1");
    // A device may appear more than once: ranks sharing a GPU, which the cuda backend refuses
    // unless TUTTI_ALLOW_SHARED_GPU=1 (naming both ranks and the device).
    if (devlist)
      for (int i = 0; i < ndev; i++)
        if (devlist[i] < 0)
          throw Error(ErrorCode::InvalidArgument, "ncclCommInitAll: devlist[" + std::to_string(i) + "] is " +
                                                      std::to_string(devlist[i]) + ", not a device index");
    ncclUniqueId id;
    bootstrap::getUniqueId(&id);
    CommConfig config = readConfig(nullptr, "ncclCommInitAll");
    config.blocking = true;
    std::vector<ncclComm_t> made(static_cast<size_t>(ndev), nullptr);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; i++)
      threads.emplace_back([&, i] {
        try {
          createComm("ncclCommInitAll", &made[size_t(i)], &id, 1, ndev, i, devlist ? devlist[i] : i, config);
        } catch (...) {
          errors[size_t(i)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    // Every rank is here, so the call reports the failure at its source: a rank that heard of it
    // through a peer's notice (a Remote error) gives way to the rank that raised it.
    std::exception_ptr first;
    for (auto& e : errors) {
      if (!e) continue;
      if (!first) first = e;
      try {
        std::rethrow_exception(e);
      } catch (const Error& error) {
        if (error.code() != ErrorCode::Remote) {
          first = e;
          break;
        }
      } catch (...) {
        first = e;
        break;
      }
    }
    if (first) {
      for (ncclComm_t c : made)
        if (c) {
          unregisterComm(c);
          delete c;
        }
      std::rethrow_exception(first);
    }
    std::copy(made.begin(), made.end(), comms);
  });
}
TUTTI_NCCL_ALIAS(ncclCommInitAll)

TUTTI_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return initResult(guard("ncclCommSplit",
                          [&] {
                            // A revoked communicator may still be split (NCCL's revoke exists for this), its
                            // exchanges then bypassing the abort flag the revoke set.
                            checkComm("ncclCommSplit", comm);
                            const bool revoked = comm->error.revoked.load();
                            if (revoked) {
                              checkShrinkable(comm);
                              if (comm->lifecycle.initThread.joinable())
                                comm->lifecycle.initThread.join();  // it has ended
                            } else {
                              checkUsableComm("ncclCommSplit", comm);
                            }
                            if (newcomm == nullptr)
                              throw Error(ErrorCode::InvalidArgument, "ncclCommSplit: newcomm is NULL");
                            *newcomm = nullptr;
                            if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
                              throw Error(ErrorCode::InvalidArgument, "ncclCommSplit: " + comm->where() + ": color " +
                                                                          std::to_string(color) +
                                                                          " is negative and not NCCL_SPLIT_NOCOLOR");
                            CommConfig c = config ? readConfig(config, "ncclCommSplit") : comm->identity.config;
                            // Everyone's (color, key); the new rank 0 of each color makes the new id, on a root
                            // of its own even under NCCL_COMM_ID (which names the user's one root, as in NCCL,
                            // whose split never meets there).
                            struct Entry {
                              int32_t color, key;
                              ncclUniqueId id;
                            };
                            std::vector<Entry> all(size_t(comm->identity.nranks));
                            all[size_t(comm->identity.rank)] = Entry{color, key, {}};
                            auto exchange = [&](uint32_t round) {
                              if (revoked)
                                allGatherRevoked(comm, all.data(), sizeof(Entry), round);
                              else
                                comm->identity.bootstrap->allGather(all.data(), sizeof(Entry));
                            };
                            exchange(0);
                            std::vector<int> members;
                            for (int r = 0; r < comm->identity.nranks; r++)
                              if (all[size_t(r)].color == color) members.push_back(r);
                            std::stable_sort(members.begin(), members.end(),
                                             [&](int a, int b) { return all[size_t(a)].key < all[size_t(b)].key; });
                            bool leader = color != NCCL_SPLIT_NOCOLOR && members.front() == comm->identity.rank;
                            if (leader) bootstrap::newUniqueId(&all[size_t(comm->identity.rank)].id);
                            exchange(1);
                            if (color == NCCL_SPLIT_NOCOLOR) return;
                            int newRank =
                                int(std::find(members.begin(), members.end(), comm->identity.rank) - members.begin());
                            createComm("ncclCommSplit", newcomm, &all[size_t(members.front())].id, 1,
                                       int(members.size()), newRank, comm->identity.device, c);
                          }),
                    newcomm);
}
TUTTI_NCCL_ALIAS(ncclCommSplit)

// The survivors (every rank not excluded, all passing the same list) meet without the excluded
// ranks (runtime/comm/comm_shrink.h) and make a fresh communicator, renumbered in parent rank order.
// The parent may have failed or been revoked: the meeting needs only its table of listeners.
// NCCL_SHRINK_DEFAULT leaves the parent's operations alone; NCCL_SHRINK_ABORT stops them first.
// Either way the parent stays for the caller to destroy or abort. The child never shares the
// parent's resources (shrinkShare is accepted and has no effect).
TUTTI_API ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                       ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return initResult(
      guard("ncclCommShrink",
            [&] {
              checkComm("ncclCommShrink", comm);
              if (newcomm == nullptr)
                throw Error(ErrorCode::InvalidArgument, "ncclCommShrink: " + comm->where() + ": newcomm is NULL");
              *newcomm = nullptr;
              if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
                throw Error(ErrorCode::InvalidArgument,
                            "ncclCommShrink: " + comm->where() + ": shrinkFlags " + std::to_string(shrinkFlags) +
                                " is neither NCCL_SHRINK_DEFAULT (0) nor NCCL_SHRINK_ABORT (1)");
              std::vector<int> survivors = shrinkSurvivors(comm, excludeRanksList, excludeRanksCount);
              checkShrinkable(comm);
              if (comm->lifecycle.initThread.joinable()) comm->lifecycle.initThread.join();  // it has ended
              CommConfig c = config ? readConfig(config, "ncclCommShrink") : comm->identity.config;
              if (shrinkFlags == NCCL_SHRINK_ABORT) {
                abortForShrink(comm);
                quiesce(comm);
              }
              ncclUniqueId id = meetSurvivors(comm, survivors);
              int newRank = int(std::find(survivors.begin(), survivors.end(), comm->identity.rank) - survivors.begin());
              try {
                createComm("ncclCommShrink", newcomm, &id, 1, int(survivors.size()), newRank, comm->identity.device, c);
              } catch (const Error& e) {  // the join names ranks of the new communicator
                throw Error(e.code(), e.message() + " (" + describeShrunkRanks(survivors) + ")");
              }
            }),
      newcomm);
}
TUTTI_NCCL_ALIAS(ncclCommShrink)

// A blocking communicator's revoke returns once its operations have stopped; a nonblocking one's
// returns ncclInProgress until then (ncclCommGetAsyncError says when).
TUTTI_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  ncclResult_t result = guard("ncclCommRevoke", [&] {
    checkComm("ncclCommRevoke", comm);
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      throw Error(ErrorCode::InvalidArgument, "ncclCommRevoke: " + comm->where() + ": revokeFlags " +
                                                  std::to_string(revokeFlags) +
                                                  " is not NCCL_REVOKE_DEFAULT (0), the only value defined");
    if (comm->error.asyncError.load() == ncclInProgress)
      throw Error(ErrorCode::InvalidUsage,
                  "ncclCommRevoke: " + comm->where() +
                      ": the nonblocking init has not finished (poll ncclCommGetAsyncError, or abort it)");
    revokeComm(comm);
    if (comm->identity.config.blocking) quiesce(comm);
  });
  if (result == ncclSuccess && commBusy(comm)) return ncclInProgress;
  return result;
}
TUTTI_NCCL_ALIAS(ncclCommRevoke)

TUTTI_API ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  return guard("ncclCommFinalize", [&] {
    checkComm("ncclCommFinalize", comm);
    if (comm->error.revoked.load())
      throw Error(ErrorCode::InvalidUsage,
                  "ncclCommFinalize: " + comm->where() +
                      ": the communicator was revoked (ncclCommRevoke); end it with ncclCommDestroy");
    quiesce(comm);
    comm->lifecycle.finalized = true;
  });
}
TUTTI_NCCL_ALIAS(ncclCommFinalize)

TUTTI_API ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  return guard("ncclCommDestroy", [&] {
    checkComm("ncclCommDestroy", comm);
    quiesce(comm);
    unregisterComm(comm);
    delete comm;
  });
}
TUTTI_NCCL_ALIAS(ncclCommDestroy)

TUTTI_API ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return guard("ncclCommAbort", [&] {
    checkComm("ncclCommAbort", comm);
    unregisterComm(comm);
    // Peers still inside an operation with this rank would otherwise wait out their own timeout:
    // a healthy communicator's abort is news to them (a failed one's cause went out already).
    if (comm->error.asyncError.load() == ncclSuccess && comm->identity.bootstrap && comm->identity.nranks > 1)
      comm->identity.bootstrap->broadcastNotice(kAbortNotice);
    comm->fail(Error(ErrorCode::Aborted, comm->where() + ": aborted by ncclCommAbort"));
    quiesce(comm);
    delete comm;
  });
}
TUTTI_NCCL_ALIAS(ncclCommAbort)

TUTTI_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guard("ncclCommGetAsyncError", [&] {
    checkComm("ncclCommGetAsyncError", comm);
    if (asyncError == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    if (comm->error.revoked.load()) {  // NCCL's rule: in progress until quiescent, then success
      *asyncError = commBusy(comm) ? ncclInProgress : ncclSuccess;
      return;
    }
    if (comm->error.asyncError.load() == ncclSuccess) comm->noticeExecutorFault();
    *asyncError = ncclResult_t(comm->error.asyncError.load());
    if (*asyncError != ncclSuccess && *asyncError != ncclInProgress) {
      std::lock_guard<std::mutex> lock(comm->error.mutex);
      setLastError(comm->error.message);
    }
  });
}
TUTTI_NCCL_ALIAS(ncclCommGetAsyncError)

TUTTI_API ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return guard("ncclCommCount", [&] {
    checkComm("ncclCommCount", comm);
    if (count == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->identity.nranks;
  });
}
TUTTI_NCCL_ALIAS(ncclCommCount)

TUTTI_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guard("ncclCommCuDevice", [&] {
    checkComm("ncclCommCuDevice", comm);
    if (device == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = comm->identity.device;
  });
}
TUTTI_NCCL_ALIAS(ncclCommCuDevice)

TUTTI_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guard("ncclCommUserRank", [&] {
    checkComm("ncclCommUserRank", comm);
    if (rank == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->identity.rank;
  });
}
TUTTI_NCCL_ALIAS(ncclCommUserRank)

// ---- Growing a communicator (NCCL 2.30) ----

// The id that ncclCommGrow's new ranks join with: a fresh root, as ncclGetUniqueId makes one
// (NCCL_COMM_ID is not used: a grow meets apart from the communicator's own root). NCCL allows one
// unconsumed id per communicator: the grow that takes it allows the next.
TUTTI_API ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return guard("ncclCommGetUniqueId", [&] {
    checkUsableComm("ncclCommGetUniqueId", comm);
    if (uniqueId == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclCommGetUniqueId: " + comm->where() + ": uniqueId is NULL");
    if (comm->lifecycle.growIdIssued.exchange(true))
      throw Error(ErrorCode::InvalidUsage, "ncclCommGetUniqueId: " + comm->where() +
                                               ": the id of the previous ncclCommGetUniqueId has not been consumed by "
                                               "ncclCommGrow (one at a time per communicator)");
    try {
      bootstrap::newUniqueId(uniqueId);
    } catch (...) {
      comm->lifecycle.growIdIssued.store(false);
      throw;
    }
    std::lock_guard<std::mutex> lock(comm->lifecycle.growMutex);
    comm->lifecycle.growId = *uniqueId;
  });
}
TUTTI_NCCL_ALIAS(ncclCommGetUniqueId)

namespace {

// What each existing rank brings to a grow, gathered over the parent's bootstrap so that every
// existing rank decides alike: a problem of one rank's arguments fails the grow on all of them.
struct GrowEntry {
  int32_t nRanks;
  int32_t hasId;
  ncclUniqueId id;
  char problem[200];  // "" when its arguments are sound
};

bool sameId(const ncclUniqueId& a, const ncclUniqueId& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The existing ranks agree on nRanks and the id (from the rank, or ranks, that pass it; NCCL's
// header has the others pass NULL, its documentation the id: either is taken; a rank that made
// the id and passes NULL brings the id it made), then join the grown communicator keeping their
// ranks. Throws naming the rank at fault.
void growExisting(ncclComm* comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                  ncclConfig_t* config) {
  const std::string where = "ncclCommGrow: " + comm->where();
  const int n = comm->identity.nranks, me = comm->identity.rank;
  std::string problem;
  CommConfig c = comm->identity.config;
  if (rank != -1) {
    problem = "rank is " + std::to_string(rank) + "; ranks of the existing communicator pass -1";
  } else if (nRanks <= n) {
    problem =
        "nRanks " + std::to_string(nRanks) + " does not exceed the communicator's " + std::to_string(n) + " ranks";
  } else if (uniqueId != nullptr) {
    std::lock_guard<std::mutex> lock(comm->lifecycle.growMutex);
    for (const ncclUniqueId& used : comm->lifecycle.consumedGrowIds)
      if (sameId(used, *uniqueId))
        problem =
            "its id was consumed by an earlier ncclCommGrow of this communicator (an id serves one grow; make "
            "another with ncclCommGetUniqueId)";
  }
  if (problem.empty() && config != nullptr) {
    try {
      c = readConfig(config, "ncclCommGrow");
    } catch (const Error& e) {
      problem = e.message();
    }
  }
  std::vector<GrowEntry> all(static_cast<size_t>(n));
  GrowEntry& mine = all[size_t(me)];
  mine.nRanks = nRanks;
  mine.hasId = uniqueId != nullptr ? 1 : 0;
  if (uniqueId != nullptr) {
    mine.id = *uniqueId;
  } else if (comm->lifecycle.growIdIssued.load()) {
    std::lock_guard<std::mutex> lock(comm->lifecycle.growMutex);
    mine.id = comm->lifecycle.growId;
    mine.hasId = 1;
  }
  std::snprintf(mine.problem, sizeof mine.problem, "%s", problem.c_str());
  if (n > 1) {
    try {
      comm->identity.bootstrap->allGather(all.data(), sizeof(GrowEntry));
    } catch (const Error& e) {
      throw Error(e.code(), where + ": exchanging nRanks and the id with the other existing ranks: " + e.message() +
                                " (every rank of the communicator must call ncclCommGrow)");
    }
  }
  // The first rank in order with a problem, or a disagreement, is reported by every rank alike.
  int idFrom = -1;
  for (int r = 0; r < n; r++) {
    const GrowEntry& e = all[size_t(r)];
    const std::string who = r == me ? "this rank" : comm->describePeer(r);
    if (e.problem[0] != '\0')
      throw Error(ErrorCode::InvalidArgument,
                  where + ": " + who + " (rank " + std::to_string(r) +
                      " of the existing ranks): " + std::string(e.problem, strnlen(e.problem, sizeof e.problem)));
    if (e.nRanks != all[0].nRanks)
      throw Error(ErrorCode::InvalidArgument,
                  where + ": existing rank 0 grows to nRanks " + std::to_string(all[0].nRanks) + ", existing rank " +
                      std::to_string(r) + " to " + std::to_string(e.nRanks) + "; every rank passes the same nRanks");
    if (e.hasId == 0) continue;
    if (idFrom >= 0 && !sameId(e.id, all[size_t(idFrom)].id))
      throw Error(ErrorCode::InvalidArgument, where + ": existing ranks " + std::to_string(idFrom) + " and " +
                                                  std::to_string(r) +
                                                  " pass different ids; one id from ncclCommGetUniqueId serves a grow");
    if (idFrom < 0) idFrom = r;
  }
  if (idFrom < 0)
    throw Error(ErrorCode::InvalidArgument,
                where +
                    ": no existing rank passed an id or made one; one existing rank calls "
                    "ncclCommGetUniqueId, passes the id to ncclCommGrow and gives it to the new ranks");
  const ncclUniqueId id = all[size_t(idFrom)].id;
  {
    // Its root serves one rendezvous, whatever comes of it.
    std::lock_guard<std::mutex> lock(comm->lifecycle.growMutex);
    comm->lifecycle.consumedGrowIds.push_back(id);
  }
  comm->lifecycle.growIdIssued.store(false);
  createComm("ncclCommGrow", newcomm, &id, 1, nRanks, me, comm->identity.device, c);
}

}  // namespace

// Existing ranks pass the communicator and rank -1 and keep their ranks; new ranks pass no
// communicator, the id and their rank (from the old size up). The parent is left as it was.
TUTTI_API ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                     ncclComm_t* newcomm, ncclConfig_t* config) {
  return initResult(
      guard("ncclCommGrow",
            [&] {
              if (newcomm == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommGrow: newcomm is NULL");
              *newcomm = nullptr;
              if (comm != nullptr) {
                checkUsableComm("ncclCommGrow", comm);
                growExisting(comm, nRanks, uniqueId, rank, newcomm, config);
                return;
              }
              const std::string where =
                  "ncclCommGrow: rank " + std::to_string(rank) + " of " + std::to_string(nRanks) + " (a new rank)";
              if (uniqueId == nullptr)
                throw Error(ErrorCode::InvalidArgument,
                            where + ": a new rank (comm NULL) needs the id from ncclCommGetUniqueId");
              if (nRanks < 1 || rank < 0 || rank >= nRanks)
                throw Error(ErrorCode::InvalidArgument, "ncclCommGrow: rank " + std::to_string(rank) +
                                                            " is out of range for nRanks " + std::to_string(nRanks));
              CommConfig c = readConfig(config, "ncclCommGrow");
              try {
                createComm("ncclCommGrow", newcomm, uniqueId, 1, nRanks, rank, kCurrentDevice, c);
              } catch (const Error& e) {
                throw Error(e.code(), where + ": " + e.message() + " (an id from ncclCommGetUniqueId serves one grow)");
              }
            }),
      newcomm);
}
TUTTI_NCCL_ALIAS(ncclCommGrow)
