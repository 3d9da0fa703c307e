// TCP sockets: bounded, abortable connect/accept/send/recv.
#include "base/socket.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace tutti {

namespace {

// Connection errors that mean "not (yet) there": the listener may still be starting.
bool isRetryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNRESET ||
         err == EAGAIN;
}

int openStreamSocket(int family, const char* operation, const SocketAddress& address) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throwSystemError(std::string(operation) + " " + address.toString() + ": socket()", errno);
  return fd;
}

// Latency matters more than throughput for bootstrap messages and small proxy frames.
void setNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Sleeps until `until` (or the deadline), waking every slice to look at the abort flag.
void sleepAbortably(SteadyTime until, const std::atomic<bool>* abortFlag) {
  while (SteadyClock::now() < until) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire)) return;
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(kPollSlice, until - SteadyClock::now()));
  }
}

}  // namespace

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_), peer_(other.peer_) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_ = other.peer_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::setLinkTimeout(int seconds) {
  if (fd_ < 0 || seconds <= 0) return;
  // Probes start after a third of the budget and three unanswered ones end the connection, so
  // an idle connection fails at about the same time as one with data in flight.
  int one = 1, probeEvery = std::max(1, seconds / 3), probes = 3;
  unsigned userTimeoutMs = unsigned(seconds) * 1000u;
  (void)::setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &probeEvery, sizeof probeEvery);
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &probeEvery, sizeof probeEvery);
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  (void)::setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs, sizeof userTimeoutMs);
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SocketAddress& local, int backlog) {
  Socket socket(openStreamSocket(local.family(), "listen on", local), SocketAddress());
  int one = 1;
  (void)::setsockopt(socket.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(socket.fd_, local.sockaddrPointer(), local.sockaddrLength()) != 0)
    throwSystemError("listen on " + local.toString() + ": bind", errno);
  if (::listen(socket.fd_, backlog) != 0) throwSystemError("listen on " + local.toString(), errno);
  return socket;
}

SocketAddress Socket::localAddress() const {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0) throwSystemError("getsockname", errno);
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&storage), length);
}

Socket Socket::connect(const SocketAddress& remote, SteadyTime deadline, const std::atomic<bool>* abortFlag,
                       bool listenerIsUp) {
  auto backoff = std::chrono::milliseconds(10);
  int lastError = 0;
  int attempts = 0;
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire))
      throw Error(ErrorCode::Aborted, "connect to " + remote.toString() + ": aborted");
    if (attempts > 0 && SteadyClock::now() >= deadline)
      throw Error(ErrorCode::Timeout, "connect to " + remote.toString() + ": no connection after " +
                                          std::to_string(attempts) + " attempts (last error: " + errnoText(lastError) +
                                          ")");
    ++attempts;
    Socket socket(openStreamSocket(remote.family(), "connect to", remote), remote);
    setNoDelay(socket.fd_);
    int err = 0;
    if (::connect(socket.fd_, remote.sockaddrPointer(), remote.sockaddrLength()) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        waitForSocket(socket.fd_, POLLOUT, deadline, abortFlag, "connect to", remote);
        socklen_t length = sizeof err;
        if (::getsockopt(socket.fd_, SOL_SOCKET, SO_ERROR, &err, &length) != 0) err = errno;
      }
    }
    if (err == 0) return socket;
    if (err == ECONNREFUSED && listenerIsUp)
      throw Error(ErrorCode::Remote, "connect to " + remote.toString() + ": " + errnoText(err) +
                                         " (the peer's listener was open when it offered this address: it has closed "
                                         "since, or the address does not reach it from this host)");
    if (!isRetryableConnectError(err)) throwSystemError("connect to " + remote.toString(), err);
    lastError = err;
    SteadyTime retryAt = std::min(deadline, SteadyClock::now() + backoff);
    sleepAbortably(retryAt, abortFlag);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Socket Socket::tryAccept() {
  for (;;) {
    sockaddr_storage storage{};
    socklen_t length = sizeof storage;
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&storage), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      return Socket(fd, SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&storage), length));
    }
    int err = errno;
    if (err == EINTR) continue;
    // A connection that was reset before we took it is simply gone.
    if (err == EAGAIN || err == EWOULDBLOCK || err == ECONNABORTED || err == EPROTO) return Socket();
    throwSystemError("accept on " + localAddress().toString(), err);
  }
}

Socket Socket::accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  SocketAddress local = localAddress();
  for (;;) {
    waitForSocket(fd_, POLLIN, deadline, abortFlag, "accept on", local);
    Socket accepted = tryAccept();
    if (accepted.valid()) return accepted;
  }
}

void Socket::sendAll(const void* data, size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  const char* bytes = static_cast<const char*>(data);
  size_t sent = 0;
  while (sent < size) {
    ssize_t count = ::send(fd_, bytes + sent, size - sent, MSG_NOSIGNAL);
    if (count > 0) {
      sent += static_cast<size_t>(count);
      continue;
    }
    int err = errno;
    if (count < 0 && err == EINTR) continue;
    if (count < 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
      waitForSocket(fd_, POLLOUT, deadline, abortFlag, "send to", peer_);
      continue;
    }
    if (err == EPIPE || err == ECONNRESET)
      throw Error(ErrorCode::Remote, "send to " + peer_.toString() + ": the peer closed the connection after " +
                                         std::to_string(sent) + " of " + std::to_string(size) +
                                         " bytes: " + errnoText(err));
    throwSystemError("send to " + peer_.toString(), err);
  }
}

void Socket::recvAll(void* data, size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  char* bytes = static_cast<char*>(data);
  size_t received = 0;
  while (received < size) {
    ReadResult read = readSome(bytes + received, size - received);
    received += read.bytes;
    if (received == size) break;
    if (read.closed)
      throw Error(ErrorCode::Remote, "recv from " + peer_.toString() + ": the peer closed the connection after " +
                                         std::to_string(received) + " of " + std::to_string(size) + " bytes");
    if (read.bytes == 0) waitForSocket(fd_, POLLIN, deadline, abortFlag, "recv from", peer_);
  }
}

Socket::ReadResult Socket::readSome(void* data, size_t size) {
  ReadResult result;
  for (;;) {
    ssize_t count = ::recv(fd_, data, size, 0);
    if (count > 0) {
      result.bytes = static_cast<size_t>(count);
      return result;
    }
    if (count == 0) {
      result.closed = size > 0;
      return result;
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return result;
    if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT) {
      result.closed = true;
      result.error = err;
      return result;
    }
    throwSystemError("recv from " + peer_.toString(), err);
  }
}

void waitForSocket(int fd, short events, SteadyTime deadline, const std::atomic<bool>* abortFlag, const char* operation,
                   const SocketAddress& peer) {
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire))
      throw Error(ErrorCode::Aborted, std::string(operation) + " " + peer.toString() + ": aborted");
    SteadyTime now = SteadyClock::now();
    if (now >= deadline)
      throw Error(ErrorCode::Timeout, std::string(operation) + " " + peer.toString() + ": deadline passed");
    auto slice = std::min<SteadyClock::duration>(kPollSlice, deadline - now);
    int milliseconds = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, milliseconds);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throwSystemError(std::string(operation) + " " + peer.toString() + ": poll", errno);
  }
}

}  // namespace tutti
