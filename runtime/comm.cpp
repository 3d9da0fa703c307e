// Communicator init (join, exchange of rank information and control blocks, ring
// connections), connection setup, failure recording and the registry of live handles.
#include "runtime/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>
#include <unordered_set>

#include "algorithms/ring_order.h"
#include "base/clock.h"
#include "base/host_identity.h"
#include "base/log.h"
#include "base/tunables.h"
#include "transports/net/net.h"

using tutti::ConnKey;
using tutti::Error;
using tutti::ErrorCode;

namespace tutti {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<const ncclComm*>& registry() {
  static std::unordered_set<const ncclComm*> r;
  return r;
}

enum class PeerPath { Local, Shm, Net };

// The bootstrap tag of a connection's handshake: both ends derive it from the connection's
// identity, so offers for different connections to one peer never cross.
uint32_t connectionTag(const ConnKey& key) {
  return 1000u + (uint32_t(key.tag) * uint32_t(kMaxChannels) + uint32_t(key.channel)) * 4u + uint32_t(key.kind);
}

// How two ranks reach each other. Both ends reach the same verdict: it depends only on the
// pair's identities (and on variables that every rank of a job is expected to share).
PeerPath pathBetween(const RankInfo& a, const RankInfo& b) {
  if (a.processToken == b.processToken && !tunables::kP2pDisable.get()) return PeerPath::Local;
  if (a.hostHash == b.hostHash && !tunables::kShmDisable.get()) return PeerPath::Shm;
  return PeerPath::Net;
}

std::string pathName(const ncclComm* comm, PeerPath path) {
  switch (path) {
    case PeerPath::Local: return "local";
    case PeerPath::Shm: return "shm";
    case PeerPath::Net: return comm->proxy ? std::string("net/") + comm->proxy->backend().name() : "net";
  }
  return "?";
}

// Transport names as the logs and tuttiCommTransports give them: joined by '+', `none` if empty.
std::string joinNames(const std::set<std::string>& names, const std::string& none) {
  std::string text;
  for (const std::string& n : names) text += (text.empty() ? "" : "+") + n;
  return text.empty() ? none : text;
}

// The proxy and its backend, opened once per communicator (NCCL_NET, ncclConfig_t.netName,
// TUTTI_NET_REQUIRE).
void openProxy(ncclComm* comm) {
  if (comm->proxy) return;
  std::string requested = !comm->config.netName.empty() ? comm->config.netName : tunables::kNet.get();
  comm->proxy = std::make_unique<NetProxy>(comm, net::openNetBackend(requested, tunables::kNetRequire.get()));
}

// The network identity a rank shows the others, for rank 0's summary of the job's layout.
struct NetIdentity {
  char interfaceName[32];
  char address[64];
};

// Rank 0's one-line picture of the communicator: ranks, nodes, the transports inside and between
// nodes, and each node's network interface and address (gathered from every rank when the job
// spans nodes). Collective: every rank calls it, with the same view of the peers.
void describeLayout(ncclComm* comm) {
  std::map<uint64_t, std::vector<int>> ranksOfHost;
  std::vector<uint64_t> hostOrder;  // by first rank, so node numbers follow rank order
  for (int r = 0; r < comm->nranks; r++) {
    uint64_t hash = comm->peers[size_t(r)].hostHash;
    if (ranksOfHost[hash].empty()) hostOrder.push_back(hash);
    ranksOfHost[hash].push_back(r);
  }
  std::vector<NetIdentity> identities;
  if (hostOrder.size() > 1) {
    // Every rank agrees that the job spans nodes, so every rank takes part in this gather.
    openProxy(comm);
    net::NetProperties nic = comm->proxy->backend().properties(0);
    identities.assign(size_t(comm->nranks), NetIdentity{});
    NetIdentity& mine = identities[size_t(comm->rank)];
    std::strncpy(mine.interfaceName, nic.name.c_str(), sizeof mine.interfaceName - 1);
    std::strncpy(mine.address, nic.address.c_str(), sizeof mine.address - 1);
    comm->bootstrap->allGather(identities.data(), sizeof(NetIdentity));
  }
  if (comm->rank != 0 || !log::enabled(log::Level::Info, log::Init)) return;

  // Ranks of one node talk as their neighbours in rank order do; several kinds show up when a
  // node mixes processes and threads.
  std::set<PeerPath> intraPaths;
  for (auto& [hash, ranks] : ranksOfHost)
    for (size_t i = 1; i < ranks.size(); i++) intraPaths.insert(pathBetween(comm->peers[size_t(ranks[i - 1])], comm->peers[size_t(ranks[i])]));
  // Ring neighbours are such pairs, so the network is needed anyway; open it now to name it.
  if (intraPaths.count(PeerPath::Net)) openProxy(comm);
  std::set<std::string> intra;
  for (PeerPath path : intraPaths) intra.insert(pathName(comm, path));
  std::string intraText = joinNames(intra, "");
  std::string nodesText;
  for (size_t n = 0; n < hostOrder.size(); n++) {
    const std::vector<int>& ranks = ranksOfHost[hostOrder[n]];
    nodesText += "; node " + std::to_string(n) + " " + comm->peers[size_t(ranks[0])].hostname + " (" + std::to_string(ranks.size()) +
                 (ranks.size() == 1 ? " rank" : " ranks");
    if (!identities.empty()) {
      const NetIdentity& id = identities[size_t(ranks[0])];
      nodesText += ", " + std::string(id.interfaceName) + " " + id.address;
    }
    nodesText += ")";
  }
  TUTTI_INFO(log::Init, "comm %p layout: %d ranks on %zu %s, intra-node %s, inter-node %s%s", static_cast<void*>(comm), comm->nranks,
             hostOrder.size(), hostOrder.size() == 1 ? "node" : "nodes", intraText.empty() ? "none" : intraText.c_str(),
             hostOrder.size() > 1 ? pathName(comm, PeerPath::Net).c_str() : "none", nodesText.c_str());
}

}  // namespace

void registerComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(comm);
}
// Bumped by every removal: a thread's last positive answer stays valid while it is unchanged.
// Every call checks its communicator, and ranks that are threads of one process would otherwise
// pass the registry's lock (one cache line) between cores on every call.
static std::atomic<uint64_t> registryGeneration{0};
struct LastLiveComm {
  const ncclComm* comm = nullptr;
  uint64_t generation = 0;
};
static thread_local LastLiveComm tLastLive;

void unregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().erase(comm);
  registryGeneration.fetch_add(1, std::memory_order_release);
}
bool isLiveComm(const ncclComm* comm) {
  const uint64_t generation = registryGeneration.load(std::memory_order_acquire);
  if (comm != nullptr && tLastLive.comm == comm && tLastLive.generation == generation) return true;
  std::lock_guard<std::mutex> lock(registryMutex());
  if (registry().count(comm) == 0) return false;
  tLastLive = {comm, registryGeneration.load(std::memory_order_relaxed)};
  return true;
}

int workerOfChannel(const ncclComm* comm, int channel) { return channel % comm->nworkers; }

std::string peerTransports(const ncclComm* comm) {
  std::set<std::string> names;
  for (int peer = 0; peer < comm->nranks; peer++)
    if (peer != comm->rank) names.insert(pathName(comm, pathBetween(comm->peers[size_t(comm->rank)], comm->peers[size_t(peer)])));
  return joinNames(names, "none");
}

int nodeCount(const ncclComm* comm) {
  std::set<uint64_t> hosts;
  for (const RankInfo& p : comm->peers) hosts.insert(p.hostHash);
  return int(hosts.size());
}

