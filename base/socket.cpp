// TCP sockets: addresses, interface discovery and selection, bounded connect/accept/send/recv.
#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "base/error.h"
#include "base/params.h"

namespace tutti {

namespace {

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

int prefixLengthOf(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const uint8_t* bytes = nullptr;
  size_t count = 0;
  if (mask->sa_family == AF_INET) {
    bytes = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(mask)->sin_addr);
    count = 4;
  } else if (mask->sa_family == AF_INET6) {
    bytes = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
    count = 16;
  }
  int bits = 0;
  for (size_t i = 0; i < count; ++i) bits += __builtin_popcount(bytes[i]);
  return bits;
}

std::string describeInterfaces(const std::vector<NetworkInterface>& interfaces) {
  if (interfaces.empty()) return "(none)";
  std::string text;
  for (const NetworkInterface& interface : interfaces) {
    if (!text.empty()) text += ", ";
    text += interface.name + " (" + interface.address.host() + ")";
  }
  return text;
}

const char* familyName(int family) {
  return family == AF_INET ? "AF_INET" : family == AF_INET6 ? "AF_INET6" : "any family";
}

// Connection errors that mean "not (yet) there": the listener may still be starting.
bool isRetryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN;
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

SteadyTime deadlineAfter(double seconds) {
  // A year is "forever" without overflowing time_point arithmetic.
  constexpr double kForeverSeconds = 365.0 * 24 * 3600;
  seconds = std::clamp(seconds, 0.0, kForeverSeconds);
  return SteadyClock::now() +
         std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

// ---------------------------------------------------------------------------------------------
// SocketAddress

SocketAddress SocketAddress::fromNumericHost(const std::string& host, uint16_t port) {
  SocketAddress address;
  if (inet_pton(AF_INET, host.c_str(), &address.storage_.v4.sin_addr) == 1) {
    address.storage_.v4.sin_family = AF_INET;
    address.storage_.v4.sin_port = htons(port);
    return address;
  }
  std::string bare = host;
  std::string scope;
  if (size_t percent = host.find('%'); percent != std::string::npos) {
    bare = host.substr(0, percent);
    scope = host.substr(percent + 1);
  }
  if (inet_pton(AF_INET6, bare.c_str(), &address.storage_.v6.sin6_addr) == 1) {
    address.storage_.v6.sin6_family = AF_INET6;
    address.storage_.v6.sin6_port = htons(port);
    if (!scope.empty()) {
      unsigned index = if_nametoindex(scope.c_str());
      if (index == 0) {
        char* end = nullptr;
        unsigned long numeric = std::strtoul(scope.c_str(), &end, 10);
        if (end == scope.c_str() || *end != '\0')
          throw Error(ErrorCode::InvalidArgument,
                      "address '" + host + "': no interface named '" + scope + "' for the IPv6 scope");
        index = static_cast<unsigned>(numeric);
      }
      address.storage_.v6.sin6_scope_id = index;
    }
    return address;
  }
  throw Error(ErrorCode::InvalidArgument, "'" + host + "' is not a numeric IPv4 or IPv6 address");
}

SocketAddress SocketAddress::parse(const std::string& text) {
  std::string host;
  std::string portText;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw Error(ErrorCode::InvalidArgument,
                  "address '" + text + "': expected [ipv6]:port");
    host = text.substr(1, close - 1);
    portText = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos)
      throw Error(ErrorCode::InvalidArgument, "address '" + text + "': expected host:port or [ipv6]:port");
    if (text.find(':') != colon)
      throw Error(ErrorCode::InvalidArgument,
                  "address '" + text + "': an IPv6 address with a port is written [ipv6]:port");
    host = text.substr(0, colon);
    portText = text.substr(colon + 1);
  }
  if (host.empty())
    throw Error(ErrorCode::InvalidArgument, "address '" + text + "': the host is missing");
  if (portText.empty() || portText.size() > 5 ||
      !std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoul(portText) > 65535)
    throw Error(ErrorCode::InvalidArgument,
                "address '" + text + "': the port must be a number from 0 to 65535");
  uint16_t port = static_cast<uint16_t>(std::stoul(portText));

