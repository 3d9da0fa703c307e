// The local transport: FIFOs in the communicator's FIFO memory, handed from the receiving rank
// thread to the sending one through a process-wide table.
//
// Decisions:
// - The FIFO may be in device memory, which the host cannot touch: its header is written and
//   checked through the FIFO memory's copies, and "the sender has attached" lives in the table
//   entry, in host memory, never in the FIFO.
// - Both sides hold the entry: whichever rank destroys its communicator last releases the FIFO,
//   so either may go first. An entry that no sender took leaves the table with its receiver.
// - The FIFO is the receiver's device memory, which the sender's executor writes: rank threads on
//   two GPUs without peer access cannot connect here. As NCCL does, their FIFOs then go through
//   host memory both GPUs map (the shm transport, next in the registry); an INFO line says so.
// - Copy mode (NCCL_P2P_USE_CUDA_MEMCPY=1; p2p/p2p_copy_proxy.h): the sender's executor writes a
//   staging FIFO in its own memory, and the transport's copy thread carries each message into the
//   receiver's FIFO by the copy engine. Its connections carry no addresses (both ends say so).
// - Read mode (rank threads on GPUs of their own, where the p2p decision says so: p2p_choice.h):
//   the receiver's FIFO holds the header and the LL slots; the sender allocates the Simple slots in
//   its own FIFO memory (its device) when it attaches and leaves their address in the entry before
//   it marks the FIFO attached; the receiver's executor reads them there (ConnEnd::slots).
#include "transports/local/local_transport.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "base/log.h"
#include "base/tunables.h"
#include "transports/fifo_setup.h"
#include "transports/p2p/p2p_choice.h"
#include "transports/p2p/p2p_copy_proxy.h"
#include "transports/token_table.h"

namespace tutti::transport::local {
namespace {

// One FIFO, from its receiver's offer until both ends are gone.
struct LocalFifo {
  std::shared_ptr<kern::DeviceMemory> memory;
  void* base = nullptr;
  size_t bytes = 0;
  bool read = false;  // read mode: the Simple slots are the sender's (below)
  bool copy = false;  // copy mode: the sender writes a staging FIFO, the copy thread this one
  // Read mode: the sender's Simple slots, from its FIFO memory; set before `attached`.
  std::shared_ptr<kern::DeviceMemory> senderMemory;
  char* senderSlots = nullptr;
  std::atomic<bool> attached{false};  // set by the sender; in host memory, unlike the FIFO

  ~LocalFifo() {
    if (senderSlots != nullptr) senderMemory->release(senderSlots);
    memory->release(base);
  }
};

// Offered FIFOs by token, until their sender takes them (or their receiver is destroyed).
using LocalFifoTable = TokenTable<LocalFifo>;

// The offer's bytes: which table entry, checked against the process that made it.
struct LocalOffer {
  uint64_t ownerPid;
  uint64_t token;
  uint64_t bytes;
};
static_assert(sizeof(LocalOffer) <= kConnectionOfferBytes);

class LocalConnection final : public Connection {
 public:
  // ownedToken: the receiver's table entry, removed with it if no sender took it; 0 for a sender.
  LocalConnection(std::shared_ptr<LocalFifo> fifo, uint64_t ownedToken, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(fifo->base), WakeTarget::peerWorkers(peerBells), "local"),
        fifo_(std::move(fifo)),
        ownedToken_(ownedToken) {}
  // Copy mode, the sender: its FIFO is the staging one (its own, released with it); the copy thread
  // fills the receiver's, which `fifo` keeps alive.
  LocalConnection(std::shared_ptr<LocalFifo> fifo, void* staging, std::shared_ptr<kern::DeviceMemory> stagingMemory,
                  kern::Bell* peerBells, std::shared_ptr<p2p::CopyProxy> proxy, std::shared_ptr<p2p::CopyLink> link)
      : Connection(static_cast<kern::FifoHeader*>(staging), WakeTarget::peerWorkers(peerBells), "local"),
        fifo_(std::move(fifo)),
        ownedToken_(0),
        stagingMemory_(std::move(stagingMemory)),
        proxy_(std::move(proxy)),
        link_(std::move(link)) {}
  ~LocalConnection() override {
    if (proxy_) proxy_->remove(link_.get());
    if (stagingMemory_) stagingMemory_->release(fifo());
    if (ownedToken_ != 0) LocalFifoTable::instance().remove(ownedToken_);
  }
  bool sharesAddressSpace() const override { return !fifo_->copy; }
  uint64_t copiedByEngine() const override { return link_ ? link_->messages.load() : 0; }
  // Read by the receiver only after its sender attached (the entry's release and acquire).
  char* simpleSlots() const override { return fifo_->senderSlots; }

