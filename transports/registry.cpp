// The registry of transports: the one list of them, nearest first. A new transport is its folder
// and one line in kTransports, or a registerTransport call from outside the library.
#include "transports/registry.h"

#include <mutex>

#include "base/error.h"
#include "transports/local/local_transport.h"
#include "transports/net/net_transport.h"
#include "transports/p2p/p2p_transport.h"
#include "transports/shm/shm_transport.h"

namespace tutti::transport {
namespace {

// Connection setup takes the first that can connect a pair.
constexpr std::unique_ptr<Transport> (*kTransports[])(TransportContext&) = {
    local::makeLocalTransport,  // rank threads of one process
    p2p::makeP2pTransport,      // processes of one node, FIFOs in device memory the peer maps (CUDA IPC)
    shm::makeShmTransport,      // processes of one node
    net::makeNetTransport,      // anything else, and whatever the variables above turn off
};

struct Registered {
  std::mutex mutex;
  std::vector<TransportFactory> factories;
};

Registered& registered() {
  static Registered* r = new Registered;  // never destroyed: communicators may outlive static destruction
  return *r;
}

}  // namespace

void registerTransport(TransportFactory make) {
  if (!make) throw Error(ErrorCode::InvalidArgument, "registerTransport: no factory given");
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories.push_back(std::move(make));
}

std::vector<std::unique_ptr<Transport>> makeTransports(TransportContext& context) {
  std::vector<TransportFactory> first;
  {
    Registered& r = registered();
    std::lock_guard<std::mutex> lock(r.mutex);
    first = r.factories;
  }
  std::vector<std::unique_ptr<Transport>> made;
  for (const TransportFactory& make : first) made.push_back(make(context));
  for (auto make : kTransports) made.push_back(make(context));
  return made;
}

Transport* chooseTransport(const std::vector<std::unique_ptr<Transport>>& transports, Locality locality,
                           std::string* whyNot) {
  PeerPair pair;
  pair.locality = locality;
  return chooseTransport(transports, pair, whyNot);
}

Transport* chooseTransport(const std::vector<std::unique_ptr<Transport>>& transports, const PeerPair& pair,
                           std::string* whyNot) {
  std::string reasons;
  for (const auto& transport : transports) {
    std::string reason;
    if (transport->canConnect(pair, &reason)) return transport.get();
    reasons += (reasons.empty() ? "" : "; ") + transport->name() + ": " + reason;
  }
  *whyNot = reasons;
  return nullptr;
}

}  // namespace tutti::transport