  try {
    return fromNumericHost(host, port);
  } catch (const Error&) {
    // Not numeric: a host name.
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int status = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (status != 0)
    throw Error(ErrorCode::InvalidArgument,
                "address '" + text + "': cannot resolve '" + host + "': " + gai_strerror(status));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  const addrinfo* chosen = nullptr;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET) {
      chosen = entry;
      break;
    }
    if (entry->ai_family == AF_INET6 && chosen == nullptr) chosen = entry;
  }
  if (chosen == nullptr)
    throw Error(ErrorCode::InvalidArgument, "address '" + text + "': '" + host + "' has no IP address");
  SocketAddress address = fromSockaddr(chosen->ai_addr, chosen->ai_addrlen);
  address.setPort(port);
  return address;
}

SocketAddress SocketAddress::fromSockaddr(const sockaddr* address, socklen_t length) {
  SocketAddress result;
  if (address == nullptr) return result;
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in)))
    std::memcpy(&result.storage_.v4, address, sizeof(sockaddr_in));
  else if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6)))
    std::memcpy(&result.storage_.v6, address, sizeof(sockaddr_in6));
  return result;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(storage_.v4.sin_port);
  if (family() == AF_INET6) return ntohs(storage_.v6.sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) storage_.v4.sin_port = htons(port);
  if (family() == AF_INET6) storage_.v6.sin6_port = htons(port);
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) return (ntohl(storage_.v4.sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) {
    const in6_addr& a = storage_.v6.sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

bool SocketAddress::isLinkLocal() const {
  if (family() == AF_INET) return (ntohl(storage_.v4.sin_addr.s_addr) >> 16) == 0xA9FE;
  if (family() == AF_INET6) return IN6_IS_ADDR_LINKLOCAL(&storage_.v6.sin6_addr);
  return false;
}

bool SocketAddress::sameSubnet(const SocketAddress& other, int prefixLength) const {
  if (family() != other.family() || empty()) return false;
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  int bits = 0;
  if (family() == AF_INET) {
    a = reinterpret_cast<const uint8_t*>(&storage_.v4.sin_addr);
    b = reinterpret_cast<const uint8_t*>(&other.storage_.v4.sin_addr);
    bits = 32;
  } else {
    a = reinterpret_cast<const uint8_t*>(&storage_.v6.sin6_addr);
    b = reinterpret_cast<const uint8_t*>(&other.storage_.v6.sin6_addr);
    bits = 128;
  }
  prefixLength = std::clamp(prefixLength, 0, bits);
  for (int bit = 0; bit < prefixLength; ++bit) {
    uint8_t mask = static_cast<uint8_t>(0x80u >> (bit % 8));
    if ((a[bit / 8] & mask) != (b[bit / 8] & mask)) return false;
  }
  return true;
}

std::string SocketAddress::host() const {
  char text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &storage_.v4.sin_addr, text, sizeof text);
    return text;
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &storage_.v6.sin6_addr, text, sizeof text);
    std::string result = text;
    if (storage_.v6.sin6_scope_id != 0) {
      char name[IF_NAMESIZE] = {};
      result += '%';
      result += if_indextoname(storage_.v6.sin6_scope_id, name) != nullptr
                    ? std::string(name)
                    : std::to_string(storage_.v6.sin6_scope_id);
    }
    return result;
  }
  return "(none)";
}

