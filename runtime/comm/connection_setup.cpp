// Connection setup through the transport registry: which transport connects each pair, and the
// offers, then the attach and complete steps polled in one loop, across one or more communicators.
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

// One communicator's share of a connection setup (transports/transport.h): receivers offer, then
// every attach and every completion is a step that ensureConnections polls, for all connections of
// all communicators of a group in one loop, until each is made, the deadline passes or the
// communicator stops (an abort, or a peer's failure notice). No step waits for a peer, so a
// connect that completes only after the peer's accept and that accept both move, and a single
// thread can drive several communicators of one job (ncclCommInitAll, one group).
class ConnectionSetup {
  static constexpr double kOffersShareOfTimeout = 0.75;

 public:
  ConnectionSetup(ncclComm* comm, const std::vector<ConnKey>& wanted)
      : comm_(comm),
        deadline_(deadlineAfter(comm->settings.timeoutSeconds)),
        offersDeadline_(deadlineAfter(comm->settings.timeoutSeconds * kOffersShareOfTimeout)) {
    std::vector<ConnKey> keys;
    for (const ConnKey& k : wanted)
      if (!comm->links.connections.count(k)) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (const ConnKey& k : keys)
      if (k.tag < 0 || k.tag >= kMaxConnectionTags || k.channel < 0 || k.channel >= kMaxChannels)
        throw Error(ErrorCode::InvalidUsage, comm->where() + ": the connection with " + comm->describePeer(k.peer) +
                                                 " on channel " + std::to_string(k.channel) + " has tag " +
                                                 std::to_string(k.tag) + ", outside 0.." +
                                                 std::to_string(kMaxConnectionTags - 1));
    for (const ConnKey& k : keys) {
      Link l;
      l.key = k;
      l.transport = &transportTo(comm, k.peer);
      links_.push_back(std::move(l));
    }
    for (Link& l : links_) l.transport->open();  // before any offer: net starts its proxy once
  }

  void offer() {
    for (Link& l : links_) {
      if (l.key.send) continue;
      transport::ConnectionOffer offer{};
      guarded(l, [&] {
        l.receive = l.transport->offer(request(l.key), &offer);
        comm_->identity.bootstrap->send(l.key.peer, connectionTag(l.key), &offer, sizeof offer);
      });
    }
  }

  // One step of every sending (or every receiving) connection not made yet: a sender takes its
  // offer once it has arrived and attaches (a net sender's connect), then polls; a receiver
  // completes (a net receiver's accept). True when one of them moved.
  bool step(bool sending) {
    bool moved = false;
    for (Link& l : links_) {
      if (l.made || l.key.send != sending) continue;
      guarded(l, [&] {
        if (l.key.send && !l.send) {
          if (!attachIfOffered(l)) return;
          moved = true;
        }
        l.made = l.key.send ? l.send->poll(deadline_) : l.receive->poll(deadline_);
        if (l.made) moved = true;
      });
    }
    return moved;
  }

  // Every sending connection has attached (its connect was called at least once). As with NCCL,
  // whose ranks exchange every connection's details before any connects, no accept runs before
  // this rank's connects: two ranks of a plugin whose accept blocks until its peer connects
  // (google/nccl-fastsocket) cannot then each sit in its accept, waiting for the other's connect.
  // Every offer is sent as its rank enters the setup, so this waits only for peers to arrive; a
  // peer that does not within the offers' deadline fails the setup, naming it (checkWaits).
  bool sendsAttached() {
    bool all = true;
    for (Link& l : links_)
      if (l.key.send && !l.send && !l.made) {
        guarded(l, [&] { (void)attachIfOffered(l); });
        all = false;  // even if attached now: its connect is polled in the next pass first
      }
    return all;
  }

  bool done() const {
    return std::all_of(links_.begin(), links_.end(), [](const Link& l) { return l.made != nullptr; });
  }

  // Ends the setup when its communicator stopped (with the cause it recorded: a peer's failure
  // notice names the rank that failed first) or its deadline passed (naming what is missing).
  void checkWaits() const {
    if (comm_->error.abortFlag.load()) {
      std::string cause = recordedCause(std::chrono::milliseconds(0));
      if (!cause.empty()) throw Error(recordedCode(), cause);
      throw Error(ErrorCode::Aborted, comm_->where() + ": setting up connections: aborted");
    }
    const SteadyTime now = SteadyClock::now();
    // A peer whose offer is missing holds back this rank's accepts, so the ranks that connect to
    // this one wait on it too: it fails first, before their own deadline, and its failure notice
    // names that peer to them.
    if (now >= offersDeadline_)
      for (const Link& l : links_)
        if (l.key.send && !l.send && !l.made)
          throw Error(ErrorCode::Timeout, setupFailed(l.key, Error(ErrorCode::Timeout, missing(l))));
    if (now < deadline_) return;
    for (const Link& l : links_)
      if (!l.made) throw Error(ErrorCode::Timeout, setupFailed(l.key, Error(ErrorCode::Timeout, missing(l))));
  }

