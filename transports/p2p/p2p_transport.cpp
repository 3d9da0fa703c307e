// The p2p transport (see p2p_transport.h).
#include "transports/p2p/p2p_transport.h"

#include <unistd.h>

#include <cstring>
#include <functional>
#include <mutex>

#include "base/log.h"
#include "transports/descriptor_channel.h"
#include "transports/fifo_setup.h"
#include "transports/p2p/p2p_choice.h"
#include "transports/p2p/p2p_copy_proxy.h"

namespace tutti::transport::p2p {
namespace {

constexpr uint64_t kP2pOfferMagic = 0x7475747469703270ull;  // "tuttip2p"
constexpr uint64_t kP2pSlotsMagic = 0x7475747469703273ull;  // "tuttip2s": the sender's Simple slots

// P2pOffer::mode: who holds the Simple slots, and who moves the bytes into them.
constexpr uint32_t kWriteMode = 0;  // the receiver's FIFO, after its header; the sender's executor
constexpr uint32_t kReadMode = 1;   // the sender's memory; the receiver's executor reads them there
constexpr uint32_t kCopyMode = 2;   // the receiver's FIFO; the copy engine, from the sender's staging
                                    // FIFO (NCCL_P2P_USE_CUDA_MEMCPY, p2p_copy_proxy.h)
const char* modeName(uint32_t mode) { return mode == kReadMode ? "read" : mode == kCopyMode ? "copy" : "write"; }

// The offer's bytes: the memory's size, and how to reach it: a descriptor to take from the owner's
// server, or a handle that travels in the offer itself. The receiver offers its FIFO this way (in
// the connection offer); in read mode the sender offers its Simple slots the same way back (in the
// FIFO header's setup words).
struct P2pOffer {
  uint64_t magic;
  uint64_t token;  // the descriptor's at the server; 0: the handle is `handle`
  uint64_t bytes;
  int32_t ownerPid;
  uint32_t mode;  // kWriteMode, kReadMode or kCopyMode (the receiver's choice, which the sender follows)
  union {
    char server[kDescriptorServerNameBytes];  // NUL-padded
    uint8_t handle[kern::ExportHandle::kBytes];
  };
};
static_assert(sizeof(P2pOffer) <= kConnectionOfferBytes);
static_assert(sizeof(P2pOffer) <= kern::kFifoSetupBytes);

class P2pConnection final : public Connection {
 public:
  // The receiver's end frees the exported FIFO; the sender's unmaps its import.
  P2pConnection(std::shared_ptr<kern::DeviceMemory> memory, void* fifo, bool imported, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(fifo), WakeTarget::peerWorkers(peerBells), "p2p"),
        memory_(std::move(memory)),
        imported_(imported) {}
  ~P2pConnection() override {
    if (copyProxy_) copyProxy_->remove(copyLink_.get());
    if (peerFifo_ != nullptr) memory_->releaseImported(peerFifo_);
    if (slotsServer_) slotsServer_->withdraw(slotsToken_);
    if (slots_ != nullptr) {
      if (slotsImported_)
        memory_->releaseImported(slots_);
      else
        memory_->release(slots_);
    }
    if (released_) return;
    if (imported_)
      memory_->releaseImported(fifo());
    else
      memory_->release(fifo());
  }
  char* simpleSlots() const override { return slots_; }
  // The import of the receiver's FIFO, handed to a copy-mode connection: no longer this one's.
  void releasePeerFifo() { released_ = true; }

  // Read mode: the Simple slots, the sender's own (released with it) or the receiver's mapping of
  // the sender's (unmapped with it).
  void holdSlots(void* slots, bool imported) {
    slots_ = static_cast<char*>(slots);
    slotsImported_ = imported;
  }
  // The sender's offer of its slots at its server, withdrawn with the connection.
  void holdSlotsOffer(std::shared_ptr<DescriptorServer> server, uint64_t token) {
    slotsServer_ = std::move(server);
    slotsToken_ = token;
  }
  // Copy mode, the sender: its FIFO is the staging one; the receiver's, mapped here, is the proxy's
  // to fill (unmapped with the connection, after the proxy lets go of it).
  void holdCopy(void* peerFifo, std::shared_ptr<CopyProxy> proxy, std::shared_ptr<CopyLink> link) {
    peerFifo_ = peerFifo;
    copyProxy_ = std::move(proxy);
    copyLink_ = std::move(link);
  }
  // Messages the copy engine has carried to the receiver (copy mode, the sender's end; else 0).
  uint64_t copiedByEngine() const override { return copyLink_ ? copyLink_->messages.load() : 0; }

