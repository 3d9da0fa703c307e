// Socket addresses: parsing, printing, subnets and the wire form.
#include "base/socket_address.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"

namespace tutti {

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
      throw Error(ErrorCode::InvalidArgument, "address '" + text + "': expected [ipv6]:port");
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
  if (host.empty()) throw Error(ErrorCode::InvalidArgument, "address '" + text + "': the host is missing");
  if (portText.empty() || portText.size() > 5 ||
      !std::all_of(portText.begin(), portText.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoul(portText) > 65535)
    throw Error(ErrorCode::InvalidArgument, "address '" + text + "': the port must be a number from 0 to 65535");
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
      result += if_indextoname(storage_.v6.sin6_scope_id, name) != nullptr ? std::string(name)
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
    throw Error(ErrorCode::InvalidArgument, "encoded socket address has unknown family byte " + std::to_string(in[0]));
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

}  // namespace tutti