std::string SocketAddress::toString() const {
  if (family() == AF_INET) return host() + ":" + std::to_string(port());
  if (family() == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return "(none)";
}

socklen_t SocketAddress::sockaddrLength() const {
  if (family() == AF_INET) return sizeof(sockaddr_in);
  if (family() == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

void SocketAddress::toWire(uint8_t* out) const {
  std::memset(out, 0, kWireBytes);
  uint16_t port = this->port();
  out[2] = static_cast<uint8_t>(port >> 8);
  out[3] = static_cast<uint8_t>(port);
  if (family() == AF_INET) {
    out[0] = 4;
    std::memcpy(out + 8, &storage_.v4.sin_addr, 4);
  } else if (family() == AF_INET6) {
    out[0] = 6;
    uint32_t scope = storage_.v6.sin6_scope_id;
    for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<uint8_t>(scope >> (24 - 8 * i));
    std::memcpy(out + 8, &storage_.v6.sin6_addr, 16);
  }
}

SocketAddress SocketAddress::fromWire(const uint8_t* in) {
  SocketAddress address;
  uint16_t port = static_cast<uint16_t>((in[2] << 8) | in[3]);
  if (in[0] == 4) {
    address.storage_.v4.sin_family = AF_INET;
    std::memcpy(&address.storage_.v4.sin_addr, in + 8, 4);
  } else if (in[0] == 6) {
    address.storage_.v6.sin6_family = AF_INET6;
    std::memcpy(&address.storage_.v6.sin6_addr, in + 8, 16);
    uint32_t scope = 0;
    for (int i = 0; i < 4; ++i) scope = (scope << 8) | in[4 + i];
    address.storage_.v6.sin6_scope_id = scope;
  } else if (in[0] != 0) {
    throw Error(ErrorCode::InvalidArgument,
                "encoded socket address has unknown family byte " + std::to_string(in[0]));
  }
  address.setPort(port);
  return address;
}

bool operator==(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET)
    return a.storage_.v4.sin_port == b.storage_.v4.sin_port &&
           a.storage_.v4.sin_addr.s_addr == b.storage_.v4.sin_addr.s_addr;
  if (a.family() == AF_INET6)
    return a.storage_.v6.sin6_port == b.storage_.v6.sin6_port &&
           a.storage_.v6.sin6_scope_id == b.storage_.v6.sin6_scope_id &&
           std::memcmp(&a.storage_.v6.sin6_addr, &b.storage_.v6.sin6_addr, 16) == 0;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Interfaces

std::vector<NetworkInterface> listNetworkInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSystemError("listing network interfaces: getifaddrs", errno);
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> owner(list, &freeifaddrs);
  std::vector<NetworkInterface> interfaces;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    NetworkInterface interface;
    interface.name = entry->ifa_name;
    interface.address = SocketAddress::fromSockaddr(
        entry->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    interface.address.setPort(0);
    interface.prefixLength = prefixLengthOf(entry->ifa_netmask);
    interface.loopback = (entry->ifa_flags & IFF_LOOPBACK) != 0 || interface.address.isLoopback();
    interfaces.push_back(std::move(interface));
  }
  return interfaces;
}

InterfaceNameFilter InterfaceNameFilter::parse(const std::string& spec) {
  InterfaceNameFilter filter;
  size_t position = 0;
  if (position < spec.size() && spec[position] == '^') {
    filter.exclude_ = true;
    ++position;
  }
  if (position < spec.size() && spec[position] == '=') {
    filter.exact_ = true;
    ++position;
  }
  while (position <= spec.size()) {
    size_t comma = spec.find(',', position);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = spec.substr(position, comma - position);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) filter.names_.push_back(name);
    position = comma + 1;
  }
  return filter;
}

bool InterfaceNameFilter::matches(const std::string& interfaceName) const {
  bool listed = std::any_of(names_.begin(), names_.end(), [&](const std::string& name) {
    return exact_ ? interfaceName == name : startsWith(interfaceName, name);
  });
  return listed != exclude_;
}

int parseSocketFamily(const std::string& text) {
  if (text.empty()) return AF_UNSPEC;
  if (text == "AF_INET") return AF_INET;
  if (text == "AF_INET6") return AF_INET6;
  throw Error(ErrorCode::InvalidUsage, "NCCL_SOCKET_FAMILY=" + text + ": expected AF_INET or AF_INET6");
}

std::vector<NetworkInterface> selectNetworkInterfaces(const std::vector<NetworkInterface>& available,
                                                      const std::string& ifnameSpec, int family) {
  std::vector<NetworkInterface> candidates;
  for (const NetworkInterface& interface : available)
    if (family == AF_UNSPEC || interface.address.family() == family) candidates.push_back(interface);

  std::vector<NetworkInterface> chosen;
  if (!ifnameSpec.empty()) {
    InterfaceNameFilter filter = InterfaceNameFilter::parse(ifnameSpec);
    for (const NetworkInterface& interface : candidates)
      if (filter.matches(interface.name)) chosen.push_back(interface);
    if (chosen.empty())
      throw Error(ErrorCode::InvalidUsage,
                  "NCCL_SOCKET_IFNAME=" + ifnameSpec + " matches none of this host's interfaces (" +
                      familyName(family) + "): " + describeInterfaces(available));
  } else {
    for (const NetworkInterface& interface : candidates)
      if (!interface.loopback && !interface.address.isLinkLocal() &&
          !startsWith(interface.name, "docker") && !startsWith(interface.name, "virbr"))
        chosen.push_back(interface);
    if (chosen.empty())
      for (const NetworkInterface& interface : candidates)
        if (interface.loopback) chosen.push_back(interface);
    if (chosen.empty())
      throw Error(ErrorCode::System, std::string("no usable network interface (") + familyName(family) +
                                         "); this host has: " + describeInterfaces(available));
  }

  // One address per interface: IPv4, then routable IPv6, then link-local IPv6.
  auto preference = [](const NetworkInterface& interface) {
    if (interface.address.family() == AF_INET) return 0;
    return interface.address.isLinkLocal() ? 2 : 1;
  };
  std::vector<NetworkInterface> result;
  for (const NetworkInterface& interface : chosen) {
    auto same = std::find_if(result.begin(), result.end(),
                             [&](const NetworkInterface& kept) { return kept.name == interface.name; });
    if (same == result.end())
      result.push_back(interface);
    else if (preference(interface) < preference(*same))
      *same = interface;
  }
  return result;
}

std::vector<NetworkInterface> findNetworkInterfaces() {
  std::string spec = params::isSet("NCCL_SOCKET_IFNAME") ? params::getString("NCCL_SOCKET_IFNAME") : "";
  int family = parseSocketFamily(params::getString("NCCL_SOCKET_FAMILY"));
  return selectNetworkInterfaces(listNetworkInterfaces(), spec, family);
}

NetworkInterface findInterfaceToReach(const SocketAddress& remote) {
  auto reaches = [&](const NetworkInterface& interface) {
    if (interface.address.family() != remote.family()) return false;
    return remote.isLoopback() ? interface.loopback : interface.address.sameSubnet(remote, interface.prefixLength);
  };
  std::string spec = params::isSet("NCCL_SOCKET_IFNAME") ? params::getString("NCCL_SOCKET_IFNAME") : "";
  int family = parseSocketFamily(params::getString("NCCL_SOCKET_FAMILY"));
  // Every address of every allowed interface: without NCCL_SOCKET_IFNAME any interface may
  // serve, so the one on the remote's subnet wins over the default choice (as NCCL does for
  // NCCL_COMM_ID).
  InterfaceNameFilter filter = InterfaceNameFilter::parse(spec);
  for (const NetworkInterface& interface : listNetworkInterfaces())
    if ((spec.empty() || filter.matches(interface.name)) &&
        (family == AF_UNSPEC || interface.address.family() == family) && reaches(interface))
      return interface;
  std::vector<NetworkInterface> chosen = findNetworkInterfaces();
  // Among the chosen ones, one of the remote's family can at least route to it.
  for (const NetworkInterface& interface : chosen)
    if (interface.address.family() == remote.family()) return interface;
  return chosen.front();
}

// ---------------------------------------------------------------------------------------------
// Socket

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
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &length) != 0)
    throwSystemError("getsockname", errno);
  return SocketAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&storage), length);
}

