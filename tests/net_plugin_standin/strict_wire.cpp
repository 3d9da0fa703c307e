// The stand-in's wire: plain POSIX TCP sockets, every call non-blocking, and the address it offers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tests/net_plugin_standin/strict_plugin.h"

namespace strict {
namespace {

// NCCL_SOCKET_IFNAME as NCCL reads it: "=name" exact names, "^" excluded prefixes, else prefixes.
bool interfaceWanted(const char* name) {
  const char* spec = std::getenv("NCCL_SOCKET_IFNAME");
  if (spec == nullptr || *spec == '\0') return std::strcmp(name, "lo") != 0;
  std::string list = spec;
  bool exclude = false, exact = false;
  if (list[0] == '^') exclude = true, list.erase(0, 1);
  if (!list.empty() && list[0] == '=') exact = true, list.erase(0, 1);
  bool matched = false;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(begin, end - begin);
    if (!item.empty() && (exact ? item == name : std::strncmp(name, item.c_str(), item.size()) == 0)) matched = true;
    begin = end + 1;
  }
  return exclude ? !matched : matched;
}

}  // namespace

std::string toString(const SocketAddress& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.sa.sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &address.in6.sin6_addr, text, sizeof text);
    return std::string("[") + text + "]:" + std::to_string(ntohs(address.in6.sin6_port));
  }
  ::inet_ntop(AF_INET, &address.in4.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.in4.sin_port));
}

bool chooseAddress(SocketAddress* out, std::string* why) {
  const char* familyName = std::getenv("NCCL_SOCKET_FAMILY");
  const int family = familyName && std::strcmp(familyName, "AF_INET6") == 0 ? AF_INET6 : AF_INET;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    *why = std::string("getifaddrs: ") + std::strerror(errno);
    return false;
  }
  bool found = false;
  for (int pass = 0; pass < 2 && !found; pass++)  // the wanted interfaces, then loopback
    for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != family || !(i->ifa_flags & IFF_UP)) continue;
      if (pass == 0 ? !interfaceWanted(i->ifa_name) : std::strcmp(i->ifa_name, "lo") != 0) continue;
      if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
        continue;  // a scope id would have to travel in the handle
      std::memset(out, 0, sizeof *out);
      std::memcpy(out, i->ifa_addr, family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
      found = true;
    }
  ::freeifaddrs(list);
  if (!found) *why = "no interface that is up has an address of the family asked for (NCCL_SOCKET_IFNAME)";
  return found;
}

long readSome(int fd, void* data, size_t bytes) {
  if (bytes == 0) return 0;
  for (;;) {
    const ssize_t n = ::recv(fd, data, bytes, MSG_DONTWAIT);
    if (n > 0) return long(n);
    if (n == 0) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -2;
  }
}

long writeSome(int fd, const void* data, size_t bytes) {
  if (bytes == 0) return 0;
  for (;;) {
    const ssize_t n = ::send(fd, data, bytes, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return long(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -2;
  }
}

bool drainInput(int fd) {
  char sink[4096];
  for (int i = 0; i < 64; i++) {  // bounded: a peer still sending is not waited for
    const long n = readSome(fd, sink, sizeof sink);
    if (n == 0) return false;
    if (n < 0) return true;
  }
  return false;
}

void closeAbruptly(int fd) {
  linger hard{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  ::close(fd);
}

}  // namespace strict
