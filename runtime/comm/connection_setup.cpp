// Connection setup through the transport registry: which transport connects each pair, and the
// three phases of offer, attach and complete across one or more communicators.
#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/comm/topo_init.h"
#include "transports/registry.h"

namespace tutti {
namespace {

// The bootstrap tag of a connection's handshake: both ends derive it from the connection's
// identity, so offers for different connections to one peer never cross.
uint32_t connectionTag(const ConnKey& key) {
  return 1000u + (uint32_t(key.tag) * uint32_t(kMaxChannels) + uint32_t(key.channel)) * 4u + uint32_t(key.kind);
}

// One communicator's share of a connection setup, in the three phases ensureConnections runs
// across every communicator of a group (transports/transport.h): receivers offer, senders
// attach, receivers complete. No phase waits for a later one of any rank, so a single thread can
// drive several communicators of one job (ncclCommInitAll, one group).
class ConnectionSetup {
 public:
  ConnectionSetup(ncclComm* comm, const std::vector<ConnKey>& wanted)
      : comm_(comm), deadline_(deadlineAfter(comm->settings.timeoutSeconds)) {
    for (const ConnKey& k : wanted)
      if (!comm->links.connections.count(k)) keys_.push_back(k);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    for (const ConnKey& k : keys_)
      if (k.tag < 0 || k.tag >= kMaxConnectionTags || k.channel < 0 || k.channel >= kMaxChannels)
        throw Error(ErrorCode::InvalidUsage, comm->where() + ": the connection with " + comm->describePeer(k.peer) +
                                                 " on channel " + std::to_string(k.channel) + " has tag " +
                                                 std::to_string(k.tag) + ", outside 0.." +
                                                 std::to_string(kMaxConnectionTags - 1));
    for (const ConnKey& k : keys_) transports_.push_back(&transportTo(comm, k.peer));
    for (Transport* t : transports_) t->open();  // before any offer: net starts its proxy once
  }

  void offer() {
    for (size_t i = 0; i < keys_.size(); i++) {
      const ConnKey& k = keys_[i];
      if (k.send) continue;
      ConnectionOffer offer{};
      pending_.emplace_back(k, transports_[i]->offer(request(k), &offer));
      comm_->identity.bootstrap->send(k.peer, connectionTag(k), &offer, sizeof offer);
    }
  }

  void attach() {
    for (size_t i = 0; i < keys_.size(); i++) {
      const ConnKey& k = keys_[i];
      if (!k.send) continue;
      ConnectionOffer offer{};
      try {
        comm_->identity.bootstrap->recv(k.peer, connectionTag(k), &offer, sizeof offer, secondsLeft());
        made_.emplace_back(k, transports_[i]->attach(request(k), offer, deadline_));
      } catch (const Error& e) {
        throw Error(e.code(), setupFailed(k, e));
      }
    }
  }

  void complete() {
    for (auto& [k, pending] : pending_) {
      try {
        made_.emplace_back(k, pending->complete(deadline_));
      } catch (const Error& e) {
        throw Error(e.code(), setupFailed(k, e));
      }
    }
    pending_.clear();
    for (auto& [k, conn] : made_) {
      const size_t i = size_t(std::lower_bound(keys_.begin(), keys_.end(), k) - keys_.begin());
      conn->adoptCarrier(transports_[i]->traits());
      TUTTI_TRACE(log::Init, "%s: connected %s %s rank %d on channel %d tag %d via %s", comm_->where().c_str(),
                  k.send ? "to" : "from", k.kind == plan::ConnKind::Ring ? "ring peer" : "peer", k.peer, k.channel,
                  k.tag, conn->transport().c_str());
      comm_->links.connections[k] = std::move(conn);
    }
    made_.clear();
  }

