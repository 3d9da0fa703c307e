// TCP sockets for the bootstrap and the socket net transport: listen, and connect/accept/send/recv
// that each wait until a deadline and poll an abort flag. Addresses are in base/socket_address.h,
// interface choice in base/network_interface.h.
//
// Every socket is nonblocking, close-on-exec and TCP_NODELAY; sends use MSG_NOSIGNAL so a peer
// that vanished yields an error, never SIGPIPE. Waits poll() in slices of at most 100 ms so an
// abort is seen promptly. Errors are tutti::Error naming the operation, the peer and errno:
// Timeout when the deadline passes, Aborted when the flag is set, Remote when the peer closed or
// reset the connection, System for anything else the OS refused.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/clock.h"
#include "base/socket_address.h"

namespace tutti {

// A connected or listening TCP socket; closes its descriptor on destruction. Move-only.
class Socket {
 public:
  Socket() = default;
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds `local` (port 0: the kernel picks one) with SO_REUSEADDR and listens.
  static Socket listen(const SocketAddress& local, int backlog = 1024);

  // Connects, retrying with backoff while the peer refuses, is unreachable or times out (its
  // listener may not be up yet), until the deadline: then Timeout, naming the last errno.
  // listenerIsUp: the remote listener was open when its address was handed over (a net
  // connection's offer), so a refusal means it has closed since: Remote at once, not retried.
  static Socket connect(const SocketAddress& remote, SteadyTime deadline, const std::atomic<bool>* abortFlag,
                        bool listenerIsUp = false);

  // A pending connection, or an invalid Socket when none is pending now (for event loops).
  Socket tryAccept();
  // Waits for a connection until the deadline.
  Socket accept(SteadyTime deadline, const std::atomic<bool>* abortFlag);

  // Exactly `size` bytes, or an error.
  void sendAll(const void* data, size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag);
  void recvAll(void* data, size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag);

  // Nonblocking read of what has arrived: bytes read (0 if nothing now); `closed` set when the
  // peer has closed or reset the connection.
  struct ReadResult {
    size_t bytes = 0;
    bool closed = false;
    int error = 0;  // with closed: the errno that ended the connection (ECONNRESET...); 0: an orderly end
  };
  ReadResult readSome(void* data, size_t size);

  // Declares the connection broken when sent data stays unacknowledged, or an idle peer
  // stops answering keepalive probes, for about `seconds` (TCP_USER_TIMEOUT and keepalive).
  // A cut link then fails reads and writes with ETIMEDOUT instead of waiting for the kernel's
  // default (many minutes). seconds <= 0 leaves the kernel's settings.
  void setLinkTimeout(int seconds);

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const SocketAddress& peerAddress() const { return peer_; }  // empty for a listener
  SocketAddress localAddress() const;
  void close();

 private:
  Socket(int fd, const SocketAddress& peer) : fd_(fd), peer_(peer) {}

  int fd_ = -1;
  SocketAddress peer_;
};

// Waits until fd has `events` (POLLIN/POLLOUT; an error or hangup also ends the wait) or throws
// Timeout / Aborted with "<operation> <peer>: ...". Polls in slices of kPollSlice.
void waitForSocket(int fd, short events, SteadyTime deadline, const std::atomic<bool>* abortFlag, const char* operation,
                   const SocketAddress& peer);

}  // namespace tutti
