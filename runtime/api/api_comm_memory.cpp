// Entry points over a communicator's memory (NCCL 2.30): suspend and resume, which release and
// make again what the communicator makes on demand, and its memory statistics
// (runtime/comm/comm_suspend.h says what each covers).
#include <cstdint>
#include <string>

#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_suspend.h"

using namespace tutti;

// Collective: every rank suspends. flags 0 stops the communicator's use without releasing memory.
TUTTI_API ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  return guard("ncclCommSuspend", [&] {
    checkUsableComm("ncclCommSuspend", comm);
    if ((flags & ~NCCL_SUSPEND_MEM) != 0)
      throw Error(ErrorCode::InvalidArgument, "ncclCommSuspend: " + comm->where() + ": flags " + std::to_string(flags) +
                                                  " has bits other than NCCL_SUSPEND_MEM (1)");
    suspendComm(comm, flags);
  });
}
TUTTI_NCCL_ALIAS(ncclCommSuspend)

// Collective, as the suspend. A failed communicator is refused as any other call refuses it.
TUTTI_API ncclResult_t pncclCommResume(ncclComm_t comm) {
  return guard("ncclCommResume", [&] {
    checkComm("ncclCommResume", comm);
    if (!comm->lifecycle.suspended.load())
      throw Error(ErrorCode::InvalidUsage,
                  "ncclCommResume: " + comm->where() + ": the communicator is not suspended (ncclCommSuspend first)");
    comm->noticeExecutorFault();
    // A failed or revoked communicator is refused with its cause (the check says "suspended" only
    // of a healthy one).
    if (comm->error.asyncError.load() != ncclSuccess || comm->error.revoked.load())
      checkUsableComm("ncclCommResume", comm);
    resumeComm(comm);
  });
}
TUTTI_NCCL_ALIAS(ncclCommResume)

// NCCL's kinds: what a suspend releases (Suspend), what stays (Persist), their sum (Total), and
// whether the memory is released now (Suspended: 0 or 1). Off a GPU the bytes are the host
// memory the communicator holds, counted where it is allocated.
TUTTI_API ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return guard("ncclCommMemStats", [&] {
    checkComm("ncclCommMemStats", comm);
    const std::string where = "ncclCommMemStats: " + comm->where();
    if (value == nullptr) throw Error(ErrorCode::InvalidArgument, where + ": value is NULL");
    if (comm->error.asyncError.load() == ncclInProgress)
      throw Error(ErrorCode::InvalidUsage,
                  where + ": the nonblocking init has not finished (poll ncclCommGetAsyncError until ncclSuccess)");
    const CommMemoryFigures figures = memoryFigures(comm);
    switch (stat) {
      case ncclStatGpuMemSuspend: *value = figures.suspendable; return;
      case ncclStatGpuMemSuspended: *value = figures.suspended ? 1 : 0; return;
      case ncclStatGpuMemPersist: *value = figures.persistent; return;
      case ncclStatGpuMemTotal: *value = figures.suspendable + figures.persistent; return;
      default:
        throw Error(ErrorCode::InvalidArgument,
                    where + ": unknown statistic " + std::to_string(int(stat)) + " (ncclCommMemStat_t is 0 to 3)");
    }
  });
}
TUTTI_NCCL_ALIAS(ncclCommMemStats)