 private:
  double secondsLeft() const {
    return std::max(0.001, std::chrono::duration<double>(deadline_ - SteadyClock::now()).count());
  }
  std::string describe(const ConnKey& k) const {
    return (k.send ? "connection from " + comm_->where() + " to " + comm_->describePeer(k.peer)
                   : "connection from " + comm_->describePeer(k.peer) + " to " + comm_->where()) +
           ", channel " + std::to_string(k.channel) + (k.kind == plan::ConnKind::Ring ? ", ring" : ", direct") +
           (k.tag != 0 ? ", tag " + std::to_string(k.tag) : std::string());
  }
  std::string setupFailed(const ConnKey& k, const Error& e) const {
    std::string s = "setting up the " + describe(k) + ": " + e.message();
    if (e.code() == ErrorCode::Timeout)
      s += " (TUTTI_TIMEOUT " + std::to_string(int(comm_->settings.timeoutSeconds)) + " s: did " +
           comm_->describePeer(k.peer) + " make the same call?)";
    // A rank that failed first (a mismatch it caught, say) sends every rank a failure notice, then
    // closes its connections: a connection that ended under this setup is then a consequence, and
    // the notice, which may be a moment behind on the bootstrap, says why.
    if (e.code() == ErrorCode::Remote) {
      const std::string cause = recordedCause(std::chrono::seconds(1));
      if (!cause.empty()) s += "; " + cause;
    }
    return s;
  }
  // The error the communicator has recorded (a peer's failure notice), waiting at most `wait`.
  std::string recordedCause(std::chrono::milliseconds wait) const {
    const auto until = SteadyClock::now() + wait;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(comm_->error.mutex);
        if (comm_->error.asyncError.load() != ncclSuccess && comm_->error.code != ErrorCode::Aborted)
          return comm_->error.message;
      }
      if (SteadyClock::now() >= until) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ConnectionRequest request(const ConnKey& k) const {
    ConnectionRequest r;
    r.peer = k.peer;
    r.channel = k.channel;
    r.tag = k.tag;
    r.netDevice = netDeviceOf(comm_->planning.topology.get(), comm_->identity.rank, k.channel);
    r.description = describe(k);
    r.workerBell = &comm_->control.own->bells[workerOfChannel(comm_, k.channel)];
    ControlBlock* peerControl = comm_->control.ofRank[size_t(k.peer)];
    r.peerBells = peerControl != nullptr ? peerControl->bells : nullptr;
    r.pair = pairBetween(comm_, comm_->identity.rank, k.peer);
    return r;
  }

  ncclComm* comm_;
  SteadyTime deadline_;
  std::vector<ConnKey> keys_;
  std::vector<Transport*> transports_;  // by keys_
  std::vector<std::pair<ConnKey, std::unique_ptr<PendingReceive>>> pending_;
  std::vector<std::pair<ConnKey, std::unique_ptr<Connection>>> made_;
};

// The communicator as its transports see it.
class CommTransportContext final : public TransportContext {
 public:
  explicit CommTransportContext(ncclComm* comm) : comm_(comm) {}
  std::string where() const override { return comm_->where(); }
  std::string describePeer(int peer) const override { return comm_->describePeer(peer); }
  int peerPid(int peer) const override { return comm_->identity.peers[size_t(peer)].pid; }
  int device() const override { return comm_->identity.device; }
  const std::atomic<bool>& abortFlag() const override { return comm_->error.abortFlag; }
  double timeoutSeconds() const override { return comm_->settings.timeoutSeconds; }
  int spin() const override { return comm_->settings.spin; }
  // A nonblocking init's ncclInProgress counts: nothing may be reported over it.
  bool failed() const override { return comm_->error.asyncError.load() != ncclSuccess; }
  void fail(const Error& error, int peer) override { comm_->fail(error, true, peer); }
  FifoShape fifoShape() const override {
    return FifoShape{uint32_t(comm_->settings.nsteps), comm_->settings.slotBytes, comm_->executor.backend->llBytes()};
  }
  std::shared_ptr<kern::DeviceMemory> fifoMemory() const override { return comm_->links.fifoMemory; }
  std::string netName() const override { return comm_->identity.config.netName; }
  std::optional<topo::PathType> gpuNicPath(const std::string& nicPciPath) const override {
    const CommTopology* topology = comm_->planning.topology.get();
    const size_t rank = size_t(comm_->identity.rank);
    if (topology == nullptr || nicPciPath.empty() || rank >= topology->system.ranks.size()) return std::nullopt;
    const topo::RankPlacement& place = topology->system.ranks[rank];
    if (place.gpu < 0 || place.node < 0 || size_t(place.node) >= topology->system.nodes.size()) return std::nullopt;
    const topo::TopologyGraph& graph = topology->system.nodes[size_t(place.node)].graph;
    // The NIC's node is named by its PCI bus id, the last element of its sysfs path.
    const std::string busId = nicPciPath.substr(nicPciPath.find_last_of('/') + 1);
    if (!topo::isBusId(busId)) return std::nullopt;
    const int nic = graph.find(topo::NodeKind::Nic, topo::normalizeBusId(busId));
    if (nic < 0) return std::nullopt;
    const topo::Path path = graph.path(place.gpu, nic);
    if (path.nodes.empty()) return std::nullopt;
    return path.type;
  }
  bool executorReadsOtherProcesses() const override { return comm_->executor.backend->readsOtherProcesses(); }

