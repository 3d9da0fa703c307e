// net_stream: the raw TCP throughput of a link, as a reference for the network transport's
// figures: one side streams bytes over one or more TCP connections, the other discards them and
// acknowledges the total; the time runs from the first connect to the acknowledgement.
//
//   net_stream recv <bind-address> <port> [seconds-limit]
//   net_stream send <address> <port> <bytes> [streams] [seconds-limit]
//
// Both print one line; `send` prints "bytes streams seconds GB/s". Every wait is bounded by the
// limit (default 60 s): a peer that never comes makes the program fail, not hang.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBufferBytes = 1 << 20;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "net_stream: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// A descriptor closed on every path.
class Descriptor {
 public:
  explicit Descriptor(int fd = -1) : fd_(fd) {}
  Descriptor(Descriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

addrinfo* resolve(const char* host, const char* port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host, port, &hints, &result); rc != 0) {
    std::fprintf(stderr, "net_stream: %s: %s\n", host, gai_strerror(rc));
    std::exit(1);
  }
  return result;
}

// Blocking I/O with a per-call timeout, so that a vanished peer ends the run.
void setTimeouts(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = time_t(seconds);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int receiveSide(const char* host, const char* port, double limit) {
  addrinfo* address = resolve(host, port, true);
  Descriptor listener(::socket(address->ai_family, SOCK_STREAM, 0));
  if (listener.get() < 0) fail("socket");
  int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listener.get(), address->ai_addr, address->ai_addrlen) != 0)
    fail(std::string("bind ") + host + ":" + port);
  freeaddrinfo(address);
  if (::listen(listener.get(), 64) != 0) fail("listen");

  // The sender's first connection says how many follow (4 bytes); each then streams to its end.
  auto acceptOne = [&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, int(limit * 1000)) != 1) {
      errno = ETIMEDOUT;
      fail("accept");
    }
    Descriptor connection(::accept(listener.get(), nullptr, nullptr));
    if (connection.get() < 0) fail("accept");
    setTimeouts(connection.get(), limit);
    return connection;
  };
  std::vector<Descriptor> connections;
  connections.push_back(acceptOne());
  uint32_t streams = 0;
  if (::recv(connections[0].get(), &streams, sizeof streams, MSG_WAITALL) != sizeof streams || streams == 0 ||
      streams > 64)
    fail("reading the stream count");
  while (connections.size() < streams) connections.push_back(acceptOne());

  std::atomic<uint64_t> total{0};
  std::vector<std::thread> drains;
  for (auto& connection : connections)
    drains.emplace_back([&total, fd = connection.get()] {
      std::vector<char> buffer(kBufferBytes);
      for (;;) {
        ssize_t got = ::recv(fd, buffer.data(), buffer.size(), 0);
        if (got <= 0) return;  // end of stream (or the timeout: the sender will notice)
        total += uint64_t(got);
      }
    });
  for (auto& t : drains) t.join();
  uint64_t bytes = total.load();
  // The acknowledgement goes back on the first connection, whose write side the sender kept.
  if (::send(connections[0].get(), &bytes, sizeof bytes, MSG_NOSIGNAL) != sizeof bytes) fail("acknowledging");
  std::printf("received %llu bytes on %u streams\n", static_cast<unsigned long long>(bytes), streams);
  return 0;
}

int sendSide(const char* host, const char* port, uint64_t bytes, uint32_t streams, double limit) {
  addrinfo* address = resolve(host, port, false);
  auto start = Clock::now();
  std::vector<Descriptor> connections;
  for (uint32_t i = 0; i < streams; i++) {
    Descriptor connection(::socket(address->ai_family, SOCK_STREAM, 0));
    if (connection.get() < 0) fail("socket");
    setTimeouts(connection.get(), limit);
    // The receiver may still be starting: retry a refused connect until the limit.
    while (::connect(connection.get(), address->ai_addr, address->ai_addrlen) != 0) {
      if (errno != ECONNREFUSED || Clock::now() - start > std::chrono::duration<double>(limit))
        fail(std::string("connect ") + host + ":" + port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      connection = Descriptor(::socket(address->ai_family, SOCK_STREAM, 0));
      setTimeouts(connection.get(), limit);
    }
    if (i == 0 && ::send(connection.get(), &streams, sizeof streams, MSG_NOSIGNAL) != sizeof streams)
      fail("sending the stream count");
    connections.push_back(std::move(connection));
  }
  freeaddrinfo(address);

  auto begin = Clock::now();
  std::vector<std::thread> senders;
  std::atomic<bool> failed{false};
  for (uint32_t i = 0; i < streams; i++)
    senders.emplace_back([&, i] {
      std::vector<char> buffer(kBufferBytes, char(i));
      uint64_t share = bytes / streams + (i < bytes % streams ? 1 : 0);
      while (share > 0) {
        ssize_t sent =
            ::send(connections[i].get(), buffer.data(), size_t(std::min<uint64_t>(share, buffer.size())), MSG_NOSIGNAL);
        if (sent <= 0) {
          failed = true;
          return;
        }
        share -= uint64_t(sent);
      }
      ::shutdown(connections[i].get(), SHUT_WR);
    });
  for (auto& t : senders) t.join();
  if (failed) fail("send");
  uint64_t acknowledged = 0;
  if (::recv(connections[0].get(), &acknowledged, sizeof acknowledged, MSG_WAITALL) != sizeof acknowledged)
    fail("waiting for the acknowledgement");
  double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  if (acknowledged != bytes) {
    std::fprintf(stderr, "net_stream: sent %llu bytes, the receiver counted %llu\n",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(acknowledged));
    return 1;
  }
  std::printf("%llu bytes %u streams %.3f s %.3f GB/s\n", static_cast<unsigned long long>(bytes), streams, seconds,
              double(bytes) / seconds / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "recv" && argc >= 4) return receiveSide(argv[2], argv[3], argc > 4 ? std::atof(argv[4]) : 60);
  if (mode == "send" && argc >= 5)
    return sendSide(argv[2], argv[3], std::strtoull(argv[4], nullptr, 0),
                    argc > 5 ? uint32_t(std::clamp(std::atoi(argv[5]), 1, 64)) : 1u,
                    argc > 6 ? std::atof(argv[6]) : 60);
  std::fprintf(stderr,
               "usage: net_stream recv <bind-address> <port> [seconds-limit]\n"
               "       net_stream send <address> <port> <bytes> [streams] [seconds-limit]\n");
  return 2;
}