 private:
  std::shared_ptr<kern::DeviceMemory> memory_;
  bool imported_;
  bool released_ = false;
  char* slots_ = nullptr;
  bool slotsImported_ = false;
  std::shared_ptr<DescriptorServer> slotsServer_;
  uint64_t slotsToken_ = 0;
  void* peerFifo_ = nullptr;
  std::shared_ptr<CopyProxy> copyProxy_;
  std::shared_ptr<CopyLink> copyLink_;
};

// A read-mode receiver between offer and complete: once its sender has attached (the inner step),
// it maps the sender's Simple slots from the offer the sender left in the FIFO header.
class ReadModeReceive final : public PendingReceive {
 public:
  ReadModeReceive(TransportContext& context, int peer, std::string what, std::shared_ptr<kern::DeviceMemory> memory,
                  std::unique_ptr<PendingMemoryReceive> attached, size_t simpleBytes)
      : context_(context),
        peer_(peer),
        what_(std::move(what)),
        memory_(std::move(memory)),
        attached_(std::move(attached)),
        simpleBytes_(simpleBytes) {}

  std::unique_ptr<Connection> poll(SteadyTime deadline) override {
    std::unique_ptr<Connection> made = attached_->poll(deadline);
    if (!made) return nullptr;
    auto* connection = static_cast<P2pConnection*>(made.get());
    P2pOffer slots;
    memory_->copyOut(&slots, connection->fifo()->fromSender, sizeof slots);
    const std::string peer = context_.describePeer(peer_);
    if (slots.magic != kP2pSlotsMagic || slots.bytes != simpleBytes_)
      throw Error(ErrorCode::Remote,
                  what_ + ": " + peer + " attached in read mode but left no offer of its Simple slots of " +
                      std::to_string(simpleBytes_) + " bytes in the FIFO header (does it run the same version?)");
    if (slots.ownerPid != context_.peerPid(peer_))
      throw Error(ErrorCode::Remote, what_ + ": the Simple slots offered in read mode come from process " +
                                         std::to_string(slots.ownerPid) + ", not from " + peer);
    const std::string what = what_ + " (the sender's Simple slots, read mode)";
    kern::ExportHandle handle;
    if (slots.token == 0) {  // a legacy IPC handle
      std::memcpy(handle.bytes, slots.handle, sizeof handle.bytes);
      connection->holdSlots(memory_->importExported(handle, simpleBytes_, what), true);
    } else {
      const std::string server(slots.server, strnlen(slots.server, sizeof slots.server));
      TakenDescriptor taken =
          takeDescriptor(server, slots.ownerPid, slots.token, deadline, &context_.abortFlag(), what);
      handle.fd = taken.fd();
      connection->holdSlots(memory_->importExported(handle, simpleBytes_, what), true);
      taken.confirm();
    }
    TUTTI_TRACE(log::P2p, "%s: read mode: the sender's Simple slots (%zu bytes) mapped at %p", what_.c_str(),
                simpleBytes_, static_cast<void*>(connection->simpleSlots()));
    return made;
  }

 private:
  TransportContext& context_;
  int peer_;
  std::string what_;
  std::shared_ptr<kern::DeviceMemory> memory_;
  std::unique_ptr<PendingMemoryReceive> attached_;
  size_t simpleBytes_;
};

class P2pTransport final : public Transport {
 public:
  explicit P2pTransport(TransportContext& context) : context_(context), choice_(context, "p2p"), copies_(context) {}

  std::string name() const override { return "p2p"; }
  void drainSends(double seconds) override { copies_.drain(seconds); }
  TransportTraits traits() const override { return {.carriesLL = true, .mapsPeerBuffers = true}; }