 private:
  std::shared_ptr<LocalFifo> fifo_;
  uint64_t ownedToken_;
  std::shared_ptr<kern::DeviceMemory> stagingMemory_;
  std::shared_ptr<p2p::CopyProxy> proxy_;
  std::shared_ptr<p2p::CopyLink> link_;
};

class LocalTransport final : public Transport {
 public:
  explicit LocalTransport(TransportContext& context) : context_(context), choice_(context, "local"), copies_(context) {}

  std::string name() const override { return "local"; }
  void drainSends(double seconds) override { copies_.drain(seconds); }
  TransportTraits traits() const override { return {.carriesLL = true, .mapsPeerBuffers = false}; }

  bool canConnect(const PeerPair& pair, std::string* whyNot) const override {
    if (pair.locality != Locality::SameProcess) {
      *whyNot = std::string("the peer is ") + localityName(pair.locality) + ", not in this process";
      return false;
    }
    if (tunables::kP2pDisable.get()) {
      *whyNot = "NCCL_P2P_DISABLE is set";
      return false;
    }
    if (!pair.peerAccess) {
      const bool lowerFirst = pair.ranks[0] < pair.ranks[1];  // both ends say it alike
      *whyNot = "their GPUs (devices " + std::to_string(pair.devices[lowerFirst ? 0 : 1]) + " and " +
                std::to_string(pair.devices[lowerFirst ? 1 : 0]) +
                ") cannot access each other's memory (no peer access)";
      logNoPeerAccess(pair, *whyNot);
      return false;
    }
    // Rank threads with GPUs of their own talk peer to peer as NCCL's p2p transport would, so
    // NCCL_P2P_LEVEL holds them to their GPUs' distance; host ranks (no GPU) always may.
    if (!pair.gpus.known) return true;
    const topo::P2pDecision decision = choice_.decide(pair);
    if (!decision.allowed) *whyNot = decision.reason;
    return decision.allowed;
  }

  std::unique_ptr<PendingReceive> offer(const ConnectionRequest& request, ConnectionOffer* offer) override {
    const std::string what = fifoWhat(request);
    const FifoShape shape = checkedFifoShape(context_, what);
    auto fifo = std::make_shared<LocalFifo>();
    fifo->memory = context_.fifoMemory();
    fifo->copy = copyMode(request.pair);
    fifo->read = !fifo->copy && readMode(request.pair);
    fifo->bytes = kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes, fifo->read);
    fifo->base = fifo->memory->allocate(fifo->bytes, what);
    writeFifoHeader(*fifo->memory, fifo->base, shape, fifo->read);
    const uint64_t token = LocalFifoTable::instance().insert(fifo);
    LocalOffer local{uint64_t(getpid()), token, fifo->bytes};
    std::memset(offer, 0, sizeof *offer);
    std::memcpy(offer->bytes, &local, sizeof local);
    TUTTI_TRACE(log::Shm, "%s: in-process segment %llu, %zu bytes", what.c_str(),
                static_cast<unsigned long long>(token), fifo->bytes);
    auto connection = std::make_unique<LocalConnection>(fifo, token, request.peerBells);
    return std::make_unique<PendingMemoryReceive>(std::move(connection),
                                                  [fifo] { return fifo->attached.load(std::memory_order_acquire); });
  }

