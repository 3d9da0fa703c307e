// The bootstrap's event loop: connections read a frame at a time without blocking, a wakeup from
// other threads, and one turn of a loop over a listener and the connections it accepted.
//
// Both the root and each rank's listener thread serve their connections this way, so a silent or
// malicious connection never stalls the others: a connection that goes silent before its first
// frame, or in the middle of one, is dropped after handshakeSeconds.
#pragma once

#include <poll.h>

#include <cerrno>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/socket.h"
#include "bootstrap/wire.h"

namespace tutti::bootstrap {

using bootstrap::wire::Frame;
using bootstrap::wire::FramePolicy;

// A connection read without blocking by an event loop, one frame at a time.
class IncomingConnection {
 public:
  enum class Status { Open, Closed, Rejected };

  IncomingConnection(Socket socket, double handshakeSeconds);

  // Reads what has arrived and appends every completed frame to `frames`. Closed: the peer closed
  // between frames. Rejected: `reason` says why the connection must go.
  Status pump(const FramePolicy& policy, std::vector<Frame>& frames, std::string& reason);

  // Silent before the first frame, or in the middle of one, for too long.
  bool stalled(SteadyTime now) const { return (!framesSeen_ || midFrame()) && now >= progressDeadline_; }
  std::string stallReason() const;

  Socket& socket() { return socket_; }
  const SocketAddress& remote() const { return socket_.peerAddress(); }
  // The errno that ended the connection (a reset), or 0 when the peer closed it.
  int closeError() const { return closeError_; }

 private:
  bool midFrame() const { return headerBytes_ > 0 || inPayload_; }

  Socket socket_;
  double handshakeSeconds_;
  SteadyTime progressDeadline_;
  Frame current_;
  size_t headerBytes_ = 0;
  size_t payloadBytes_ = 0;
  bool inPayload_ = false;
  bool framesSeen_ = false;
  int closeError_ = 0;
};

// Wakes an event loop from another thread.
class WakeupEvent {
 public:
  WakeupEvent();
  ~WakeupEvent();
  WakeupEvent(const WakeupEvent&) = delete;
  WakeupEvent& operator=(const WakeupEvent&) = delete;
  void signal();
  void drain();
  int fd() const { return fd_; }

 private:
  int fd_;
};

enum class DropKind { Refused, Closed, Stalled };

// What one turn of the event loop below works in, kept by its caller across turns so that an idle
// turn allocates nothing (the listener of a rank stays up for the communicator's whole life).
struct ServeScratch {
  std::vector<pollfd> pollSet;
  std::vector<char> dropped;
  std::vector<Frame> frames;
  std::string reason;
};

// One turn of an event loop over a listener and the connections it accepted (each Entry holds an
// IncomingConnection named `connection`): waits up to one poll slice, reads what arrived, hands
// every complete frame to onFrame (which returns why the connection must go, or empty), drops
// refused, closed and stalled connections after telling onDrop, and accepts new connections.
template <typename Entry, typename OnFrame, typename OnDrop>
void serveConnectionsOnce(Socket& listener, WakeupEvent* wakeup, std::vector<std::unique_ptr<Entry>>& entries,
                          const FramePolicy& policy, double handshakeSeconds, const std::string& who,
                          ServeScratch& scratch, OnFrame&& onFrame, OnDrop&& onDrop) {
  std::vector<pollfd>& pollSet = scratch.pollSet;
  pollSet.clear();
  pollSet.push_back({listener.fd(), POLLIN, 0});
  pollSet.push_back({wakeup != nullptr ? wakeup->fd() : -1, POLLIN, 0});  // poll skips fd -1
  constexpr size_t kFirstEntry = 2;
  for (const auto& entry : entries) pollSet.push_back({entry->connection.socket().fd(), POLLIN, 0});
  int ready = ::poll(pollSet.data(), pollSet.size(), static_cast<int>(kPollSlice.count()));
  if (ready < 0 && errno != EINTR) throwSystemError(who + ": poll", errno);
  if (ready <= 0) ready = 0;
  if (wakeup != nullptr && pollSet[1].revents != 0) wakeup->drain();

  std::vector<char>& dropped = scratch.dropped;
  dropped.assign(entries.size(), 0);
  for (size_t i = 0; ready > 0 && i < entries.size(); ++i) {
    if (pollSet[kFirstEntry + i].revents == 0) continue;
    Entry& entry = *entries[i];
    scratch.frames.clear();
    scratch.reason.clear();
    IncomingConnection::Status status = entry.connection.pump(policy, scratch.frames, scratch.reason);
    // Frames that arrived whole before any bad bytes still count.
    for (Frame& frame : scratch.frames) {
      std::string problem = onFrame(entry, frame);
      if (!problem.empty()) {
        status = IncomingConnection::Status::Rejected;
        scratch.reason = problem;
        break;
      }
    }
    if (status == IncomingConnection::Status::Rejected) onDrop(entry, DropKind::Refused, scratch.reason);
    if (status == IncomingConnection::Status::Closed) onDrop(entry, DropKind::Closed, std::string());
    dropped[i] = status != IncomingConnection::Status::Open;
  }
  SteadyTime now = SteadyClock::now();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (dropped[i] || !entries[i]->connection.stalled(now)) continue;
    onDrop(*entries[i], DropKind::Stalled, entries[i]->connection.stallReason());
    dropped[i] = true;
  }
  for (size_t i = entries.size(); i-- > 0;)
    if (dropped[i]) entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));

  if (pollSet[0].revents != 0)
    for (Socket accepted = listener.tryAccept(); accepted.valid(); accepted = listener.tryAccept())
      entries.push_back(std::make_unique<Entry>(std::move(accepted), handshakeSeconds));
}

}  // namespace tutti::bootstrap