  // Hands the made connections to the communicator.
  void finish() {
    for (Link& l : links_) {
      l.made->adoptCarrier(l.transport->traits());
      TUTTI_TRACE(log::Init, "%s: connected %s %s rank %d on channel %d tag %d via %s", comm_->where().c_str(),
                  l.key.send ? "to" : "from", l.key.kind == plan::ConnKind::Ring ? "ring peer" : "peer", l.key.peer,
                  l.key.channel, l.key.tag, l.made->transport().c_str());
      comm_->links.connections[l.key] = std::move(l.made);
    }
    links_.clear();
  }

 private:
  // One connection's setup: its transport, the offer (sender), and its pending step.
  struct Link {
    ConnKey key{};
    transport::Transport* transport = nullptr;
    transport::ConnectionOffer offer{};
    std::unique_ptr<transport::PendingSend> send;
    std::unique_ptr<transport::PendingReceive> receive;
    std::unique_ptr<transport::Connection> made;
  };

  // A sender's attach (a net sender's connect) once its peer's offer has arrived; false while it
  // has not. Within guarded().
  bool attachIfOffered(Link& l) {
    if (!comm_->identity.bootstrap->tryRecv(l.key.peer, connectionTag(l.key), &l.offer, sizeof l.offer)) return false;
    offerFrom_.insert(l.key.peer);
    l.send = l.transport->attach(request(l.key), l.offer, deadline_);
    return true;
  }

