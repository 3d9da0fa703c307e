// This host's network interfaces, and the choice among them that NCCL_SOCKET_IFNAME and
// NCCL_SOCKET_FAMILY make (NCCL's syntax: prefixes, ^ to exclude, = for exact names).
#pragma once

#include <string>
#include <vector>

#include "base/socket_address.h"

namespace tutti {

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

}  // namespace tutti