  std::unique_ptr<PendingSend> attach(const ConnectionRequest& request, const ConnectionOffer& offer,
                                      SteadyTime) override {
    const std::string what = fifoWhat(request);
    LocalOffer local;
    std::memcpy(&local, offer.bytes, sizeof local);
    if (local.ownerPid != uint64_t(getpid()))
      throw Error(ErrorCode::Internal, what + ": in-process segment " + std::to_string(local.token) +
                                           " belongs to process " + std::to_string(local.ownerPid) +
                                           ", not to this one (" + std::to_string(getpid()) + ")");
    std::shared_ptr<LocalFifo> fifo = LocalFifoTable::instance().take(local.token);
    if (fifo == nullptr)
      throw Error(ErrorCode::Remote, what + ": in-process segment " + std::to_string(local.token) +
                                         " is gone (already attached, sealed, or its creator was destroyed)");
    if (fifo->bytes != local.bytes)
      throw Error(ErrorCode::Remote, what + ": in-process segment " + std::to_string(local.token) + " has " +
                                         std::to_string(fifo->bytes) + " bytes, the descriptor says " +
                                         std::to_string(local.bytes));
    checkPeerFifo(*fifo->memory, fifo->base, fifo->bytes, what);
    if (fifo->read) {
      const FifoShape shape = checkedFifoShape(context_, what);
      fifo->senderMemory = context_.fifoMemory();
      fifo->senderSlots = static_cast<char*>(fifo->senderMemory->allocate(
          kern::fifoSimpleBytes(shape.nsteps, shape.slotBytes), what + " (the sender's Simple slots, read mode)"));
      TUTTI_TRACE(log::P2p, "%s: read mode: the sender's Simple slots at %p", what.c_str(),
                  static_cast<void*>(fifo->senderSlots));
    }
    std::unique_ptr<Connection> connection = fifo->copy ? stageThroughProxy(request, fifo, what)
                                                        : std::make_unique<LocalConnection>(fifo, 0, request.peerBells);
    fifo->attached.store(true, std::memory_order_release);
    return PendingSend::made(std::move(connection));
  }

 private:
  // Once per pair of this communicator: why the pair leaves the local transport.
  void logNoPeerAccess(const PeerPair& pair, const std::string& why) const {
    const std::pair<int, int> key{std::min(pair.ranks[0], pair.ranks[1]), std::max(pair.ranks[0], pair.ranks[1])};
    {
      std::lock_guard<std::mutex> lock(loggedMutex_);
      if (!logged_.insert(key).second) return;
    }
    TUTTI_INFO(log::P2p,
               "%s: rank %d and rank %d of this process do not connect through in-process FIFOs: %s; their FIFOs go "
               "through host memory both GPUs map",
               context_.where().c_str(), key.first, key.second, why.c_str());
  }

  // Read mode only where the pair is held to the p2p decision at all: ranks on GPUs of their own.
  bool readMode(const PeerPair& pair) const {
    return pair.gpus.known && !tunables::kP2pDisable.get() && choice_.readMode(pair);
  }
  // Copy mode likewise (the host executor, which sleeps on bells, never takes it: nobody would ring
  // its worker when a copy lands).
  bool copyMode(const PeerPair& pair) const {
    return pair.gpus.known && !tunables::kP2pDisable.get() && choice_.copyMode(pair);
  }

  // Copy mode, the sender: a staging FIFO of the receiver's shape in its own memory, which the copy
  // thread drains into the receiver's.
  std::unique_ptr<Connection> stageThroughProxy(const ConnectionRequest& request,
                                                const std::shared_ptr<LocalFifo>& fifo, const std::string& what) {
    const FifoShape shape = checkedFifoShape(context_, what);
    std::shared_ptr<kern::DeviceMemory> memory = context_.fifoMemory();
    const size_t bytes = kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes);
    if (bytes != fifo->bytes)
      throw Error(ErrorCode::Remote, what + ": the receiver's FIFO has " + std::to_string(fifo->bytes) +
                                         " bytes, the sender's shape " + std::to_string(bytes));
    void* staging = memory->allocate(bytes, what + " (staging, copy mode)");
    writeFifoHeader(*memory, staging, shape);
    kern::FifoHeader header{};
    memory->copyOut(&header, staging, sizeof header);
    auto link = p2p::makeCopyLink(memory, staging, fifo->base, request.peer, what, header);
    std::shared_ptr<p2p::CopyProxy> proxy = copies_.get();
    auto connection = std::make_unique<LocalConnection>(fifo, staging, memory, request.peerBells, proxy, link);
    proxy->add(link);
    TUTTI_TRACE(log::P2p, "%s: copy mode: staging FIFO of %zu bytes; the copy thread fills the receiver's",
                what.c_str(), bytes);
    return connection;
  }

  TransportContext& context_;
  p2p::P2pChoice choice_;
  mutable std::mutex loggedMutex_;
  mutable std::set<std::pair<int, int>> logged_;
  p2p::CopyProxyOwner copies_;  // destroyed first: the last messages reach their receivers first
};

}  // namespace

std::unique_ptr<Transport> makeLocalTransport(TransportContext& context) {
  return std::make_unique<LocalTransport>(context);
}

}  // namespace tutti::transport::local