  // Runs one step of a connection's setup; an error names the connection.
  template <typename Step>
  void guarded(const Link& l, Step step) {
    try {
      step();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Aborted) checkWaits();  // the recorded cause, if there is one
      throw Error(e.code(), setupFailed(l.key, e));
    }
  }

  // What a connection still waits for at the deadline, blaming a peer only for what it did not do.
  std::string missing(const Link& l) const {
    const std::string peer = comm_->describePeer(l.key.peer);
    const std::string within = " within TUTTI_TIMEOUT (" + std::to_string(int(comm_->settings.timeoutSeconds)) + " s)";
    if (l.key.send && !l.send)
      return peer + " sent no offer for it within " +
             std::to_string(int(comm_->settings.timeoutSeconds * kOffersShareOfTimeout)) +
             " s (three quarters of TUTTI_TIMEOUT): did " + peer + " make the same call?";
    if (l.key.send) return "the connect did not complete" + within + "; " + peer + " offered it, so it made the call";
    return peer + " did not attach or connect" + within +
           (offerFrom_.count(l.key.peer) ? "; its offers for this call arrived, so it made the call"
                                         : ": did " + peer + " make the same call?");
  }
  std::string describe(const ConnKey& k) const {
    return (k.send ? "connection from " + comm_->where() + " to " + comm_->describePeer(k.peer)
                   : "connection from " + comm_->describePeer(k.peer) + " to " + comm_->where()) +
           ", channel " + std::to_string(k.channel) + (k.kind == plan::ConnKind::Ring ? ", ring" : ", direct") +
           (k.tag != 0 ? ", tag " + std::to_string(k.tag) : std::string());
  }
  std::string setupFailed(const ConnKey& k, const Error& e) const {
    std::string s = "setting up the " + describe(k) + ": " + e.message();
    // A rank that failed first (a mismatch it caught, say) sends every rank a failure notice, then
    // closes its connections, and so do the ranks its notice reached: a connection that ended under
    // this setup is then a consequence, and the notice, which may be a moment behind on the
    // bootstrap (its sender tells one rank after another), is the cause, which leads.
    if (e.code() == ErrorCode::Remote) {
      const std::string cause = recordedCause(std::chrono::seconds(1));
      if (!cause.empty()) return cause + " (and then, " + s + ")";
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
  ErrorCode recordedCode() const {
    std::lock_guard<std::mutex> lock(comm_->error.mutex);
    return comm_->error.code;
  }
  transport::ConnectionRequest request(const ConnKey& k) const {
    transport::ConnectionRequest r;
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
  SteadyTime offersDeadline_;  // for the peers' offers: earlier, so that the rank missing one fails first
  std::vector<Link> links_;    // by key
  std::set<int> offerFrom_;    // peers whose offers for this setup arrived: they made the call
};

// The communicator as its transports see it.
class CommTransportContext final : public transport::TransportContext {
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
  transport::FifoShape fifoShape() const override {
    return transport::FifoShape{uint32_t(comm_->settings.nsteps), comm_->settings.slotBytes,
                                comm_->executor.backend->llBytes()};
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

transport::Locality localityBetween(const ncclComm* comm, int a, int b) {
  const RankInfo& first = comm->identity.peers[size_t(a)];
  const RankInfo& second = comm->identity.peers[size_t(b)];
  if (first.processToken == second.processToken) return transport::Locality::SameProcess;
  if (first.hostHash == second.hostHash) return transport::Locality::SameHost;
  return transport::Locality::OtherHost;
}

transport::PeerPair pairBetween(const ncclComm* comm, int a, int b) {
  transport::PeerPair pair;
  pair.locality = localityBetween(comm, a, b);
  pair.ranks[0] = a;
  pair.ranks[1] = b;
  if (pair.locality == transport::Locality::SameProcess) {
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
  if (pair.locality == transport::Locality::OtherHost || topology == nullptr) return pair;
  const std::vector<topo::RankPlacement>& ranks = topology->system.ranks;
  if (size_t(std::max(a, b)) >= ranks.size()) return pair;
  const topo::RankPlacement& first = ranks[size_t(a)];
  const topo::RankPlacement& second = ranks[size_t(b)];
  if (first.gpu >= 0 && second.gpu >= 0 && first.node == second.node)
    pair.gpus = topo::gpuPair(topology->system.nodes[size_t(first.node)].graph, first.gpu, second.gpu);
  return pair;
}

transport::Transport* transportBetween(const ncclComm* comm, int a, int b, std::string* whyNot) {
  std::string reasons;
  transport::Transport* transport =
      transport::chooseTransport(comm->links.transports, pairBetween(comm, a, b), &reasons);
  if (whyNot != nullptr) *whyNot = reasons;
  return transport;
}

transport::Transport& transportTo(const ncclComm* comm, int peer) {
  std::string whyNot;
  transport::Transport* transport = transportBetween(comm, comm->identity.rank, peer, &whyNot);
  if (transport == nullptr)
    throw Error(ErrorCode::InvalidUsage,
                "no transport can connect " + comm->where() + " and " + comm->describePeer(peer) + ": " + whyNot);
  return *transport;
}

void makeCommTransports(ncclComm* comm) {
  comm->links.transportContext = std::make_unique<CommTransportContext>(comm);
  comm->links.transports = transport::makeTransports(*comm->links.transportContext);
}

void ensureConnections(const std::vector<std::pair<ncclComm*, std::vector<ConnKey>>>& wanted) {
  std::vector<ConnectionSetup> setups;
  for (auto& [comm, keys] : wanted) setups.emplace_back(comm, keys);
  for (ConnectionSetup& s : setups) s.offer();
  // Steps until every connection is made; between passes where nothing moved, a pause that grows
  // from 10 us to 1 ms (a peer on another host answers in tens of microseconds; many ranks as
  // threads on few cores must not spin).
  auto pause = std::chrono::microseconds(10);
  // Every connect is called once before the first accept, as NCCL orders them: a plugin whose
  // accept blocks until a peer connects (google/nccl-fastsocket) then finds its peer's connection
  // waiting, since every rank started its connects first; one whose connect completes only after
  // the peer's accept (aws-ofi-nccl) has both polled, interleaved, from then on. A rank whose
  // peer never offers fails at the offers' deadline, before the ranks that wait on its accepts.
  for (;;) {
    bool moved = false;
    for (ConnectionSetup& s : setups) moved = s.step(true) || moved;
    if (std::all_of(setups.begin(), setups.end(), [](ConnectionSetup& s) { return s.sendsAttached(); }))
      for (ConnectionSetup& s : setups) moved = s.step(false) || moved;
    if (std::all_of(setups.begin(), setups.end(), [](const ConnectionSetup& s) { return s.done(); })) break;
    for (const ConnectionSetup& s : setups) s.checkWaits();
    if (moved) {
      pause = std::chrono::microseconds(10);
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  for (ConnectionSetup& s : setups) s.finish();
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

std::string transportNames(const std::set<transport::Transport*>& transports) {
  std::set<std::string> names;
  for (transport::Transport* t : transports) names.insert(t->name());
  return joinNames(names, "");
}

}  // namespace tutti
