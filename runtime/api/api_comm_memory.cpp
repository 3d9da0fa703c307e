// Entry points over a communicator's memory (NCCL 2.30): suspend and resume (refused until tutti
// can release and restore FIFOs, scratch and staging), and the memory statistics it can give.
#include <cstdint>
#include <string>

#include "runtime/api/api.h"
#include "runtime/comm/comm.h"

using namespace tutti;

namespace {

[[noreturn]] void notYet(const char* operation, const ncclComm* comm) {
  throw Error(ErrorCode::InvalidUsage, std::string(operation) + " is not supported by tutti yet (" + comm->where() +
                                           "; the communicator cannot release and restore its memory)");
}

}  // namespace

TUTTI_API ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  return guard("ncclCommSuspend", [&] {
    checkUsableComm("ncclCommSuspend", comm);
    if ((flags & ~NCCL_SUSPEND_MEM) != 0)
      throw Error(ErrorCode::InvalidArgument, "ncclCommSuspend: " + comm->where() + ": flags " + std::to_string(flags) +
                                                  " has bits other than NCCL_SUSPEND_MEM (1)");
    notYet("ncclCommSuspend", comm);
  });
}
TUTTI_NCCL_ALIAS(ncclCommSuspend)

TUTTI_API ncclResult_t pncclCommResume(ncclComm_t comm) {
  return guard("ncclCommResume", [&] {
    checkComm("ncclCommResume", comm);
    notYet("ncclCommResume", comm);
  });
}
TUTTI_NCCL_ALIAS(ncclCommResume)

// Suspension is a figure tutti knows exactly (never, since ncclCommSuspend is refused). The byte
// counts need every allocation a communicator holds (FIFOs, scratch, staging, the backend's own)
// counted by the backend, which tutti does not do yet: rather than a partial sum passed off as
// the whole, they are refused by name.
TUTTI_API ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return guard("ncclCommMemStats", [&] {
    checkComm("ncclCommMemStats", comm);
    const std::string where = "ncclCommMemStats: " + comm->where();
    if (value == nullptr) throw Error(ErrorCode::InvalidArgument, where + ": value is NULL");
    const char* name = nullptr;
    switch (stat) {
      case ncclStatGpuMemSuspended: *value = 0; return;
      case ncclStatGpuMemSuspend: name = "ncclStatGpuMemSuspend"; break;
      case ncclStatGpuMemPersist: name = "ncclStatGpuMemPersist"; break;
      case ncclStatGpuMemTotal: name = "ncclStatGpuMemTotal"; break;
      default:
        throw Error(ErrorCode::InvalidArgument,
                    where + ": unknown statistic " + std::to_string(int(stat)) + " (ncclCommMemStat_t is 0 to 3)");
    }
    throw Error(ErrorCode::InvalidUsage,
                where + ": " + name +
                    " is not supported by tutti yet (the communicator's allocations are not counted; "
                    "ncclStatGpuMemSuspended is)");
  });
}
TUTTI_NCCL_ALIAS(ncclCommMemStats)
