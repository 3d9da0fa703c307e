// A communicator's failure: recording the first error, learning of peers' failures and deaths,
// and the names and waits that messages about them give.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "base/host_identity.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "kernels/exec_fault.h"
#include "runtime/comm/comm.h"
#include "runtime/diagnostics/flight_recorder_dump.h"
#include "runtime/diagnostics/wait_diagnosis.h"

using tutti::Error;
using tutti::ErrorCode;

void ncclComm::failFromNotice(int sender, const std::string& text) {
  if (const char* afterInit = tutti::noticeSentAfterInit(text)) {
    std::lock_guard<std::mutex> lock(error.mutex);
    if (!error.initFinished) {
      if (error.deferredNotice == nullptr) {
        error.deferredNoticeFrom = sender;
        error.deferredNotice = afterInit;
      }
      return;
    }
  }
  std::string message = where() + ": " + describePeer(sender) + " failed: " + text;
  {
    std::lock_guard<std::mutex> lock(error.mutex);
    if (error.asyncError.load() == ncclInProgress) {
      if (error.noticeDuringInit.empty()) error.noticeDuringInit = message;
      error.abortFlag.store(true);
      return;
    }
    if (error.asyncError.load() != ncclSuccess) {
      if (error.peer == sender && error.code == ErrorCode::Remote) {
        error.message = message;
        error.peer = -1;
      }
      return;
    }
  }
  fail(Error(ErrorCode::Remote, message), false);
}

tutti::Error ncclComm::failInit(const Error& cause) {
  // A peer whose init failed tells every rank why (a failure notice) before it says goodbye, but
  // the notice may come over another connection than the one this rank's exchange was reading,
  // and be a moment behind its close: a closed connection is then a consequence, and the notice,
  // once it comes, is the cause and leads.
  if (cause.code() == ErrorCode::Remote) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(error.mutex);
        const int state = error.asyncError.load();
        if (!error.noticeDuringInit.empty() || (state != ncclSuccess && state != ncclInProgress)) break;
      }
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // A nonblocking init has reported ncclInProgress until now; its failure is recorded here.
  int inProgress = ncclInProgress;
  if (error.asyncError.compare_exchange_strong(inProgress, ncclSuccess)) {
    std::string notice;
    {
      std::lock_guard<std::mutex> lock(error.mutex);
      notice = error.noticeDuringInit;
    }
    if (!notice.empty()) fail(Error(ErrorCode::Remote, notice), false);
  }
  fail(cause, true);
  std::lock_guard<std::mutex> lock(error.mutex);
  if (error.asyncError.load() != ncclSuccess && error.code != ErrorCode::Aborted)
    return Error(error.code, error.message);
  return cause;
}

void ncclComm::finishInit() {
  int sender = -1;
  const char* notice = nullptr;
  {
    std::lock_guard<std::mutex> lock(error.mutex);
    error.initFinished = true;
    sender = error.deferredNoticeFrom;
    notice = error.deferredNotice;
  }
  if (notice != nullptr) failFromNotice(sender, notice);
}

void ncclComm::failFromPeerLost(int peer, const std::string& reason) {
  std::string message = where() + ": " + describePeer(peer) + " is gone: " + reason;
  // A process that ends without destroying its communicator at job end is common and harmless
  // when nothing is running; an operation in flight is what this stops (unless a notice did first).
  bool busy = executor.activeLaunches.load() > 0 || executor.pendingStreamJobs.load() > 0;
  if (busy && error.asyncError.load() == ncclSuccess)
    TUTTI_WARN("%s", message.c_str());
  else
    TUTTI_INFO(tutti::log::Init, "%s", message.c_str());
  fail(Error(ErrorCode::Remote, message), true, peer);
}

