// Failure notices between the ranks of one bootstrap, and the handlers that hear notices and
// departures (see Bootstrap::broadcastNotice and Bootstrap::setPeerLostHandler).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"

namespace tutti::bootstrap {

// What the notices need of the rank side that carries them.
class NoticeCarrier {
 public:
  virtual ~NoticeCarrier() = default;
  // "rank 3 (host:port)", for messages.
  virtual std::string describePeer(int peer) const = 0;
  // True when the peer's connection to us has ended: likely the one that died.
  virtual bool peerGone(int peer) = 0;
  // One attempt to hand text to a peer by the deadline; stop set means give up now. Throws Error.
  virtual void sendNotice(int peer, const std::string& text, SteadyTime deadline, const std::atomic<bool>* stop) = 0;
};

class FailureNotices {
 public:
  using Handler = std::function<void(int rank, const std::string& text)>;

  // context names this rank in messages; the carrier must outlive stop().
  FailureNotices(int rank, int nranks, std::string context, NoticeCarrier& carrier);
  ~FailureNotices() { stop(); }
  FailureNotices(const FailureNotices&) = delete;
  FailureNotices& operator=(const FailureNotices&) = delete;

  // Starts the thread that sends text to every peer; only the first call sends.
  void broadcast(const std::string& text);
  // Waits (a few seconds at most) until a notice being sent has gone to every peer.
  void flush();
  // Gives a notice being sent its moment (flush), then ends the sending thread. Before the
  // carrier's connections go: a destroy right after a failure is the usual way out, and the
  // notice is what stops the other ranks quickly.
  void stop();

  // Setting an empty handler waits for a running call to finish. A notice that came while no
  // handler was set goes to the next one set (the first such notice only).
  void setNoticeHandler(Handler handler);
  void setPeerLostHandler(Handler handler);

  // A notice from sender arrived: tell the handler.
  void deliver(int sender, const std::string& text);
  // A peer's process ended, or its connection failed: tell the handler.
  void reportPeerLost(int peer, const std::string& reason);

 private:
  void sendAll(const std::string& message);  // the sending thread

  const int rank_;
  const int nranks_;
  const std::string context_;
  NoticeCarrier& carrier_;

  std::mutex handlerMutex_;
  Handler noticeHandler_;
  Handler peerLostHandler_;  // under handlerMutex_
  // The first notice that came while no handler was set, for the next handler (under handlerMutex_).
  int unheardFrom_ = -1;
  std::string unheardText_;
  std::mutex mutex_;
  std::condition_variable doneChanged_;
  bool done_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tutti::bootstrap