  bool canConnect(const PeerPair& pair, std::string* whyNot) const override {
    if (pair.locality != Locality::SameHost) {
      *whyNot = std::string("the peer is ") + localityName(pair.locality) + ", not in another process of this host";
      return false;
    }
    if (!context_.fifoMemory()->exportsMemory()) {
      *whyNot = std::string("the FIFOs are in ") + context_.fifoMemory()->name() +
                " memory, which other processes cannot map";
      return false;
    }
    // NCCL_P2P_DISABLE, and NCCL_P2P_LEVEL against the GPUs' distance, explained once per pair.
    const topo::P2pDecision decision = choice_.decide(pair);
    if (!decision.allowed) *whyNot = decision.reason;
    return decision.allowed;
  }

  std::unique_ptr<PendingReceive> offer(const ConnectionRequest& request, ConnectionOffer* offer) override {
    const std::string what = fifoWhat(request);
    const FifoShape shape = checkedFifoShape(context_, what);
    std::shared_ptr<kern::DeviceMemory> memory = context_.fifoMemory();
    // Read mode: the Simple slots come from the sender when it attaches; the FIFO keeps the rest.
    // Copy mode fills the receiver's own slots, so it leaves read mode out.
    const bool copy = choice_.copyMode(request.pair);
    const bool read = !copy && choice_.readMode(request.pair);
    const size_t bytes = kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes, read);
    kern::ExportHandle exported;
    void* fifo = memory->allocateExportable(bytes, what, &exported);
    OwnedFd descriptor(exported.fd);
    auto connection = std::make_unique<P2pConnection>(memory, fifo, false, request.peerBells);
    writeFifoHeader(*memory, fifo, shape, read);
    P2pOffer p2p{};
    p2p.magic = kP2pOfferMagic;
    p2p.bytes = bytes;
    p2p.ownerPid = int32_t(getpid());
    p2p.mode = copy ? kCopyMode : read ? kReadMode : kWriteMode;
    // What the receiver waits for in phase 3: its sender attached, then, in read mode, the sender's
    // Simple slots mapped.
    auto pending = [&](std::function<bool()> attached) -> std::unique_ptr<PendingReceive> {
      auto waiting = std::make_unique<PendingMemoryReceive>(std::move(connection), std::move(attached));
      if (!read) return waiting;
      return std::make_unique<ReadModeReceive>(context_, request.peer, what, memory, std::move(waiting),
                                               kern::fifoSimpleBytes(shape.nsteps, shape.slotBytes));
    };
    std::memset(offer, 0, sizeof *offer);
    const std::string peer = context_.describePeer(request.peer);
    if (descriptor.get() < 0) {
      // A handle in the offer (legacy CUDA IPC): the sender marks the FIFO's header once mapped.
      std::memcpy(p2p.handle, exported.bytes, sizeof p2p.handle);
      std::memcpy(offer->bytes, &p2p, sizeof p2p);
      TUTTI_TRACE(log::P2p, "%s: FIFO of %zu bytes offered by IPC handle (%s mode)", what.c_str(), bytes,
                  modeName(p2p.mode));
      auto* header = static_cast<kern::FifoHeader*>(fifo);
      return pending([memory, header] {
        uint64_t attached = 0;
        memory->copyOut(&attached, &header->attached, sizeof attached);
        return attached != 0;
      });
    }
    std::shared_ptr<DescriptorServer> offeredBy = descriptorServer();
    const uint64_t token = offeredBy->offer(descriptor.get(), context_.peerPid(request.peer));
    p2p.token = token;
    std::memcpy(p2p.server, offeredBy->name().data(), offeredBy->name().size());
    std::memcpy(offer->bytes, &p2p, sizeof p2p);
    TUTTI_TRACE(log::P2p, "%s: FIFO of %zu bytes offered as descriptor %llu at @%s (%s mode)", what.c_str(), bytes,
                static_cast<unsigned long long>(token), offeredBy->name().c_str(), modeName(p2p.mode));
    return pending([offeredBy, token, peer, what] {
      switch (offeredBy->state(token)) {
        case DescriptorServer::State::Confirmed: offeredBy->withdraw(token); return true;
        case DescriptorServer::State::Refused:
          throw Error(ErrorCode::Remote, what + ": " + peer + " could not attach: " + offeredBy->refusal(token));
        default: return false;
      }
    });
  }

