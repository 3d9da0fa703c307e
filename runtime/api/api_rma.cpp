// Entry points of one-sided communication (NCCL 2.29): ncclWinGetUserPtr works; put, signal and
// wait check their arguments as the working calls will, then are refused by name until tutti
// carries them.
#include <cstdint>
#include <string>

#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"

using namespace tutti;

namespace {

// Signal indices and contexts a communicator allows: one of each, unless its config asks for
// more contexts (numRmaCtx, since 2.29).
void checkSignalSlot(const char* operation, const ncclComm* comm, int sigIdx, int ctx, const std::string& what) {
  const int contexts = comm->identity.config.numRmaCtx.value_or(1);
  if (sigIdx != 0)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": " + what + "sigIdx " +
                                                std::to_string(sigIdx) +
                                                " is beyond the communicator's signals (only 0)");
  if (contexts == 0)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() +
                                                ": one-sided operations are off (ncclConfig_t.numRmaCtx is 0)");
  if (ctx < 0 || ctx >= contexts)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": " + what + "ctx " +
                                                std::to_string(ctx) + " is beyond the communicator's contexts (0.." +
                                                std::to_string(contexts - 1) + ", ncclConfig_t.numRmaCtx)");
}

void checkFlags(const char* operation, const ncclComm* comm, unsigned int flags) {
  if (flags != 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": " + comm->where() + ": flags " + std::to_string(flags) + " must be 0");
}

[[noreturn]] void notYet(const char* operation, const ncclComm* comm) {
  throw Error(ErrorCode::InvalidUsage, std::string(operation) + " is not supported by tutti yet (" + comm->where() +
                                           "; one-sided communication is not implemented)");
}

}  // namespace

TUTTI_API ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return guard("ncclWinGetUserPtr", [&] {
    checkComm("ncclWinGetUserPtr", comm);
    const std::string where = "ncclWinGetUserPtr: " + comm->where();
    if (win == nullptr) throw Error(ErrorCode::InvalidArgument, where + ": win is NULL");
    if (outUserPtr == nullptr) throw Error(ErrorCode::InvalidArgument, where + ": outUserPtr is NULL");
    // A window is a registration (api_misc.cpp): its handle names the range registered.
    *outUserPtr = comm->links.registrations.range(win, where).first;
  });
}
TUTTI_NCCL_ALIAS(ncclWinGetUserPtr)

TUTTI_API ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                      ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                      unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return guard("ncclPutSignal", [&] {
    const char* op = "ncclPutSignal";
    checkUsableComm(op, comm);
    checkType(op, comm, datatype);
    checkRank(op, comm, peer, "peer");
    if (peerWin == nullptr)
      throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() + ": peerWin is NULL");
    // A window is registered collectively, so this rank holds its own handle of it: one that is not
    // this communicator's registration is another communicator's window, or none.
    comm->links.registrations.range(peerWin, std::string(op) + ": " + comm->where() + ": peerWin");
    checkSignalSlot(op, comm, sigIdx, ctx, "");
    checkFlags(op, comm, flags);
    checkBuffer(op, comm, localbuff, count, kern::dtypeSize(datatype), "localbuff");
    checkStream(op, comm, stream);
    (void)peerWinOffset;  // checked against the peer's window size once puts are carried
    notYet(op, comm);
  });
}
TUTTI_NCCL_ALIAS(ncclPutSignal)

TUTTI_API ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                   cudaStream_t stream) {
  return guard("ncclSignal", [&] {
    const char* op = "ncclSignal";
    checkUsableComm(op, comm);
    checkRank(op, comm, peer, "peer");
    checkSignalSlot(op, comm, sigIdx, ctx, "");
    checkFlags(op, comm, flags);
    checkStream(op, comm, stream);
    notYet(op, comm);
  });
}
TUTTI_NCCL_ALIAS(ncclSignal)

TUTTI_API ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                       cudaStream_t stream) {
  return guard("ncclWaitSignal", [&] {
    const char* op = "ncclWaitSignal";
    checkUsableComm(op, comm);
    if (nDesc < 0 || (nDesc > 0 && signalDescs == nullptr))
      throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() + ": nDesc " +
                                                  std::to_string(nDesc) + " with signalDescs " +
                                                  (signalDescs == nullptr ? "NULL" : "set"));
    for (int i = 0; i < nDesc; i++) {
      const ncclWaitSignalDesc_t& desc = signalDescs[i];
      const std::string what = "signalDescs[" + std::to_string(i) + "]: ";
      checkRank(op, comm, desc.peer, (what + "peer").c_str());
      if (desc.opCnt < 0)
        throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() + ": " + what + "opCnt " +
                                                    std::to_string(desc.opCnt) + " is negative");
      checkSignalSlot(op, comm, desc.sigIdx, desc.ctx, what);
    }
    checkStream(op, comm, stream);
    notYet(op, comm);
  });
}
TUTTI_NCCL_ALIAS(ncclWaitSignal)
