// TCP sockets for the bootstrap and the socket net transport: addresses, interface discovery
// with NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY, and connect/accept/send/recv that each wait
// until a deadline and poll an abort flag.
//
// Every socket is nonblocking, close-on-exec and TCP_NODELAY; sends use MSG_NOSIGNAL so a peer
// that vanished yields an error, never SIGPIPE. Waits poll() in slices of at most 100 ms so an
// abort is seen promptly. Errors are tutti::Error naming the operation, the peer and errno:
// Timeout when the deadline passes, Aborted when the flag is set, Remote when the peer closed or
// reset the connection, System for anything else the OS refused.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tutti {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

// The longest a wait sleeps before it looks at its abort flag again.
inline constexpr std::chrono::milliseconds kPollSlice{100};

// A deadline `seconds` from now; non-positive or huge values are clamped to sane bounds.
SteadyTime deadlineAfter(double seconds);

// An IPv4 or IPv6 socket address (port included). Trivially copyable.
class SocketAddress {
 public:
  SocketAddress() = default;  // empty: family() == AF_UNSPEC

  // "1.2.3.4:80", "[fe80::1%eth0]:80" or "name:80" (resolved, IPv4 preferred). Port required.
  // Throws InvalidArgument naming the text.
  static SocketAddress parse(const std::string& text);
  // A numeric host ("1.2.3.4", "::1", "fe80::1%eth0") and a port. Throws InvalidArgument.
  static SocketAddress fromNumericHost(const std::string& host, uint16_t port);
  static SocketAddress fromSockaddr(const sockaddr* address, socklen_t length);

  int family() const { return storage_.generic.sa_family; }
  bool empty() const { return family() == AF_UNSPEC; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;   // 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104
  bool isLinkLocal() const;  // 169.254.0.0/16, fe80::/10
  // True when both are of one family and agree on the first prefixLength bits.
  bool sameSubnet(const SocketAddress& other, int prefixLength) const;

  std::string host() const;      // numeric, no port: "1.2.3.4", "fe80::1%eth0"
  std::string toString() const;  // "1.2.3.4:80", "[::1]:80"; "(none)" when empty

  const sockaddr* sockaddrPointer() const { return &storage_.generic; }
  socklen_t sockaddrLength() const;

  // A fixed-size form independent of this host's struct layouts, for ids and bootstrap frames:
  // byte 0 is 4 or 6 (0: empty), bytes 2-3 the port (big-endian), 4-7 the IPv6 scope id
  // (big-endian), 8-23 the address (IPv4 in the first four).
  static constexpr size_t kWireBytes = 24;
  void toWire(uint8_t* out) const;
  static SocketAddress fromWire(const uint8_t* in);  // throws InvalidArgument on a bad family byte

  friend bool operator==(const SocketAddress& a, const SocketAddress& b);

 private:
  union Storage {
    sockaddr generic;
    sockaddr_in v4;
    sockaddr_in6 v6;
  };
  Storage storage_{};
};

// One address of one network interface that is up.
struct NetworkInterface {
  std::string name;
  SocketAddress address;  // port 0
  int prefixLength = 0;   // of the netmask
  bool loopback = false;
};

// Every address of every interface that is up (getifaddrs), IPv4 and IPv6.
std::vector<NetworkInterface> listNetworkInterfaces();

// NCCL_SOCKET_IFNAME's syntax: a comma-separated list of name prefixes; a leading '^' selects the
// interfaces that match none of them; a leading '=' (after '^' if both) makes entries exact names.
class InterfaceNameFilter {
 public:
  static InterfaceNameFilter parse(const std::string& spec);
  bool matches(const std::string& interfaceName) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// NCCL_SOCKET_FAMILY's values: "" (either), "AF_INET", "AF_INET6". Throws InvalidUsage otherwise.
int parseSocketFamily(const std::string& text);

// Pure selection over a list of interfaces, one address per interface name (IPv4 before IPv6,
// link-local last), in the list's order. With an ifname spec: the interfaces it matches, or an
// InvalidUsage error listing the interfaces that exist. Without: everything but loopback,
// docker*, virbr* and link-local addresses; if that leaves nothing, the loopback interfaces.
// family: AF_UNSPEC, AF_INET or AF_INET6.
std::vector<NetworkInterface> selectNetworkInterfaces(const std::vector<NetworkInterface>& available,
                                                      const std::string& ifnameSpec, int family);

// selectNetworkInterfaces over this host's interfaces, with NCCL_SOCKET_IFNAME and
// NCCL_SOCKET_FAMILY. Never empty (throws instead).
std::vector<NetworkInterface> findNetworkInterfaces();

// The interface to use for talking to `remote`: one whose subnet holds it (loopback for a
// loopback remote), chosen among those NCCL_SOCKET_IFNAME selects if it is set, else among all;
// failing that, the first selected interface of the remote's family, else the first selected.
NetworkInterface findInterfaceToReach(const SocketAddress& remote);

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
  static Socket connect(const SocketAddress& remote, SteadyTime deadline,
                        const std::atomic<bool>* abortFlag);

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
void waitForSocket(int fd, short events, SteadyTime deadline, const std::atomic<bool>* abortFlag,
                   const char* operation, const SocketAddress& peer);

}  // namespace tutti
