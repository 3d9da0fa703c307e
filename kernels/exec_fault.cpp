// The words for an executor's fault (exec_fault.h).
#include "kernels/exec_fault.h"

#include "kernels/host_reduce.h"
#include "kernels/wait_slot.h"

namespace tutti::kern {

WaitRecord waitRecordOf(const ExecFault& f) {
  WaitRecord r;
  r.what = f.peer < 0              ? WaitFor::Nothing
           : f.waitingForData == 2 ? WaitFor::DirectRead
           : f.waitingForData      ? WaitFor::Data
                                   : WaitFor::Space;
  r.peer = f.peer;
  r.step = plan::Op(f.step);
  r.channel = f.channel;
  r.opName = plan::collTitle(plan::Coll(f.coll));
  r.opSeq = f.opSeq;
  r.tile = f.tile;
  r.ntiles = f.ntiles;
  return r;
}

namespace {

const char* redKindName(uint32_t kind) {
  switch (RedKind(kind)) {
    case RedKind::Sum: return "sum";
    case RedKind::Prod: return "prod";
    case RedKind::Max: return "max";
    case RedKind::Min: return "min";
    case RedKind::PreMulSum: return "premulsum or avg";
    case RedKind::SumPostDiv: return "avg";
  }
  return "an unknown reduction";
}

}  // namespace

std::string describeCall(uint64_t signature, uint64_t count) {
  const plan::Coll coll = plan::Coll(signatureColl(signature));
  if ((coll == plan::Coll::Send || coll == plan::Coll::Recv) && signatureRoot(signature) == kPartOfAllToAllv)
    return "ncclAllToAllv #" + std::to_string(signatureSeq(signature)) + " with a block of " + std::to_string(count) +
           " bytes between the two";
  if (coll == plan::Coll::Send || coll == plan::Coll::Recv)
    return "a send or receive of " + std::to_string(count) + " bytes";
  std::string s = std::string(plan::collTitle(coll)) + "(count " + std::to_string(count) + ", " +
                  dtypeName(ncclDataType_t(signatureDtype(signature)));
  if (coll == plan::Coll::AllReduce || coll == plan::Coll::ReduceScatter || coll == plan::Coll::Reduce)
    s += std::string(", ") + redKindName(signatureRedKind(signature));
  if (plan::rootedColl(coll)) s += ", root " + std::to_string(signatureRoot(signature));
  return s + ") as collective #" + std::to_string(signatureSeq(signature));
}

std::string describeCallMismatch(const std::string& peer, uint64_t theirs, uint64_t theirCount, int rank, uint64_t ours,
                                 uint64_t ourCount) {
  return peer + " called " + describeCall(theirs, theirCount) + " where rank " + std::to_string(rank) + " called " +
         describeCall(ours, ourCount) + " (every rank must make the same calls in the same order)";
}

std::string describeFault(const ExecFault& f, int rank, const std::function<std::string(int)>& peerName,
                          double timeoutSeconds) {
  const std::string op = std::string(plan::collTitle(plan::Coll(f.coll))) + " #" + std::to_string(f.opSeq);
  const std::string me = "rank " + std::to_string(rank);
  switch (Fault(f.fault)) {
    case Fault::None: return op + ": no fault";
    case Fault::SizeMismatch:
      return op + ": " + me + " received " + std::to_string(f.got) + " bytes from " + peerName(f.peer) +
             " where it expected " + std::to_string(f.expected) +
             " (do all ranks make the same calls, with the same count, type and root?)";
    case Fault::PartsMismatch:
      return op + ": " + me + " received a message of " +
             (f.got == 0 ? std::string("one step (not joined)") : std::to_string(f.got) + " joined steps") + " from " +
             peerName(f.peer) + " where its plan joins " + std::to_string(f.expected) +
             " steps into one (do all ranks run the same algorithm, with the same count and type?)";
    case Fault::SlotOverflow:
      return op + ": " + me + " joins steps for " + peerName(f.peer) + " into a message of " + std::to_string(f.got) +
             " bytes, larger than a FIFO slot (" + std::to_string(f.expected) +
             " bytes): the plan's join width and its chunk disagree";
    case Fault::Timeout:
    case Fault::Aborted: {
      const WaitRecord r = waitRecordOf(f);
      if (Fault(f.fault) == Fault::Aborted)
        return me + ": operation aborted (ncclCommAbort or an earlier fatal error)" +
               (f.peer >= 0 ? "; " + describeWaitingOp(r) + " was waiting for " + describeWaitedFor(r, peerName(f.peer))
                            : std::string());
      return describeWaitingOp(r, rank) + " is waiting for " + describeWaitedFor(r, peerName(f.peer)) +
             " and made no progress for " + std::to_string(int(timeoutSeconds)) + " s (TUTTI_TIMEOUT)";
    }
    case Fault::CallMismatch: return describeCallMismatch(peerName(f.peer), f.got, f.tile, rank, f.expected, f.ntiles);
    case Fault::BadReduction:
      return op + ": " + me + ": reduction kind " + std::to_string(f.got) + " with count " +
             std::to_string(f.expected) + " cannot be applied";
  }
  return op + ": fault " + std::to_string(f.fault);
}

ErrorCode faultCode(const ExecFault& f) {
  switch (Fault(f.fault)) {
    case Fault::Timeout: return ErrorCode::Timeout;
    case Fault::Aborted: return ErrorCode::Aborted;
    case Fault::BadReduction: return ErrorCode::InvalidArgument;
    default: return ErrorCode::InvalidUsage;
  }
}

}  // namespace tutti::kern
