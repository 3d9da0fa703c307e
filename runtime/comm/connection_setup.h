// Connections between ranks: their identity, the transport that connects each pair (through the
// registry of transports/), and their setup across one or more communicators.
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/comm/conn_key.h"
#include "transports/transport.h"

struct ncclComm;

namespace tutti {

constexpr int kMaxConnectionTags = 1 << 16;  // lane tags 0..kMaxConnectionTags-1 (bootstrap tags stay within 32 bits)

// Makes the communicator's transports (transports/registry.h) and the context they see it
// through; init does, once the settings are agreed.
void makeCommTransports(ncclComm* comm);

// Where ranks a and b of the communicator are relative to each other; both see the same.
transport::Locality localityBetween(const ncclComm* comm, int a, int b);
// Ranks a and b as the transports are asked about them: their locality and, where the topology
// places both on GPUs of one node, the GPUs' distance.
transport::PeerPair pairBetween(const ncclComm* comm, int a, int b);
// The transport that connects ranks a and b: the registry's first that can; null when none can,
// with each transport's reason in *whyNot (if given).
transport::Transport* transportBetween(const ncclComm* comm, int a, int b, std::string* whyNot = nullptr);
// The same from this rank to `peer`; throws InvalidUsage "no transport can connect ..." with the
// reasons when none can.
transport::Transport& transportTo(const ncclComm* comm, int peer);

// Connections this rank needs, created (receive side) or attached (send side), with the
// offers carried over the bootstrap. Collective over the ranks named in the keys.
void ensureConnections(ncclComm* comm, const std::vector<ConnKey>& keys);
// The same for several communicators at once, phase by phase, so that one thread can set up the
// connections of several ranks of one job (ncclCommInitAll and a group over its comms).
void ensureConnections(const std::vector<std::pair<ncclComm*, std::vector<ConnKey>>>& wanted);

// How this rank reaches its peers, as the transport choice decides it for each pair (whether or
// not a connection has been made yet): the distinct Transport::name()s joined by '+', "none" for
// a communicator of one rank.
std::string peerTransports(const ncclComm* comm);
// The transports of the connections made so far, named alike.
std::string connectionTransports(const ncclComm* comm);
// The names of `transports` joined by '+', "" for none.
std::string transportNames(const std::set<transport::Transport*>& transports);

}  // namespace tutti
