// The bootstrap's event loop: reading frames without blocking, and the wakeup.
#include "bootstrap/loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace tutti::bootstrap {

IncomingConnection::IncomingConnection(Socket socket, double handshakeSeconds)
    : socket_(std::move(socket)),
      handshakeSeconds_(handshakeSeconds),
      progressDeadline_(later(SteadyClock::now(), handshakeSeconds)) {}

IncomingConnection::Status IncomingConnection::pump(const FramePolicy& policy, std::vector<Frame>& frames,
                                                    std::string& reason) {
  size_t budget = 8u << 20;  // then let the other connections have a turn
  for (;;) {
    uint8_t* target = nullptr;
    size_t wanted = 0;
    if (!inPayload_) {
      target = reinterpret_cast<uint8_t*>(&current_.header) + headerBytes_;
      wanted = sizeof(bootstrap::wire::FrameHeader) - headerBytes_;
    } else {
      target = current_.payload.data() + payloadBytes_;
      wanted = current_.payload.size() - payloadBytes_;
    }
    if (wanted > 0) {
      Socket::ReadResult read = socket_.readSome(target, wanted);
      if (read.bytes == 0) {
        if (!read.closed) return Status::Open;
        closeError_ = read.error;
        if (!midFrame()) return Status::Closed;
        reason = "connection closed in the middle of a frame";
        return Status::Rejected;
      }
      progressDeadline_ = later(SteadyClock::now(), handshakeSeconds_);
      if (!inPayload_)
        headerBytes_ += read.bytes;
      else
        payloadBytes_ += read.bytes;
      budget -= std::min(budget, read.bytes);
      if (!inPayload_ && headerBytes_ < sizeof(bootstrap::wire::FrameHeader)) continue;
      if (inPayload_ && payloadBytes_ < current_.payload.size()) {
        if (budget == 0) return Status::Open;
        continue;
      }
    }
    if (!inPayload_) {
      reason = bootstrap::wire::checkFrameHeader(current_.header, policy);
      if (!reason.empty()) return Status::Rejected;
      current_.payload.resize(current_.header.payloadBytes);  // bounded by the policy
      inPayload_ = true;
      payloadBytes_ = 0;
      if (!current_.payload.empty()) continue;
    }
    frames.push_back(std::move(current_));
    current_ = Frame();
    headerBytes_ = 0;
    payloadBytes_ = 0;
    inPayload_ = false;
    framesSeen_ = true;
    if (budget == 0) return Status::Open;
  }
}

std::string IncomingConnection::stallReason() const {
  return (framesSeen_ || midFrame() ? "truncated frame: no progress for " : "no frame within ") +
         bootstrap::wire::secondsText(handshakeSeconds_);
}

WakeupEvent::WakeupEvent() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throwSystemError("bootstrap: eventfd", errno);
}

WakeupEvent::~WakeupEvent() { ::close(fd_); }

void WakeupEvent::signal() {
  uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof one);
}

void WakeupEvent::drain() {
  uint64_t value = 0;
  (void)!::read(fd_, &value, sizeof value);
}

}  // namespace tutti::bootstrap