namespace {
// FIFO slots of a communicator whose ranks are each on their own node, unless NCCL_BUFFSIZE or
// TUTTI_NSTEPS says otherwise: over TCP between two namespaces 1 MiB chunks moved 10-30% more than
// 512 KiB ones from 64 MiB up, and 4 slots carried smaller operations' 512 KiB chunks as well as 8
// (perf/RESULTS.md, "1 MiB slots for network-only communicators"; where from 16 to 64 MiB the
// whole slot starts to pay was within the benchmark's spread).
constexpr int kNetworkSlots = 4;
constexpr size_t kNetworkSlotBytes = size_t(1) << 20;
// Busy polls before a wait yields, when a host's ranks outnumber its cores (TUTTI_SPIN unset).
constexpr int kOversubscribedSpin = 20;

// Ranks per node when the nodes hold contiguous blocks of ranks of one size, else 0.
int uniformRanksPerNode(const std::vector<RankInfo>& peers) {
  size_t block = 1;
  while (block < peers.size() && peers[block].hostHash == peers[0].hostHash) block++;
  if (peers.size() % block != 0) return 0;
  for (size_t r = 0; r < peers.size(); r++)
    if (peers[r].hostHash != peers[r / block * block].hostHash || (r % block == 0 && r > 0 && peers[r].hostHash == peers[r - 1].hostHash))
      return 0;
  return int(block);
}
}  // namespace