 private:
  ncclComm* comm_;
};

// Names joined by '+' as the logs and tuttiCommTransports give them; `none` if there are none.
std::string joinNames(const std::set<std::string>& names, const std::string& none) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : "+") + n;
  return text.empty() ? none : text;
}

}  // namespace

Locality localityBetween(const ncclComm* comm, int a, int b) {
  const RankInfo& first = comm->identity.peers[size_t(a)];
  const RankInfo& second = comm->identity.peers[size_t(b)];
  if (first.processToken == second.processToken) return Locality::SameProcess;
  if (first.hostHash == second.hostHash) return Locality::SameHost;
  return Locality::OtherHost;
}

PeerPair pairBetween(const ncclComm* comm, int a, int b) {
  PeerPair pair;
  pair.locality = localityBetween(comm, a, b);
  pair.ranks[0] = a;
  pair.ranks[1] = b;
  if (pair.locality == Locality::SameProcess) {
    // Devices of one process are numbered alike for all its ranks; both directions, so that both
    // ends of the pair see the same.
    pair.devices[0] = comm->identity.peers[size_t(a)].device;
    pair.devices[1] = comm->identity.peers[size_t(b)].device;
    const kern::ExecutorBackend* backend = comm->executor.backend.get();
    if (backend != nullptr && pair.devices[0] != pair.devices[1])
      pair.peerAccess = backend->canAccessPeer(pair.devices[0], pair.devices[1]) &&
                        backend->canAccessPeer(pair.devices[1], pair.devices[0]);
  }
  const CommTopology* topology = comm->planning.topology.get();
  if (pair.locality == Locality::OtherHost || topology == nullptr) return pair;
  const std::vector<topo::RankPlacement>& ranks = topology->system.ranks;
  if (size_t(std::max(a, b)) >= ranks.size()) return pair;
  const topo::RankPlacement& first = ranks[size_t(a)];
  const topo::RankPlacement& second = ranks[size_t(b)];
  if (first.gpu >= 0 && second.gpu >= 0 && first.node == second.node)
    pair.gpus = topo::gpuPair(topology->system.nodes[size_t(first.node)].graph, first.gpu, second.gpu);
  return pair;
}

Transport* transportBetween(const ncclComm* comm, int a, int b, std::string* whyNot) {
  std::string reasons;
  Transport* transport = chooseTransport(comm->links.transports, pairBetween(comm, a, b), &reasons);
  if (whyNot != nullptr) *whyNot = reasons;
  return transport;
}

Transport& transportTo(const ncclComm* comm, int peer) {
  std::string whyNot;
  Transport* transport = transportBetween(comm, comm->identity.rank, peer, &whyNot);
  if (transport == nullptr)
    throw Error(ErrorCode::InvalidUsage,
                "no transport can connect " + comm->where() + " and " + comm->describePeer(peer) + ": " + whyNot);
  return *transport;
}

void makeCommTransports(ncclComm* comm) {
  comm->links.transportContext = std::make_unique<CommTransportContext>(comm);
  comm->links.transports = makeTransports(*comm->links.transportContext);
}

void ensureConnections(const std::vector<std::pair<ncclComm*, std::vector<ConnKey>>>& wanted) {
  std::vector<ConnectionSetup> setups;
  for (auto& [comm, keys] : wanted) setups.emplace_back(comm, keys);
  for (ConnectionSetup& s : setups) s.offer();
  for (ConnectionSetup& s : setups) s.attach();
  for (ConnectionSetup& s : setups) s.complete();
}

void ensureConnections(ncclComm* comm, const std::vector<ConnKey>& keys) { ensureConnections({{comm, keys}}); }

std::string peerTransports(const ncclComm* comm) {
  std::set<std::string> names;
  for (int peer = 0; peer < comm->identity.nranks; peer++)
    if (peer != comm->identity.rank) names.insert(transportTo(comm, peer).name());
  return joinNames(names, "none");
}

std::string connectionTransports(const ncclComm* comm) {
  std::set<std::string> names;
  for (auto& [key, conn] : comm->links.connections) names.insert(conn->transport());
  return joinNames(names, "none");
}

std::string transportNames(const std::set<Transport*>& transports) {
  std::set<std::string> names;
  for (Transport* t : transports) names.insert(t->name());
  return joinNames(names, "");
}

}  // namespace tutti
