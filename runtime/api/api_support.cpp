// The C boundary's shared parts: error mapping, the thread's last error, and argument checks.
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_registry.h"
#include "runtime/launch/group.h"

namespace tutti {
namespace {
thread_local std::string tLastError;
}

ncclResult_t toNcclResult(ErrorCode code) {
  switch (code) {
    case ErrorCode::Internal: return ncclInternalError;
    case ErrorCode::System: return ncclSystemError;
    case ErrorCode::InvalidArgument: return ncclInvalidArgument;
    case ErrorCode::InvalidUsage: return ncclInvalidUsage;
    case ErrorCode::Remote: return ncclRemoteError;
    case ErrorCode::Timeout: return ncclRemoteError;  // a peer that never came or stopped moving
    case ErrorCode::Aborted: return ncclSystemError;
  }
  return ncclInternalError;
}

void setLastError(const std::string& message) { tLastError = message; }
const char* lastError() { return tLastError.c_str(); }

ncclResult_t failCall(const char* operation, const Error& error) {
  std::string message = error.message();
  if (message.rfind(operation, 0) != 0) message = std::string(operation) + ": " + message;
  setLastError(message);
  TUTTI_WARN("%s", message.c_str());
  ncclResult_t result = toNcclResult(error.code());
  groupRecordError(result);
  return result;
}

void checkComm(const char* operation, const ncclComm* comm) {
  if (comm == nullptr) throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": comm is NULL");
  if (!isLiveComm(comm))
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": comm " +
                                             std::to_string(reinterpret_cast<uintptr_t>(comm)) +
                                             " is not a live communicator (destroyed, aborted, or never created)");
}

void checkUsableComm(const char* operation, ncclComm* comm) {
  checkComm(operation, comm);
  comm->noticeExecutorFault();
  int err = comm->error.asyncError.load();
  if (err == ncclInProgress)
    throw Error(ErrorCode::InvalidUsage,
                std::string(operation) + ": " + comm->where() +
                    ": the nonblocking init has not finished (poll ncclCommGetAsyncError until ncclSuccess)");
  if (comm->error.revoked.load())
    throw Error(ErrorCode::InvalidUsage,
                std::string(operation) + ": " + comm->where() +
                    ": the communicator was revoked (ncclCommRevoke); only ncclCommSplit, ncclCommShrink, "
                    "ncclCommDestroy and ncclCommAbort may use it now");
  if (comm->lifecycle.suspended.load() && err == ncclSuccess)
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": " + comm->where() +
                                             ": the communicator is suspended (ncclCommSuspend); call "
                                             "ncclCommResume on every rank before using it again");
  if (err != ncclSuccess) {
    // A peer's failure keeps its code, as NCCL returns the async error: a rank that enters its
    // next call just after a failure notice arrived sees the same ncclRemoteError as one that
    // was inside the call.
    ErrorCode code = err == ncclRemoteError ? ErrorCode::Remote : ErrorCode::InvalidUsage;
    std::lock_guard<std::mutex> lock(comm->error.mutex);
    throw Error(code, std::string(operation) + ": " + comm->where() +
                          " has failed and must be destroyed or aborted: " + comm->error.message);
  }
}

void checkType(const char* operation, const ncclComm* comm, ncclDataType_t type) {
  if (int(type) < 0 || int(type) >= ncclNumTypes || kern::dtypeSize(type) == 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": " + comm->where() + ": unknown datatype " + std::to_string(int(type)));
}

void checkOp(const char* operation, ncclComm* comm, ncclRedOp_t op, ncclDataType_t type) {
  if (int(op) >= 0 && int(op) < ncclNumOps) return;
  if (int(op) >= ncclNumOps) {
    std::lock_guard<std::mutex> lock(comm->redops.mutex);
    size_t index = size_t(op) - ncclNumOps;
    if (index < comm->redops.ops.size() && comm->redops.ops[index].live) {
      if (comm->redops.ops[index].type != type)
        throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": reduction op " +
                                                    std::to_string(int(op)) + " was made for " +
                                                    kern::dtypeName(comm->redops.ops[index].type) + ", not " +
                                                    kern::dtypeName(type));
      return;
    }
  }
  throw Error(ErrorCode::InvalidArgument,
              std::string(operation) + ": " + comm->where() + ": unknown reduction op " + std::to_string(int(op)));
}

void checkRank(const char* operation, const ncclComm* comm, int rank, const char* what) {
  if (rank < 0 || rank >= comm->identity.nranks)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": " + what + " " +
                                                std::to_string(rank) + " is out of range (0.." +
                                                std::to_string(comm->identity.nranks - 1) + ")");
}

void checkBuffer(const char* operation, const ncclComm* comm, const void* buffer, size_t count, size_t eltSize,
                 const char* what) {
  if (buffer == nullptr && count > 0)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": " + what +
                                                " is NULL with count " + std::to_string(count));
  const size_t bytes = count * eltSize;
  if (bytes == 0) return;
  std::string problem = comm->executor.backend->bufferProblem(buffer, bytes);
  if (!problem.empty())
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": " + comm->where() + ": " + what + " " + problem);
}

void checkStream(const char* operation, const ncclComm* comm, cudaStream_t stream) {
  std::string problem = comm->executor.backend->streamProblem(stream);
  if (!problem.empty())
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": " + problem);
  problem = comm->executor.backend->captureProblem(stream);
  if (!problem.empty())
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": " + comm->where() + ": " + problem);
}

}  // namespace tutti