void initCommunicator(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device) {
  SteadyTime start = SteadyClock::now();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = device;
  log::setThreadDevice(device);

  BootstrapOptions options;
  options.abortFlag = &comm->abortFlag;
  comm->bootstrap = Bootstrap::create(ids, nIds, rank, nranks, options);
  comm->bootstrap->setNoticeHandler([comm](int sender, const std::string& text) { comm->failFromNotice(sender, text); });
  double bootstrapSeconds = secondsSince(start);

  // Everyone's identity, and rank 0's settings for all.
  RankInfo me{};
  me.hostHash = hostHash();
  me.processToken = processToken();
  me.pid = int32_t(getpid());
  me.device = device;
  std::string host = hostname();
  std::strncpy(me.hostname, host.c_str(), sizeof me.hostname - 1);
  int maxChannels = int(tunables::kMaxNchannels.get());
  int minChannels = int(tunables::kMinNchannels.get());
  if (comm->config.maxCTAs) maxChannels = std::min(maxChannels, *comm->config.maxCTAs);
  if (comm->config.minCTAs) minChannels = std::max(minChannels, *comm->config.minCTAs);
  // NCCL_MIN_NCHANNELS above NCCL_MAX_NCHANNELS: the minimum wins, as the larger request.
  if (minChannels > maxChannels)
    TUTTI_WARN("%s: NCCL_MIN_NCHANNELS (or minCTAs) %d is above NCCL_MAX_NCHANNELS (or maxCTAs) %d: using %d channels",
               comm->where().c_str(), minChannels, maxChannels, std::clamp(minChannels, 1, kMaxChannels));
  me.nchannels = std::clamp(std::max(minChannels, maxChannels), 1, kMaxChannels);
  me.minChannels = std::clamp(minChannels, 1, me.nchannels);
  int64_t nsteps = tunables::kNsteps.get();
  checkFifoSteps(nsteps, "");
  me.nsteps = int32_t(nsteps);
  int64_t buffsize = tunables::kBuffsize.get();
  if (buffsize < int64_t(me.nsteps) * 4096)
    throw Error(ErrorCode::InvalidUsage, "NCCL_BUFFSIZE=" + std::to_string(buffsize) + " is too small: it needs at least 4096 bytes for each of the " +
                                             std::to_string(me.nsteps) + " FIFO slots (TUTTI_NSTEPS)");
  me.slotBytes = uint64_t(buffsize / me.nsteps) / 4096 * 4096;
  me.buffersSet = tunables::kBuffsize.isSet() || tunables::kNsteps.isSet();
  int threads = int(tunables::kNthreads.get());
  me.nworkers = std::clamp(threads <= 0 ? me.nchannels : std::min(threads, me.nchannels), 1, kMaxWorkers);

  comm->peers.assign(size_t(nranks), RankInfo{});
  comm->peers[size_t(rank)] = me;
  comm->bootstrap->allGather(comm->peers.data(), sizeof(RankInfo));
  comm->peersKnown.store(true, std::memory_order_release);
  // Same-host peers move data through shared memory, which says nothing when a peer dies; the
  // bootstrap connections it held open do. That allGather and the barriers below leave each rank's
  // ring neighbours holding one from it, so at least they see it go, and their notice tells the
  // rest. Installed only now, when describePeer can name the peer's host and pid; a death before
  // fails the bootstrap's own exchanges.
  comm->bootstrap->setPeerLostHandler([comm](int peer, const std::string& reason) { comm->failFromPeerLost(peer, reason); });
  const RankInfo& first = comm->peers[0];
  comm->nchannels = first.nchannels;
  comm->minChannels = first.minChannels;
  comm->nsteps = first.nsteps;
  comm->nworkers = first.nworkers;
  comm->slotBytes = size_t(first.slotBytes);
  if (!first.buffersSet && nranks > 1 && nodeCount(comm) == nranks) {
    // Every rank alone on its node, so every connection crosses the network: larger slots, which
    // operations from 32 MiB use whole (tiling::chunkBytesFor), in the same memory per connection.
    comm->nsteps = kNetworkSlots;
    comm->slotBytes = kNetworkSlotBytes;
  }
  comm->timeoutSeconds = double(tunables::kTimeout.get());
  if (comm->timeoutSeconds <= 0) throw Error(ErrorCode::InvalidUsage, "TUTTI_TIMEOUT must be a positive number of seconds");
  comm->spin = int(std::max<int64_t>(1, tunables::kSpin.get()));
  comm->yields = int(std::max<int64_t>(0, tunables::kYield.get()));

  // Control blocks: plain memory when every rank of this node lives in this process.
  bool allLocalInProcess = true;
  for (const RankInfo& p : comm->peers)
    if (p.hostHash == me.hostHash && p.processToken != me.processToken) allLocalInProcess = false;
  std::vector<SegmentDescriptor> controls(static_cast<size_t>(nranks));
  comm->controlSegment = createSegment(sizeof(ControlBlock), allLocalInProcess, &controls[size_t(rank)],
                                       "control block of " + comm->where(), kSegmentMultiAttach);
  comm->control = new (comm->controlSegment->base()) ControlBlock();
  comm->bootstrap->allGather(controls.data(), sizeof(SegmentDescriptor));
  comm->peerControlSegments.resize(size_t(nranks));
  comm->peerControl.assign(size_t(nranks), nullptr);
  for (int p = 0; p < nranks; p++) {
    if (p == rank) {
      comm->peerControl[size_t(p)] = comm->control;
    } else if (comm->peers[size_t(p)].hostHash == me.hostHash) {
      comm->peerControlSegments[size_t(p)] =
          attachSegment(controls[size_t(p)], "control block of " + comm->describePeer(p) + ", attached by " + comm->where());
      comm->peerControl[size_t(p)] = static_cast<ControlBlock*>(comm->peerControlSegments[size_t(p)]->base());
    }
  }
  comm->mailboxesMapped = std::all_of(comm->peerControl.begin(), comm->peerControl.end(), [](ControlBlock* b) { return b != nullptr; });
  if (comm->mailboxesMapped)
    for (ControlBlock* block : comm->peerControl) {
      for (int k = 0; k < 2; k++) comm->mailboxes[k].push_back(&block->mailboxes[k]);
      comm->mailboxBells.push_back(&block->bells[0]);
    }
  comm->bootstrap->barrier();
  comm->controlSegment->seal();
  describeLayout(comm);
  comm->ranksPerNode = uniformRanksPerNode(comm->peers);
  comm->topology = exchangeTopology(comm);
  loadCustomAlgorithms(comm);
  comm->selector = std::make_unique<CommSelector>(comm);
  // When this host's ranks outnumber its cores, the rank a wait needs is often not running: a
  // long busy poll only delays it. Measured with 4 and 8 ranks on 2 cores, 8-byte all-reduce
  // (perf/RESULTS.md): 20 polls before yielding instead of 200 halves the latency.
  const int coresHere = comm->selector->fabric().coresPerNode;
  int ranksHere = 0;
  for (const RankInfo& p : comm->peers) ranksHere += p.hostHash == me.hostHash ? 1 : 0;
  if (!tunables::kSpin.isSet() && coresHere > 0 && ranksHere > coresHere) comm->spin = std::min(comm->spin, kOversubscribedSpin);
  // Workers waiting for network FIFOs move them themselves (NetProxy::tryProgress) rather than
  // hand each slot to the proxy thread and back, as long as every worker of a launch has a core
  // of this host's to itself (perf/RESULTS.md). Two hosts of one core each: 8 B-32 KiB
  // all-reduces took 145-200 us through the proxy, 53-92 us so; one channel's 256 KiB-4 MiB
  // 1.2-1.8x faster. Each poll is a system call per connection, and where a launch's workers
  // outnumber the cores that polling takes the core the awaited thread needs: two ranks per core,
  // 260 us became 450 us; two channels' workers on one core, 1.3-2x slower.
  if (coresHere > 0) comm->drivingWorkers = coresHere / std::max(1, ranksHere);
  // Where the proxy threads carry the network, a wait sleeps after its busy polls rather than
  // yield first: a yielding waiter stays runnable and shares the core with the proxy thread whose
  // socket just became ready. Two namespaces of two ranks on one core each (perf/RESULTS.md):
  // 128 KiB-1 MiB all-reduces 1.1-1.5x faster, 8 B-32 KiB unchanged. (On one host yielding first
  // is what keeps 4 ranks on 2 cores at 50 us rather than 280 us for 8 bytes.)
  if (!tunables::kYield.isSet() && nodeCount(comm) > 1 && comm->drivingWorkers == 0) comm->yields = 0;
  if (comm->rank == 0 && log::enabled(log::Level::Info, log::Tuning)) {
    std::string table = comm->selector->tuningTable();
    for (size_t at = 0, end; at < table.size(); at = end + 1) {
      end = std::min(table.find('\n', at), table.size());
      TUTTI_INFO(log::Tuning, "%s", table.substr(at, end - at).c_str());
    }
  }
  double exchangeSeconds = secondsSince(start) - bootstrapSeconds;

  // Ring connections on every channel, to the neighbours of the channel's ring.
  std::vector<ConnKey> ring;
  if (nranks > 1)
    for (int c = 0; c < comm->nchannels; c++) {
      plan::RingOrder order(nranks, ringOrderOf(comm->topology.get(), c));
      ring.push_back(ConnKey{order.step(rank, 1), c, plan::ConnKind::Ring, 0, true});
      ring.push_back(ConnKey{order.step(rank, -1), c, plan::ConnKind::Ring, 0, false});
    }
  ensureConnections(comm, ring);
  // A receiver's side of a local connection is ready before its sender has attached: without
  // this barrier a rank could finish init, destroy its communicator and take the FIFO with it
  // while a slower peer is still attaching.
  comm->bootstrap->barrier();
  comm->workers = std::make_unique<kern::HostWorkerPool>(comm->nworkers);
  comm->initSeconds = secondsSince(start);

  if (rank == 0 || log::enabled(log::Level::Trace, log::Init)) {
    std::set<std::string> names;
    for (auto& [key, conn] : comm->connections) names.insert(conn.transport);
    std::string transports = joinNames(names, "none");
    TUTTI_INFO(log::Init,
               "comm %p rank %d nranks %d nodes %d device host: %d channels, %d workers, FIFO %d x %zu KiB, "
               "ring transports %s; init %.3f s (bootstrap %.3f s, exchange %.3f s, connect %.3f s)%s%s",
               static_cast<void*>(comm), rank, nranks, nodeCount(comm), comm->nchannels, comm->nworkers, comm->nsteps,
               comm->slotBytes / 1024, transports.c_str(), comm->initSeconds, bootstrapSeconds, exchangeSeconds,
               comm->initSeconds - bootstrapSeconds - exchangeSeconds, comm->config.commName.empty() ? "" : ", name ",
               comm->config.commName.c_str());
  }
}

