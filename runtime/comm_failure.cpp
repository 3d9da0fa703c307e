// A communicator's failure: recording the first error, learning of peers' failures and deaths,
// and the names and waits that messages about them give.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/host_identity.h"
#include "base/log.h"
#include "runtime/comm.h"

using tutti::Error;
using tutti::ErrorCode;

void ncclComm::failFromNotice(int sender, const std::string& text) {
  std::string message = where() + ": " + describePeer(sender) + " failed: " + text;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (asyncError.load() != ncclSuccess) {
      if (asyncErrorPeer == sender && asyncErrorCode == ErrorCode::Remote) {
        asyncErrorMessage = message;
        asyncErrorPeer = -1;
      }
      return;
    }
  }
  fail(Error(ErrorCode::Remote, message), false);
}

void ncclComm::failFromPeerLost(int peer, const std::string& reason) {
  std::string message = where() + ": " + describePeer(peer) + " is gone: " + reason;
  // A process that ends without destroying its communicator at job end is common and harmless
  // when nothing is running; an operation in flight is what this stops (unless a notice did first).
  bool busy = activeLaunches.load() > 0 || pendingStreamJobs.load() > 0;
  if (busy && asyncError.load() == ncclSuccess) TUTTI_WARN("%s", message.c_str());
  else TUTTI_INFO(tutti::log::Init, "%s", message.c_str());
  fail(Error(ErrorCode::Remote, message), true, peer);
}

void ncclComm::fail(const Error& error, bool tellPeers, int peer) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    int expected = ncclSuccess;
    ncclResult_t code = error.code() == ErrorCode::Remote || error.code() == ErrorCode::Timeout ? ncclRemoteError
                        : error.code() == ErrorCode::InvalidUsage                             ? ncclInvalidUsage
                                                                                              : ncclSystemError;
    if (asyncError.compare_exchange_strong(expected, code)) {
      asyncErrorMessage = error.message();
      asyncErrorCode = error.code();
      asyncErrorPeer = peer;
      first = true;
    }
  }
  // The other ranks learn the cause now rather than by their own timeout: some of them never
  // talk to the peer at fault. An abort (ours or the user's) is not news to them.
  if (first && tellPeers && error.code() != ErrorCode::Aborted && bootstrap) bootstrap->broadcastNotice(error.message());
  abortFlag.store(true);
  if (control)
    for (auto& bell : control->bells) tutti::kern::ringBell(&bell);
}

std::string ncclComm::describePeer(int peer) const {
  std::string s = "rank " + std::to_string(peer);
  if (peersKnown.load(std::memory_order_acquire) && peer >= 0 && size_t(peer) < peers.size() && peers[size_t(peer)].pid != 0)
    s += " (" + std::string(peers[size_t(peer)].hostname) + " pid " + std::to_string(peers[size_t(peer)].pid) + ")";
  return s;
}

std::string ncclComm::describeWaits() const {
  const int64_t nowNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::string lines;
  for (const tutti::kern::WaitSlot& slot : waits) {
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
  return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " (" + tutti::hostname() + " pid " + std::to_string(getpid()) + ")";
}
