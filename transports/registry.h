// The transports a communicator can use, in order of preference, and the choice among them for
// one pair of ranks.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace tutti::transport {

// One of each transport, made for a communicator (each may keep per-communicator state, such as
// the net proxy), in the registry's order: the nearest first.
std::vector<std::unique_ptr<Transport>> makeTransports(TransportContext& context);

// Adds a transport built outside this library (tests, an out-of-tree transport) to every
// communicator made after the call, tried before the built-in ones: it takes the pairs its
// canConnect accepts and leaves the others to them.
using TransportFactory = std::function<std::unique_ptr<Transport>(TransportContext&)>;
void registerTransport(TransportFactory make);

// The first of `transports` that can connect the pair; null when none can, with *whyNot listing
// each one's reason ("local: ...; shm: ...; net: ...").
Transport* chooseTransport(const std::vector<std::unique_ptr<Transport>>& transports, const PeerPair& pair,
                           std::string* whyNot);
// The same for a pair known only by its locality (no GPUs placed).
Transport* chooseTransport(const std::vector<std::unique_ptr<Transport>>& transports, Locality locality,
                           std::string* whyNot);

}  // namespace tutti::transport
