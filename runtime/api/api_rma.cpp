// Entry points of one-sided communication (NCCL 2.29): ncclWinGetUserPtr, and put, signal and
// wait between the ranks of one host, checked here and carried by runtime/launch/rma.h. Targets on
// other hosts are refused by name.
#include <cstdint>
#include <string>

#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/rma.h"

using namespace tutti;

namespace {

// Signal indices and contexts a communicator allows (runtime/comm/windows.h): one of each, unless
// its config asks for more (numRmaCtx since 2.29, numRmaSig in 2.31-style configs) or turns them
// off (0). The message names the peer whose signal it is, and the limit.
void checkSignalSlot(const char* operation, const ncclComm* comm, int peer, int sigIdx, int ctx,
                     const std::string& what) {
  const int contexts = Windows::contextsAllowed(comm->identity.config);
  const int signals = Windows::signalsAllowed(comm->identity.config);
  const std::string head = std::string(operation) + ": " + comm->where() + ": " + what;
  const std::string whose = " with peer " + comm->describePeer(peer);
  if (contexts == 0)
    throw Error(ErrorCode::InvalidArgument, head + "one-sided operations are off (ncclConfig_t.numRmaCtx is 0)");
  if (signals == 0)
    throw Error(ErrorCode::InvalidArgument, head + "one-sided signals are off (ncclConfig_t.numRmaSig is 0)");
  if (ctx < 0 || ctx >= contexts)
    throw Error(ErrorCode::InvalidArgument,
                head + "ctx " + std::to_string(ctx) + whose + " is beyond the communicator's contexts (0.." +
                    std::to_string(contexts - 1) + ", ncclConfig_t.numRmaCtx " + std::to_string(contexts) + ")");
  if (sigIdx < 0 || sigIdx >= signals)
    throw Error(ErrorCode::InvalidArgument, head + "sigIdx " + std::to_string(sigIdx) + whose +
                                                " is beyond the communicator's signal indices (0.." +
                                                std::to_string(signals - 1) + ", ncclConfig_t.numRmaSig " +
                                                std::to_string(signals) + ")");
}

void checkFlags(const char* operation, const ncclComm* comm, unsigned int flags) {
  if (flags != 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": " + comm->where() + ": flags " + std::to_string(flags) + " must be 0");
}

// Signal counters are made at the first window registration (runtime/comm/windows.h).
void checkSignalsMade(const char* operation, const ncclComm* comm) {
  if (!comm->links.windows.ready())
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": " + comm->where() +
                                             ": no window has been registered on this communicator yet "
                                             "(ncclCommWindowRegister makes its signals)");
}

// Whether tutti carries one-sided operations between this rank and `peer`: ranks of one host
// (threads of one process, or processes on a backend whose memory is the host's).
void checkReachable(const char* operation, const ncclComm* comm, int peer, const std::string& what) {
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  const RankInfo& other = comm->identity.peers[size_t(peer)];
  if (other.hostHash != me.hostHash)
    throw Error(ErrorCode::InvalidUsage, std::string(operation) + ": " + comm->where() + ": " + what +
                                             comm->describePeer(peer) +
                                             " is on another host: one-sided operations between hosts are not "
                                             "supported by tutti yet");
  if (other.processToken != me.processToken &&
      comm->executor.backend->memory().memorySpace() != kern::MemorySpace::Host)
    throw Error(ErrorCode::InvalidUsage,
                std::string(operation) + ": " + comm->where() + ": " + what + comm->describePeer(peer) +
                    " is another process: one-sided operations between processes on the " +
                    comm->executor.backend->name() + " backend (device memory) are not supported by tutti yet");
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
    checkSignalSlot(op, comm, peer, sigIdx, ctx, "");
    checkFlags(op, comm, flags);
    checkBuffer(op, comm, localbuff, count, kern::dtypeSize(datatype), "localbuff");
    checkStream(op, comm, stream);
    std::shared_ptr<const WindowParts> window = comm->links.windows.find(peerWin);
    if (window == nullptr)
      throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() +
                                                  ": peerWin is a registration, not a window (ncclCommRegister's "
                                                  "handle; one-sided operations need ncclCommWindowRegister's)");
    // The peer's own part: windows may differ in size from rank to rank.
    const uint64_t windowBytes = window->bytes[size_t(peer)];
    const size_t eltSize = kern::dtypeSize(datatype);
    const bool overflows = count > SIZE_MAX / eltSize;
    const uint64_t bytes = uint64_t(count) * eltSize;
    if (overflows || peerWinOffset > windowBytes || bytes > windowBytes - peerWinOffset)
      throw Error(ErrorCode::InvalidArgument,
                  std::string(op) + ": " + comm->where() + ": a put of " + std::to_string(count) + " elements (" +
                      (overflows ? std::string("too many bytes") : std::to_string(bytes) + " bytes") + ") at offset " +
                      std::to_string(peerWinOffset) + " does not fit the window of " + comm->describePeer(peer) +
                      ", which is " + std::to_string(windowBytes) + " bytes");
    checkReachable(op, comm, peer, "peer ");
    RmaOp put;
    put.kind = RmaOp::Kind::Put;
    put.comm = comm;
    put.stream = stream;
    put.local = localbuff;
    put.count = count;
    put.type = datatype;
    put.window = std::move(window);
    put.offset = peerWinOffset;
    put.peer = peer;
    put.ctx = ctx;
    put.sigIdx = sigIdx;
    enqueueRma(std::move(put));
  });
}
TUTTI_NCCL_ALIAS(ncclPutSignal)

TUTTI_API ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                   cudaStream_t stream) {
  return guard("ncclSignal", [&] {
    const char* op = "ncclSignal";
    checkUsableComm(op, comm);
    checkRank(op, comm, peer, "peer");
    checkSignalSlot(op, comm, peer, sigIdx, ctx, "");
    checkFlags(op, comm, flags);
    checkStream(op, comm, stream);
    checkSignalsMade(op, comm);
    checkReachable(op, comm, peer, "peer ");
    RmaOp signal;
    signal.kind = RmaOp::Kind::Signal;
    signal.comm = comm;
    signal.stream = stream;
    signal.peer = peer;
    signal.ctx = ctx;
    signal.sigIdx = sigIdx;
    enqueueRma(std::move(signal));
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
      checkSignalSlot(op, comm, desc.peer, desc.sigIdx, desc.ctx, what);
    }
    checkStream(op, comm, stream);
    if (nDesc == 0) return;  // nothing to wait for
    checkSignalsMade(op, comm);
    RmaOp wait;
    wait.kind = RmaOp::Kind::Wait;
    wait.comm = comm;
    wait.stream = stream;
    for (int i = 0; i < nDesc; i++) {
      checkReachable(op, comm, signalDescs[i].peer, "signalDescs[" + std::to_string(i) + "]: peer ");
      wait.waits.push_back(signalDescs[i]);
    }
    enqueueRma(std::move(wait));
  });
}
TUTTI_NCCL_ALIAS(ncclWaitSignal)