  std::unique_ptr<PendingSend> attach(const ConnectionRequest& request, const ConnectionOffer& offer,
                                      SteadyTime deadline) override {
    const std::string what = fifoWhat(request);
    P2pOffer p2p;
    std::memcpy(&p2p, offer.bytes, sizeof p2p);
    if (p2p.magic != kP2pOfferMagic)
      throw Error(ErrorCode::Remote, what + ": the offer of " + context_.describePeer(request.peer) +
                                         " is not a p2p offer (do both ranks run the same backend and variables?)");
    if (p2p.ownerPid != context_.peerPid(request.peer))
      throw Error(ErrorCode::Remote, what + ": the p2p offer comes from process " + std::to_string(p2p.ownerPid) +
                                         ", not from " + context_.describePeer(request.peer));
    if (p2p.mode != kWriteMode && p2p.mode != kReadMode && p2p.mode != kCopyMode)
      throw Error(ErrorCode::Remote, what + ": the p2p offer of " + context_.describePeer(request.peer) +
                                         " asks for mode " + std::to_string(p2p.mode) +
                                         ", neither write (0), read (1) nor copy (2)");
    const bool read = p2p.mode == kReadMode;
    // The receiver's choice holds, so both ends agree; a rank that would choose otherwise reads
    // other variables than its peer.
    const uint32_t ours = choice_.copyMode(request.pair)   ? kCopyMode
                          : choice_.readMode(request.pair) ? kReadMode
                                                           : kWriteMode;
    if (ours != p2p.mode)
      TUTTI_WARN(
          "%s: %s: %s asks for %s mode, where this rank would have chosen %s mode (do NCCL_P2P_READ_ENABLE or "
          "NCCL_P2P_USE_CUDA_MEMCPY differ between them?); following the receiver",
          context_.where().c_str(), what.c_str(), context_.describePeer(request.peer).c_str(), modeName(p2p.mode),
          modeName(ours));
    std::shared_ptr<kern::DeviceMemory> memory = context_.fifoMemory();
    if (p2p.token == 0) {  // a handle in the offer
      kern::ExportHandle handle;
      std::memcpy(handle.bytes, p2p.handle, sizeof handle.bytes);
      void* fifo = memory->importExported(handle, size_t(p2p.bytes), what);
      auto connection = std::make_unique<P2pConnection>(memory, fifo, true, request.peerBells);
      checkPeerFifo(*memory, fifo, size_t(p2p.bytes), what);
      if (read) offerSlots(request, *connection, what);
      if (p2p.mode == kCopyMode)
        connection = stageThroughProxy(request, std::move(connection), fifo, size_t(p2p.bytes), what);
      const uint64_t one = 1;
      memory->copyIn(&static_cast<kern::FifoHeader*>(fifo)->attached, &one, sizeof one);
      return PendingSend::made(std::move(connection));
    }
    const std::string server(p2p.server, strnlen(p2p.server, sizeof p2p.server));
    TakenDescriptor taken = takeDescriptor(server, p2p.ownerPid, p2p.token, deadline, &context_.abortFlag(), what);
    kern::ExportHandle handle;
    handle.fd = taken.fd();
    void* fifo = memory->importExported(handle, size_t(p2p.bytes), what);
    auto connection = std::make_unique<P2pConnection>(memory, fifo, true, request.peerBells);
    checkPeerFifo(*memory, fifo, size_t(p2p.bytes), what);
    if (read) offerSlots(request, *connection, what);
    if (p2p.mode == kCopyMode)
      connection = stageThroughProxy(request, std::move(connection), fifo, size_t(p2p.bytes), what);
    taken.confirm();
    return PendingSend::made(std::move(connection));
  }

 private:
  // One per communicator's transport, made at the first offer; a sender's connection in read mode
  // keeps it while it offers its slots.
  std::shared_ptr<DescriptorServer> descriptorServer() {
    std::lock_guard<std::mutex> lock(serverMutex_);
    if (!server_) server_ = std::make_shared<DescriptorServer>(context_.where());
    return server_;
  }