namespace {

// One communicator's share of a connection setup, in the three phases ensureConnections runs
// across every communicator of a group: receivers offer (a shm segment or a net listener's
// handle, over the bootstrap), senders attach or connect, receivers accept. A TCP connect
// completes in the listener's backlog, so no phase waits for a later one of any rank; a single
// thread can therefore drive several communicators of one job (ncclCommInitAll, one group).
class ConnectionSetup {
 public:
  ConnectionSetup(ncclComm* comm, const std::vector<ConnKey>& wanted) : comm_(comm), deadline_(deadlineAfter(comm->timeoutSeconds)) {
    for (const ConnKey& k : wanted)
      if (!comm->connections.count(k)) keys_.push_back(k);
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    for (const ConnKey& k : keys_)
      if (k.tag < 0 || k.tag >= kMaxConnectionTags || k.channel < 0 || k.channel >= kMaxChannels)
        throw Error(ErrorCode::InvalidUsage, comm->where() + ": the connection with " + comm->describePeer(k.peer) + " on channel " +
                                                 std::to_string(k.channel) + " has tag " + std::to_string(k.tag) + ", outside 0.." +
                                                 std::to_string(kMaxConnectionTags - 1));
    bool needNet = false;
    for (const ConnKey& k : keys_) needNet = needNet || pathTo(k.peer) == PeerPath::Net;
    if (needNet) openProxy(comm);
  }

