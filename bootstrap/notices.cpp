// Failure notices between the ranks of one bootstrap: the sending thread and the handlers.
#include "bootstrap/notices.h"

#include <chrono>
#include <system_error>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/wire.h"

namespace tutti::bootstrap {

namespace {

// A failure notice gets this long per peer, and a destroy waits this long for notices to leave.
constexpr double kNoticeSecondsPerPeer = 2.0;
constexpr std::chrono::seconds kNoticeGrace{3};

}  // namespace

FailureNotices::FailureNotices(int rank, int nranks, std::string context, NoticeCarrier& carrier)
    : rank_(rank), nranks_(nranks), context_(std::move(context)), carrier_(carrier) {}

void FailureNotices::broadcast(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable()) return;
  std::string message = text.substr(0, bootstrap::wire::kMaxErrorBytes);
  try {
    thread_ = std::thread([this, message] { sendAll(message); });
  } catch (const std::system_error& error) {
    TUTTI_WARN("%s: cannot start the thread that tells the other ranks of a failure: %s", context_.c_str(),
               error.what());
  }
}

void FailureNotices::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (thread_.joinable()) doneChanged_.wait_for(lock, kNoticeGrace, [this] { return done_; });
}

void FailureNotices::stop() {
  flush();
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void FailureNotices::setNoticeHandler(Handler handler) {
  std::lock_guard<std::mutex> lock(handlerMutex_);
  noticeHandler_ = std::move(handler);
  // A notice that came before anyone listened (a peer that failed while this rank was still
  // joining) is the cause of what follows: the new handler hears it first.
  if (noticeHandler_ && unheardFrom_ >= 0) {
    const int sender = unheardFrom_;
    unheardFrom_ = -1;
    noticeHandler_(sender, unheardText_);
  }
}

void FailureNotices::setPeerLostHandler(Handler handler) {
  std::lock_guard<std::mutex> lock(handlerMutex_);
  peerLostHandler_ = std::move(handler);
}

void FailureNotices::deliver(int sender, const std::string& text) {
  std::lock_guard<std::mutex> lock(handlerMutex_);
  TUTTI_INFO(log::Bootstrap, "%s: %s reports a failure: %s", context_.c_str(), carrier_.describePeer(sender).c_str(),
             text.c_str());
  if (noticeHandler_) {
    noticeHandler_(sender, text);
  } else if (unheardFrom_ < 0) {
    unheardFrom_ = sender;
    unheardText_ = text;
  }
}

void FailureNotices::reportPeerLost(int peer, const std::string& reason) {
  TUTTI_INFO(log::Bootstrap, "%s: %s is gone: %s", context_.c_str(), carrier_.describePeer(peer).c_str(),
             reason.c_str());
  std::lock_guard<std::mutex> lock(handlerMutex_);
  if (peerLostHandler_) peerLostHandler_(peer, reason);
}

// One short attempt per peer, in rank order from ours.
void FailureNotices::sendAll(const std::string& message) {
  for (int i = 1; i < nranks_ && !stop_.load(std::memory_order_acquire); ++i) {
    int peer = (rank_ + i) % nranks_;
    if (carrier_.peerGone(peer)) continue;
    try {
      carrier_.sendNotice(peer, message, deadlineAfter(kNoticeSecondsPerPeer), &stop_);
    } catch (const Error& error) {
      TUTTI_INFO(log::Bootstrap, "%s: could not tell %s of the failure: %s", context_.c_str(),
                 carrier_.describePeer(peer).c_str(), error.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  doneChanged_.notify_all();
}

}  // namespace tutti::bootstrap
