// IPv4 and IPv6 socket addresses: parsing ("host:port", "[ipv6%scope]:port"), printing, subnets,
// and a fixed-size wire form for ids and bootstrap frames.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti {

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

}  // namespace tutti