  void offer() {
    for (const ConnKey& k : keys_) {
      if (k.send) continue;
      Offer offer{};
      if (pathTo(k.peer) == PeerPath::Net) {
        listening_.emplace_back(k, comm_->proxy->backend().listen(0, &offer.handle));
      } else {
        Transport transport = pathTo(k.peer) == PeerPath::Local ? Transport::Local : Transport::Shm;
        made_.emplace_back(k, sharedConnection(FifoConnection::createReceiver(transport, uint32_t(comm_->nsteps), comm_->slotBytes,
                                                                              &offer.segment, "FIFO of the " + describe(k)),
                                               k.peer));
      }
      comm_->bootstrap->send(k.peer, connectionTag(k), &offer, sizeof offer);
    }
  }

  void attach() {
    for (const ConnKey& k : keys_) {
      if (!k.send) continue;
      Offer offer{};
      try {
        comm_->bootstrap->recv(k.peer, connectionTag(k), &offer, sizeof offer, secondsLeft());
        if (pathTo(k.peer) == PeerPath::Net) {
          auto sendComm = comm_->proxy->backend().connect(0, offer.handle, deadline_, &comm_->abortFlag);
          made_.emplace_back(k, netConnection(comm_->proxy->addSend(std::move(sendComm), k.peer, k.channel, k.tag, workerBell(k))));
        } else {
          made_.emplace_back(k, sharedConnection(FifoConnection::attachSender(offer.segment, "FIFO of the " + describe(k)), k.peer));
          kern::fifoStoreRelease(&made_.back().second.fifo->attached, 1);
        }
      } catch (const Error& e) {
        throw Error(e.code(), setupFailed(k, e));
      }
    }
  }

