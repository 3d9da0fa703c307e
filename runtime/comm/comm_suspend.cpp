// ncclCommSuspend's and ncclCommResume's work on a communicator, and its memory figures
// (comm_suspend.h).
#include "runtime/comm/comm_suspend.h"

#include <string>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_init.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/comm/counted_memory.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/group.h"
#include "runtime/launch/launch_cache.h"
#include "runtime/launch/scratch_pool.h"
#include "transports/segment.h"

namespace tutti {

namespace {

// Every rank's barrier; a failure (a rank that never calls, a peer gone, an abort) fails the
// communicator, so that every rank learns of it, and names what it waited for.
void meet(ncclComm* comm, const char* operation, const char* why) {
  if (comm->identity.nranks < 2) return;
  try {
    comm->identity.bootstrap->barrier();
  } catch (const Error& e) {
    Error failure(e.code() == ErrorCode::Aborted ? ErrorCode::Aborted : ErrorCode::Remote,
                  std::string(operation) + ": " + comm->where() + ": waiting for every rank " + why + ": " +
                      e.message() + " (every rank of the communicator must call " + operation + ")");
    comm->fail(failure);
    throw failure;
  }
}

// The memory made again on demand: cached launches and plans (which point into FIFOs and
// scratch), the connections, the idle scratch blocks.
void releaseMemory(ncclComm* comm) {
  for (const auto& transport : comm->links.transports) transport->drainSends(comm->settings.timeoutSeconds);
  if (comm->executor.launchCache) {
    std::vector<LaunchCache::Idle> idle;
    {
      std::lock_guard<std::mutex> lock(comm->executor.launchCache->mutex);
      idle.swap(comm->executor.launchCache->idle);
    }
  }
  comm->planning.planCache.clear();
  comm->links.connections.clear();
  comm->executor.scratch->releaseIdle();
}

}  // namespace

void suspendComm(ncclComm* comm, int flags) {
  const std::string where = "ncclCommSuspend: " + comm->where();
  if (groupDepth() > 0)
    throw Error(ErrorCode::InvalidUsage,
                where +
                    ": called between ncclGroupStart and ncclGroupEnd, which tutti does not support yet; "
                    "suspend outside a group");
  const int queued = comm->executor.pendingStreamJobs.load(), running = comm->executor.activeLaunches.load();
  if (queued > 0 || running > 0)
    throw Error(ErrorCode::InvalidUsage, where + ": " + std::to_string(queued + running) +
                                             " operation(s) are still queued or running on its streams; synchronize "
                                             "them before suspending (the communicator was not suspended)");
  meet(comm, "ncclCommSuspend", "to suspend (none may still use a FIFO)");
  comm->lifecycle.suspended.store(true);
  if ((flags & NCCL_SUSPEND_MEM) == 0) return;
  releaseMemory(comm);
  comm->lifecycle.memoryReleased.store(true);
  // A FIFO between two ranks goes with the later of its ends: once every rank is past this
  // barrier, none holds one, and the figures each reports are final.
  meet(comm, "ncclCommSuspend", "to release its FIFOs");
  TUTTI_INFO(log::Init, "%s: suspended, memory released (%llu bytes held)", comm->where().c_str(),
             static_cast<unsigned long long>(memoryFigures(comm).suspendable));
}

void resumeComm(ncclComm* comm) {
  if (!comm->lifecycle.suspended.load())
    throw Error(ErrorCode::InvalidUsage,
                "ncclCommResume: " + comm->where() + ": the communicator is not suspended (ncclCommSuspend first)");
  // Every rank has released its FIFOs before any makes them again.
  meet(comm, "ncclCommResume", "to resume");
  if (comm->lifecycle.memoryReleased.load()) {
    try {
      ensureConnections(comm, ringConnections(comm));
    } catch (const Error& e) {
      Error failure(e.code(),
                    "ncclCommResume: " + comm->where() + ": making the ring connections again: " + e.message());
      comm->fail(failure);
      throw failure;
    }
    // As at init: no rank leaves (and may destroy its end) while a peer still attaches.
    meet(comm, "ncclCommResume", "to finish its connections");
    comm->lifecycle.memoryReleased.store(false);
  }
  comm->lifecycle.suspended.store(false);
}

CommMemoryFigures memoryFigures(const ncclComm* comm) {
  CommMemoryFigures figures;
  if (comm->links.fifoCounter) figures.suspendable += comm->links.fifoCounter->bytes();
  if (comm->executor.scratch) figures.suspendable += comm->executor.scratch->totalBytes();
  if (comm->control.ownSegment) figures.persistent += comm->control.ownSegment->bytes();
  figures.suspended = comm->lifecycle.memoryReleased.load();
  return figures;
}

}  // namespace tutti