  // Read mode, the sender: the Simple slots in its own exportable memory, offered back to the
  // receiver through the FIFO header's setup words, written before the sender confirms that it
  // attached (the receiver reads them once it sees that).
  void offerSlots(const ConnectionRequest& request, P2pConnection& connection, const std::string& what) {
    std::shared_ptr<kern::DeviceMemory> memory = context_.fifoMemory();
    kern::FifoHeader header{};
    memory->copyOut(&header, connection.fifo(), sizeof header);
    if (header.slotOffset != 0)
      throw Error(ErrorCode::Remote, what + ": " + context_.describePeer(request.peer) +
                                         " asks for read mode but its FIFO holds the Simple slots after its header");
    const size_t bytes = kern::fifoSimpleBytes(header.nsteps, size_t(header.slotBytes));
    kern::ExportHandle exported;
    void* slots = memory->allocateExportable(bytes, what + " (the sender's Simple slots, read mode)", &exported);
    OwnedFd descriptor(exported.fd);
    connection.holdSlots(slots, false);
    P2pOffer offer{};
    offer.magic = kP2pSlotsMagic;
    offer.bytes = bytes;
    offer.ownerPid = int32_t(getpid());
    offer.mode = kReadMode;
    if (descriptor.get() < 0) {
      std::memcpy(offer.handle, exported.bytes, sizeof offer.handle);
    } else {
      std::shared_ptr<DescriptorServer> server = descriptorServer();
      offer.token = server->offer(descriptor.get(), context_.peerPid(request.peer));
      connection.holdSlotsOffer(server, offer.token);
      std::memcpy(offer.server, server->name().data(), server->name().size());
    }
    memory->copyIn(connection.fifo()->fromSender, &offer, sizeof offer);
    TUTTI_TRACE(log::P2p, "%s: read mode: Simple slots of %zu bytes offered to the receiver %s", what.c_str(), bytes,
                offer.token != 0 ? "as a descriptor" : "by IPC handle");
  }

  // Copy mode, the sender: a staging FIFO in its own memory with the receiver's layout, which its
  // executor writes; the receiver's FIFO (`imported`'s) goes to the copy proxy, which fills it.
  std::unique_ptr<P2pConnection> stageThroughProxy(const ConnectionRequest& request,
                                                   std::unique_ptr<P2pConnection> imported, void* peerFifo,
                                                   size_t bytes, const std::string& what) {
    std::shared_ptr<kern::DeviceMemory> memory = context_.fifoMemory();
    kern::FifoHeader header{};
    memory->copyOut(&header, peerFifo, sizeof header);
    const FifoShape shape{header.nsteps, size_t(header.slotBytes), kern::llCapacity(size_t(header.llSlotBytes))};
    if (header.slotOffset != kern::fifoHeaderBytes() ||
        kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes) > bytes)
      throw Error(ErrorCode::Remote,
                  what + ": " + context_.describePeer(request.peer) +
                      " asks for copy mode but its FIFO does not hold its Simple slots after its header");
    void* staging =
        memory->allocate(kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes), what + " (staging, copy mode)");
    auto connection = std::make_unique<P2pConnection>(memory, staging, false, request.peerBells);
    writeFifoHeader(*memory, staging, shape);
    auto link = makeCopyLink(memory, staging, peerFifo, request.peer, what, header);
    std::shared_ptr<CopyProxy> proxy = copies_.get();
    // The import changes hands: the new connection unmaps it, after the proxy has let go.
    imported->releasePeerFifo();
    connection->holdCopy(peerFifo, proxy, link);
    proxy->add(link);
    TUTTI_TRACE(log::P2p, "%s: copy mode: staging FIFO of %zu bytes; the copy proxy fills the receiver's", what.c_str(),
                kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes));
    return connection;
  }

  TransportContext& context_;
  P2pChoice choice_;
  std::mutex serverMutex_;
  std::shared_ptr<DescriptorServer> server_;
  // Destroyed first: the last messages of copy-mode connections reach their receivers before the
  // connections close.
  CopyProxyOwner copies_;
};

}  // namespace

std::unique_ptr<Transport> makeP2pTransport(TransportContext& context) {
  return std::make_unique<P2pTransport>(context);
}

}  // namespace tutti::transport::p2p