void ncclComm::fail(const Error& timeoutOrCause, bool tellPeers, int peer) {
  Error cause = timeoutOrCause;
  // A wait that timed out may wait for a rank that itself only waits: before the error is final,
  // ask along the chain (once) and put the rank at its root first (runtime/diagnostics/wait_diagnosis.h).
  std::unique_lock<std::mutex> diagnosing(error.diagnosisMutex, std::defer_lock);
  if (cause.code() == ErrorCode::Timeout && identity.bootstrap && error.asyncError.load() == ncclSuccess) {
    diagnosing.lock();
    if (error.asyncError.load() == ncclSuccess) {
      std::string root = diagnoseTimeout();
      if (!root.empty()) cause = Error(cause.code(), "root cause: " + root + ". " + cause.message());
    }
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(error.mutex);
    int expected = ncclSuccess;
    ncclResult_t code = cause.code() == ErrorCode::Remote || cause.code() == ErrorCode::Timeout ? ncclRemoteError
                        : cause.code() == ErrorCode::InvalidUsage                               ? ncclInvalidUsage
                                                                                                : ncclSystemError;
    if (error.asyncError.compare_exchange_strong(expected, code)) {
      error.message = cause.message();
      error.code = cause.code();
      error.peer = peer;
      first = true;
    }
  }
  // The other ranks learn the cause now rather than by their own timeout: some of them never
  // talk to the peer at fault. An abort (ours or the user's) is not news to them.
  if (first && tellPeers && cause.code() != ErrorCode::Aborted && identity.bootstrap)
    identity.bootstrap->broadcastNotice(cause.message());
  if (first) tutti::dumpFlightRecordOnFailure(this, cause);  // before the workers stop: their waits are the record's
  error.abortFlag.store(true);
  if (tutti::kern::ExecutorBackend* backend = executor.abortable.load()) backend->abort();  // kernels stop spinning
  if (control.own)
    for (auto& bell : control.own->bells) tutti::kern::ringBell(&bell);
}

void ncclComm::noticeExecutorFault() {
  tutti::kern::ExecutorBackend* backend = executor.abortable.load();
  if (backend == nullptr) return;
  const tutti::kern::ExecFault f = backend->fault();
  if (f.fault == uint32_t(tutti::kern::Fault::None) || error.asyncError.load() != ncclSuccess) return;
  fail(tutti::Error(tutti::kern::faultCode(f),
                    tutti::kern::describeFault(
                        f, identity.rank, [this](int peer) { return describePeer(peer); }, settings.timeoutSeconds)),
       true, f.peer);
}

// What this rank waits for: its workers' waits, or (once they stopped) the waits that timed out,
// or a kernel's fault record.
tutti::RankWait ncclComm::currentWait() const {
  std::vector<tutti::kern::WaitRecord> records;
  for (const tutti::kern::WaitSlot& slot : executor.waits) {
    records.push_back(slot.read());
    records.push_back(slot.timedOut());
  }
  if (tutti::kern::ExecutorBackend* backend = executor.abortable.load()) {
    const tutti::kern::ExecFault f = backend->fault();
    if (f.fault == uint32_t(tutti::kern::Fault::Timeout) || f.fault == uint32_t(tutti::kern::Fault::Aborted))
      records.push_back(tutti::kern::waitRecordOf(f));
  }
  return tutti::waitOfRecords(records);
}

std::string ncclComm::answerWaitQuestion() const { return tutti::encodeWaitAnswer(currentWait()); }

std::string ncclComm::diagnoseTimeout() const {
  return tutti::diagnoseWait(
      *identity.bootstrap, currentWait(), [this](int peer) { return describePeer(peer); }, kWaitDiagnosisSeconds);
}

std::string ncclComm::describePeer(int peer) const {
  std::string s = "rank " + std::to_string(peer);
  const std::vector<tutti::RankInfo>& peers = identity.peers;
  if (identity.peersKnown.load(std::memory_order_acquire) && peer >= 0 && size_t(peer) < peers.size() &&
      peers[size_t(peer)].pid != 0)
    s += " (" + std::string(peers[size_t(peer)].hostname) + " pid " + std::to_string(peers[size_t(peer)].pid) + ")";
  return s;
}

std::string ncclComm::describeWaits() const {
  const int64_t nowNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::string lines;
  for (const tutti::kern::WaitSlot& slot : executor.waits) {
    tutti::kern::WaitRecord r = slot.read();
    if (r.what == tutti::kern::WaitFor::Nothing) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", double(nowNs - r.sinceNs) / 1e9);
    lines += (lines.empty() ? "" : "\n") + tutti::kern::describeWaitingOp(r) + " waiting " + seconds + " s for " +
             tutti::kern::describeWaitedFor(r, describePeer(r.peer));
  }
  return lines;
}

std::string ncclComm::where() const {
  return "rank " + std::to_string(identity.rank) + " of " + std::to_string(identity.nranks) + " (" + tutti::hostname() +
         " pid " + std::to_string(getpid()) + ")";
}
