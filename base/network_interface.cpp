// Listing this host's interfaces and choosing among them (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY).
#include "base/network_interface.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "base/error.h"
#include "base/tunables.h"

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

}  // namespace

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
    interface.address =
        SocketAddress::fromSockaddr(entry->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
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
      throw Error(ErrorCode::InvalidUsage, "NCCL_SOCKET_IFNAME=" + ifnameSpec +
                                               " matches none of this host's interfaces (" + familyName(family) +
                                               "): " + describeInterfaces(available));
  } else {
    for (const NetworkInterface& interface : candidates)
      if (!interface.loopback && !interface.address.isLinkLocal() && !startsWith(interface.name, "docker") &&
          !startsWith(interface.name, "virbr"))
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
  std::string spec = tunables::kSocketIfname.get();
  int family = parseSocketFamily(tunables::kSocketFamily.get());
  return selectNetworkInterfaces(listNetworkInterfaces(), spec, family);
}

NetworkInterface findInterfaceToReach(const SocketAddress& remote) {
  auto reaches = [&](const NetworkInterface& interface) {
    if (interface.address.family() != remote.family()) return false;
    return remote.isLoopback() ? interface.loopback : interface.address.sameSubnet(remote, interface.prefixLength);
  };
  std::string spec = tunables::kSocketIfname.get();
  int family = parseSocketFamily(tunables::kSocketFamily.get());
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

}  // namespace tutti