  void accept() {
    for (auto& [k, listener] : listening_) {
      try {
        auto recvComm = listener->accept(deadline_, &comm_->abortFlag);
        made_.emplace_back(k, netConnection(comm_->proxy->addRecv(std::move(recvComm), k.peer, k.channel, k.tag, workerBell(k))));
      } catch (const Error& e) {
        throw Error(e.code(), setupFailed(k, e));
      }
    }
    // The receiver's side of a memory connection must outlive the sender's attach: a rank whose
    // operation ends at once (count 0) could otherwise destroy it under a slow peer.
    for (auto& [k, conn] : made_) {
      if (k.send || conn.shared == nullptr) continue;
      while (kern::fifoLoadAcquire(&conn.fifo->attached) == 0) {
        if (comm_->abortFlag.load()) throw Error(ErrorCode::Aborted, "setting up the " + describe(k) + ": aborted");
        if (SteadyClock::now() >= deadline_)
          throw Error(ErrorCode::Remote, "setting up the " + describe(k) + ": " + comm_->describePeer(k.peer) +
                                             " did not attach within TUTTI_TIMEOUT (" + std::to_string(int(comm_->timeoutSeconds)) + " s)");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    for (auto& [k, conn] : made_) {
      TUTTI_TRACE(log::Init, "%s: connected %s %s rank %d on channel %d tag %d via %s", comm_->where().c_str(), k.send ? "to" : "from",
                  k.kind == plan::ConnKind::Ring ? "ring peer" : "peer", k.peer, k.channel, k.tag, conn.transport.c_str());
      comm_->connections[k] = std::move(conn);
    }
    made_.clear();
  }

 private:
  // What the receiving side sends the sending side: a shm segment or a net listener's handle.
  union Offer {
    SegmentDescriptor segment;
    net::NetHandle handle;
  };
  static_assert(sizeof(SegmentDescriptor) == sizeof(net::NetHandle));

  PeerPath pathTo(int peer) const { return pathBetween(comm_->peers[size_t(comm_->rank)], comm_->peers[size_t(peer)]); }
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
      s += " (TUTTI_TIMEOUT " + std::to_string(int(comm_->timeoutSeconds)) + " s: did " + comm_->describePeer(k.peer) +
           " make the same call?)";
    return s;
  }
  kern::Bell* workerBell(const ConnKey& k) const { return &comm_->control->bells[workerOfChannel(comm_, k.channel)]; }
  Connection sharedConnection(std::unique_ptr<FifoConnection> shared, int peer) const {
    Connection c;
    c.fifo = shared->fifo();
    c.transport = transportName(shared->transport());
    c.peerBells = comm_->peerControl[size_t(peer)]->bells;
    c.shared = std::move(shared);
    return c;
  }
  Connection netConnection(kern::FifoHeader* fifo) const {
    Connection c;
    c.fifo = fifo;
    c.proxyBell = comm_->proxy->bell();
    c.transport = std::string("net/") + comm_->proxy->backend().name();
    return c;
  }

  ncclComm* comm_;
  SteadyTime deadline_;
  std::vector<ConnKey> keys_;
  std::vector<std::pair<ConnKey, Connection>> made_;
  std::vector<std::pair<ConnKey, std::unique_ptr<net::NetListenComm>>> listening_;
};

}  // namespace

void ensureConnections(const std::vector<std::pair<ncclComm*, std::vector<ConnKey>>>& wanted) {
  std::vector<ConnectionSetup> setups;
  for (auto& [comm, keys] : wanted) setups.emplace_back(comm, keys);
  for (ConnectionSetup& s : setups) s.offer();
  for (ConnectionSetup& s : setups) s.attach();
  for (ConnectionSetup& s : setups) s.accept();
}

void ensureConnections(ncclComm* comm, const std::vector<ConnKey>& keys) { ensureConnections({{comm, keys}}); }

}  // namespace tutti