Socket Socket::connect(const SocketAddress& remote, SteadyTime deadline,
                       const std::atomic<bool>* abortFlag) {
  auto backoff = std::chrono::milliseconds(10);
  int lastError = 0;
  int attempts = 0;
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire))
      throw Error(ErrorCode::Aborted, "connect to " + remote.toString() + ": aborted");
    if (attempts > 0 && SteadyClock::now() >= deadline)
      throw Error(ErrorCode::Timeout, "connect to " + remote.toString() + ": no connection after " +
                                          std::to_string(attempts) + " attempts (last error: " +
                                          errnoText(lastError) + ")");
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

void Socket::sendAll(const void* data, size_t size, SteadyTime deadline,
                     const std::atomic<bool>* abortFlag) {
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

void waitForSocket(int fd, short events, SteadyTime deadline, const std::atomic<bool>* abortFlag,
                   const char* operation, const SocketAddress& peer) {
  for (;;) {
    if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire))
      throw Error(ErrorCode::Aborted, std::string(operation) + " " + peer.toString() + ": aborted");
    SteadyTime now = SteadyClock::now();
    if (now >= deadline)
      throw Error(ErrorCode::Timeout, std::string(operation) + " " + peer.toString() + ": deadline passed");
    auto slice = std::min<SteadyClock::duration>(kPollSlice, deadline - now);
    int milliseconds = static_cast<int>(
        std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    pollfd entry{fd, events, 0};
    int ready = ::poll(&entry, 1, milliseconds);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throwSystemError(std::string(operation) + " " + peer.toString() + ": poll", errno);
  }
}

}  // namespace tutti
