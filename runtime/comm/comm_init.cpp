// Communicator init: join, exchange of rank information, control blocks and topology, rank 0's
// picture of the layout, and the ring connections.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "algorithms/ring_order.h"
#include "base/clock.h"
#include "base/host_identity.h"
#include "base/log.h"
#include "base/tunables.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_init.h"
#include "runtime/comm/comm_settings.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/comm/control_block.h"
#include "runtime/comm/counted_memory.h"
#include "runtime/comm/gpu_sharing.h"
#include "runtime/comm/init_model.h"
#include "runtime/comm/peer_buffers.h"
#include "runtime/comm/select.h"
#include "runtime/comm/topo_init.h"
#include "runtime/diagnostics/flight_recorder_dump.h"
#include "transports/registry.h"

namespace tutti {
namespace {

// Where peers on other hosts reach a rank, as it shows the others for rank 0's summary of the
// job's layout.
struct NetIdentity {
  char interfaceName[32];
  char address[64];
};
static_assert(sizeof(NetIdentity) == kNetIdentityBytes,
              "runtime/comm/init_model.h models the layout exchange with this size");

// Rank 0's one-line picture of the communicator: ranks, nodes, the transports inside and between
// nodes, and each node's network interface and address (gathered from every rank when the job
// spans nodes). Collective: every rank calls it, with the same view of the peers.
void describeLayout(ncclComm* comm) {
  std::map<uint64_t, std::vector<int>> ranksOfHost;
  std::vector<uint64_t> hostOrder;  // by first rank, so node numbers follow rank order
  for (int r = 0; r < comm->identity.nranks; r++) {
    uint64_t hash = comm->identity.peers[size_t(r)].hostHash;
    if (ranksOfHost[hash].empty()) hostOrder.push_back(hash);
    ranksOfHost[hash].push_back(r);
  }
  std::vector<NetIdentity> identities;
  transport::Transport* between = nullptr;  // the transport between nodes
  if (hostOrder.size() > 1) {
    // Every rank agrees that the job spans nodes, so every rank takes part in this gather.
    uint64_t myHost = comm->identity.peers[size_t(comm->identity.rank)].hostHash;
    between = &transportTo(comm, ranksOfHost[hostOrder[hostOrder[0] == myHost ? 1 : 0]].front());
    transport::Endpoint nic = between->endpoint();
    identities.assign(size_t(comm->identity.nranks), NetIdentity{});
    NetIdentity& mine = identities[size_t(comm->identity.rank)];
    std::strncpy(mine.interfaceName, nic.interfaceName.c_str(), sizeof mine.interfaceName - 1);
    std::strncpy(mine.address, nic.address.c_str(), sizeof mine.address - 1);
    comm->identity.bootstrap->allGather(identities.data(), sizeof(NetIdentity));
  }
  if (comm->identity.rank != 0 || !log::enabled(log::Level::Info, log::Init)) return;

  // Ranks of one node talk as their neighbours in rank order do; several kinds show up when a
  // node mixes processes and threads.
  std::set<transport::Transport*> intra;
  for (auto& [hash, ranks] : ranksOfHost)
    for (size_t i = 1; i < ranks.size(); i++)
      if (transport::Transport* t = transportBetween(comm, ranks[i - 1], ranks[i])) intra.insert(t);
  // Ring neighbours are such pairs, so each of these is needed anyway: open it now to name it (the
  // net transport names its backend once open).
  for (transport::Transport* t : intra) t->open();
  std::string intraText = transportNames(intra);
  std::string nodesText;
  for (size_t n = 0; n < hostOrder.size(); n++) {
    const std::vector<int>& ranks = ranksOfHost[hostOrder[n]];
    nodesText += "; node " + std::to_string(n) + " " + comm->identity.peers[size_t(ranks[0])].hostname + " (" +
                 std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks");
    if (!identities.empty()) {
      const NetIdentity& id = identities[size_t(ranks[0])];
      nodesText += ", " + std::string(id.interfaceName) + " " + id.address;
    }
    nodesText += ")";
  }
  TUTTI_INFO(log::Init, "comm %p layout: %d ranks on %zu %s, intra-node %s, inter-node %s%s", static_cast<void*>(comm),
             comm->identity.nranks, hostOrder.size(), hostOrder.size() == 1 ? "node" : "nodes",
             intraText.empty() ? "none" : intraText.c_str(), between != nullptr ? between->name().c_str() : "none",
             nodesText.c_str());
}

// The executor backend, before any FIFO is made: a device backend keeps FIFOs in its memory. Ranks
// of one host on one GPU are refused unless TUTTI_ALLOW_SHARED_GPU=1 (their kernels then share
// the device: ranks as threads, or processes under MPS).
void makeExecutorBackend(ncclComm* comm) {
  kern::BackendOptions options;
  options.device = comm->identity.device;
  options.workers = comm->settings.nworkers;
  options.timeoutSeconds = comm->settings.timeoutSeconds;
  comm->executor.backend = kern::makeExecutorBackend(comm->identity.backendName, options, comm->where());
  if (comm->executor.backend->ownsDevice()) {
    const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
    const bool allowed = tunables::kAllowSharedGpu.get();
    for (int r = 0; r < comm->identity.nranks; r++) {
      const RankInfo& p = comm->identity.peers[size_t(r)];
      if (r == comm->identity.rank || p.hostHash != me.hostHash || p.device != me.device) continue;
      const std::string sharing = comm->where() + " and " + comm->describePeer(r) + " both use CUDA device " +
                                  std::to_string(me.device) + " of host " + me.hostname;
      if (!allowed)
        throw Error(ErrorCode::InvalidUsage,
                    sharing + "; give each rank its own GPU, or set TUTTI_ALLOW_SHARED_GPU=1 to let them share it");
      if (p.pid != me.pid) {  // threads of one process share a context and need no daemon
        if (std::string problem = mpsProblem(); !problem.empty())
          throw Error(ErrorCode::InvalidUsage,
                      sharing + " from different processes (TUTTI_ALLOW_SHARED_GPU=1), but " + problem);
        break;
      }
    }
  }
  // A device backend's FIFOs are its own memory. The pointer shares the backend's ownership: a FIFO
  // between ranks of one process goes with the later of its two ends, which may be the peer's after
  // this communicator is gone.
  kern::DeviceMemory& memory = comm->executor.backend->memory();
  if (memory.memorySpace() != kern::MemorySpace::Host)
    comm->links.fifoMemory = std::shared_ptr<kern::DeviceMemory>(comm->executor.backend, &memory);
  // Counted for ncclCommMemStats, before the first FIFO is made.
  comm->links.fifoCounter = std::make_shared<CountedMemory>(comm->links.fifoMemory);
  comm->links.fifoMemory = comm->links.fifoCounter;
  comm->executor.abortable.store(comm->executor.backend.get());
  if (comm->error.abortFlag.load()) comm->executor.backend->abort();  // failed while it was being made
}

// Ranks per node when the nodes hold contiguous blocks of ranks of one size, else 0.
int uniformRanksPerNode(const std::vector<RankInfo>& peers) {
  size_t block = 1;
  while (block < peers.size() && peers[block].hostHash == peers[0].hostHash) block++;
  if (peers.size() % block != 0) return 0;
  for (size_t r = 0; r < peers.size(); r++)
    if (peers[r].hostHash != peers[r / block * block].hostHash ||
        (r % block == 0 && r > 0 && peers[r].hostHash == peers[r - 1].hostHash))
      return 0;
  return int(block);
}

// Init's phases and their wall time, for the INFO line that says where init spent its time.
class InitPhases {
 public:
  explicit InitPhases(SteadyTime start) : last_(start) {}
  void done(const char* phase) {
    SteadyTime now = SteadyClock::now();
    phases_.emplace_back(phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  double seconds(const char* phase) const {
    for (auto& [name, s] : phases_)
      if (std::strcmp(name, phase) == 0) return s;
    return 0;
  }
  std::string text() const {
    std::string out;
    char item[64];
    for (auto& [name, s] : phases_) {
      std::snprintf(item, sizeof item, "%s%s %.3f", out.empty() ? "" : ", ", name, s);
      out += item;
    }
    return out;
  }

 private:
  SteadyTime last_;
  std::vector<std::pair<const char*, double>> phases_;
};

// initCommunicator's steps.
void joinAndConnect(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device) {
  SteadyTime start = SteadyClock::now();
  InitPhases phases(start);
  comm->identity.rank = rank;
  comm->identity.nranks = nranks;
  comm->identity.device = device;
  log::setThreadDevice(device);

  bootstrap::BootstrapOptions options;
  options.abortFlag = &comm->error.abortFlag;
  comm->identity.bootstrap = bootstrap::Bootstrap::create(ids, nIds, rank, nranks, options);
  comm->identity.bootstrap->setNoticeHandler(
      [comm](int sender, const std::string& text) { comm->failFromNotice(sender, text); });
  comm->identity.bootstrap->setAnswerer([comm](int asker, const std::string& question) {
    if (!PeerBuffers::isQuestion(question)) return comm->answerWaitQuestion();
    PeerBuffers* buffers = comm->links.answering.load(std::memory_order_acquire);
    return buffers != nullptr ? buffers->answer(asker, question)
                              : std::string("copy: the communicator is not initialised yet");
  });
  phases.done("bootstrap");

  // Everyone's identity, and rank 0's settings for all.
  RankInfo me{};
  me.hostHash = hostHash();
  me.processToken = processToken();
  me.pid = int32_t(getpid());
  me.device = device;
  const kern::BackendTraits traits = kern::backendTraits(comm->identity.backendName);
  me.llBytes = traits.llBytes;
  me.mailboxes = traits.mailboxes ? 1 : 0;
  std::string host = hostname();
  std::strncpy(me.hostname, host.c_str(), sizeof me.hostname - 1);
  proposeSettings(comm, &me, traits);

  comm->identity.peers.assign(size_t(nranks), RankInfo{});
  comm->identity.peers[size_t(rank)] = me;
  comm->identity.bootstrap->allGather(comm->identity.peers.data(), sizeof(RankInfo));
  comm->identity.peersKnown.store(true, std::memory_order_release);
  phases.done("peers");
  // Same-host peers move data through shared memory, which says nothing when a peer dies; the
  // bootstrap connections it held open do. That allGather and the barriers below leave each rank's
  // ring neighbours holding one from it, so at least they see it go, and their notice tells the
  // rest. Installed only now, when describePeer can name the peer's host and pid; a death before
  // fails the bootstrap's own exchanges.
  comm->identity.bootstrap->setPeerLostHandler(
      [comm](int peer, const std::string& reason) { comm->failFromPeerLost(peer, reason); });
  adoptSettings(comm);
  makeExecutorBackend(comm);
  fitChannelsToDevice(comm);
  makeCommTransports(comm);
  comm->links.peerBuffers = std::make_unique<PeerBuffers>(comm);
  comm->links.answering.store(comm->links.peerBuffers.get(), std::memory_order_release);
  phases.done("backend");

  mapControlBlocks(comm);
  phases.done("control");
  // The topology first: it places the ranks' GPUs, which the choice of transport for a pair (and so
  // the layout line) depends on (NCCL_P2P_LEVEL).
  comm->planning.ranksPerNode = uniformRanksPerNode(comm->identity.peers);
  comm->planning.topology = exchangeTopology(comm);
  phases.done("topology");
  describeLayout(comm);
  loadCustomAlgorithms(comm);
  comm->planning.selector = std::make_unique<CommSelector>(comm);
  fitWaitsToHost(comm);
  if (comm->identity.rank == 0 && log::enabled(log::Level::Info, log::Tuning)) {
    std::string table = comm->planning.selector->tuningTable();
    for (size_t at = 0, end; at < table.size(); at = end + 1) {
      end = std::min(table.find('\n', at), table.size());
      TUTTI_INFO(log::Tuning, "%s", table.substr(at, end - at).c_str());
    }
  }
  phases.done("selector");

  ensureConnections(comm, ringConnections(comm));
  phases.done("connect");
  // A receiver's side of a local connection is ready before its sender has attached: without
  // this barrier a rank could finish init, destroy its communicator and take the FIFO with it
  // while a slower peer is still attaching.
  comm->identity.bootstrap->barrier();
  comm->finishInit();
  phases.done("barrier");
  comm->executor.flight = makeFlightRecorder(comm, ids, nIds);
  comm->lifecycle.initSeconds = secondsSince(start);

  if (rank == 0 || log::enabled(log::Level::Trace, log::Init)) {
    std::string transports = connectionTransports(comm);
    TUTTI_INFO(log::Init,
               "comm %p rank %d nranks %d nodes %d device %s %d: %d channels, %d workers, FIFO %d x %zu KiB, "
               "ring transports %s; init %.3f s (%s)%s%s",
               static_cast<void*>(comm), rank, nranks, nodeCount(comm), comm->identity.backendName.c_str(), device,
               comm->settings.nchannels, comm->settings.nworkers, comm->settings.nsteps,
               comm->settings.slotBytes / 1024, transports.c_str(), comm->lifecycle.initSeconds, phases.text().c_str(),
               comm->identity.config.commName.empty() ? "" : ", name ", comm->identity.config.commName.c_str());
  }
}

}  // namespace

std::vector<ConnKey> ringConnections(const ncclComm* comm) {
  const int rank = comm->identity.rank, nranks = comm->identity.nranks;
  std::vector<ConnKey> ring;
  if (nranks > 1)
    for (int c = 0; c < comm->settings.nchannels; c++) {
      plan::RingOrder order(nranks, ringOrderOf(comm->planning.topology.get(), c));
      ring.push_back(ConnKey{order.step(rank, 1), c, plan::ConnKind::Ring, 0, true});
      ring.push_back(ConnKey{order.step(rank, -1), c, plan::ConnKind::Ring, 0, false});
    }
  return ring;
}

void initCommunicator(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device) {
  try {
    joinAndConnect(comm, ids, nIds, rank, nranks, device);
  } catch (const Error& e) {
    // Every wait of init watches the abort flag, which a peer's failure notice raises: the wait
    // that ended so reports the peer's failure, and a failure of this rank's own reaches the others.
    throw comm->failInit(e);
  }
}

}  // namespace tutti