ncclComm::~ncclComm() {
  // A healthy communicator may still have our last sends queued in the proxy: let them leave.
  if (proxy && !abortFlag.load() && asyncError.load() == ncclSuccess) proxy->drain(timeoutSeconds);
  abortFlag.store(true);
  if (initThread.joinable()) initThread.join();
  if (bootstrap) {
    // Our failure notice leaves before our connections close, so peers learn the cause rather
    // than just "connection closed"; then no notice may reach a comm being torn down.
    bootstrap->flushNotices();
    bootstrap->setNoticeHandler(nullptr);
    bootstrap->setPeerLostHandler(nullptr);
  }
  workers.reset();
  proxy.reset();
  connections.clear();
  peerControlSegments.clear();
  controlSegment.reset();
  bootstrap.reset();
}

void ncclComm::failFromNotice(int sender, const std::string& text) {
  std::string message = where() + ": " + describePeer(sender) + " failed: " + text;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (asyncError.load() != ncclSuccess) {
      if (asyncErrorPeer == sender && asyncErrorCode == ErrorCode::Remote) {
        asyncErrorMessage = message;
        asyncErrorPeer = -1;
      }
      return;
    }
  }
  fail(Error(ErrorCode::Remote, message), false);
}

void ncclComm::failFromPeerLost(int peer, const std::string& reason) {
  std::string message = where() + ": " + describePeer(peer) + " is gone: " + reason;
  // A process that ends without destroying its communicator at job end is common and harmless
  // when nothing is running; an operation in flight is what this stops (unless a notice did first).
  bool busy = activeLaunches.load() > 0 || pendingStreamJobs.load() > 0;
  if (busy && asyncError.load() == ncclSuccess) TUTTI_WARN("%s", message.c_str());
  else TUTTI_INFO(tutti::log::Init, "%s", message.c_str());
  fail(Error(ErrorCode::Remote, message), true, peer);
}

void ncclComm::fail(const Error& error, bool tellPeers, int peer) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(errorMutex);
    int expected = ncclSuccess;
    ncclResult_t code = error.code() == ErrorCode::Remote || error.code() == ErrorCode::Timeout ? ncclRemoteError
                        : error.code() == ErrorCode::InvalidUsage                             ? ncclInvalidUsage
                                                                                              : ncclSystemError;
    if (asyncError.compare_exchange_strong(expected, code)) {
      asyncErrorMessage = error.message();
      asyncErrorCode = error.code();
      asyncErrorPeer = peer;
      first = true;
    }
  }
  // The other ranks learn the cause now rather than by their own timeout: some of them never
  // talk to the peer at fault. An abort (ours or the user's) is not news to them.
  if (first && tellPeers && error.code() != ErrorCode::Aborted && bootstrap) bootstrap->broadcastNotice(error.message());
  abortFlag.store(true);
  if (control)
    for (auto& bell : control->bells) tutti::kern::ringBell(&bell);
}

std::string ncclComm::describePeer(int peer) const {
  std::string s = "rank " + std::to_string(peer);
  if (peersKnown.load(std::memory_order_acquire) && peer >= 0 && size_t(peer) < peers.size() && peers[size_t(peer)].pid != 0)
    s += " (" + std::string(peers[size_t(peer)].hostname) + " pid " + std::to_string(peers[size_t(peer)].pid) + ")";
  return s;
}

std::string ncclComm::describeWaits() const {
  const int64_t nowNs =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::string lines;
  for (const tutti::kern::WaitSlot& slot : waits) {
    tutti::kern::WaitRecord r = slot.read();
    if (r.what == tutti::kern::WaitFor::Nothing) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f", double(nowNs - r.sinceNs) / 1e9);
    lines += (lines.empty() ? "" : "\n") + tutti::kern::describeWaitingOp(r) + " waiting " + seconds + " s for " +
             tutti::kern::describeWaitedFor(r, describePeer(r.peer));
  }
  return lines;
}

std::string ncclComm::where() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " (" + tutti::hostname() + " pid " + std::to_string(getpid()) + ")";
}
