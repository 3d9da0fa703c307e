// The p2p transport (see p2p_transport.h).
#include "transports/p2p/p2p_transport.h"

#include <unistd.h>

#include <cstring>
#include <mutex>

#include "base/log.h"
#include "transports/fifo_setup.h"
#include "transports/p2p/descriptor_channel.h"
#include "transports/p2p/p2p_choice.h"

namespace tutti {
namespace {

constexpr uint64_t kP2pOfferMagic = 0x7475747469703270ull;  // "tuttip2p"

// The offer's bytes: the FIFO's size, and how to reach it: a descriptor to take from the owner's
// server, or a handle that travels in the offer itself.
struct P2pOffer {
  uint64_t magic;
  uint64_t token;  // the descriptor's at the server; 0: the handle is `handle`
  uint64_t bytes;
  int32_t ownerPid;
  uint32_t reserved;
  union {
    char server[kDescriptorServerNameBytes];  // NUL-padded
    uint8_t handle[kern::ExportHandle::kBytes];
  };
};
static_assert(sizeof(P2pOffer) <= kConnectionOfferBytes);

class P2pConnection final : public Connection {
 public:
  // The receiver's end frees the exported FIFO; the sender's unmaps its import.
  P2pConnection(std::shared_ptr<FifoMemory> memory, void* fifo, bool imported, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(fifo), WakeTarget::peerWorkers(peerBells), "p2p"),
        memory_(std::move(memory)),
        imported_(imported) {}
  ~P2pConnection() override {
    if (imported_) memory_->releaseImported(fifo());
    else memory_->release(fifo());
  }

 private:
  std::shared_ptr<FifoMemory> memory_;
  bool imported_;
};

class P2pTransport final : public Transport {
 public:
  explicit P2pTransport(TransportContext& context) : context_(context), choice_(context, "p2p") {}

  std::string name() const override { return "p2p"; }

  bool canConnect(const PeerPair& pair, std::string* whyNot) const override {
    if (pair.locality != Locality::SameHost) {
      *whyNot = std::string("the peer is ") + localityName(pair.locality) + ", not in another process of this host";
      return false;
    }
    if (!context_.fifoMemory()->exportable()) {
      *whyNot = std::string("the FIFOs are in ") + context_.fifoMemory()->name() + " memory, which other processes cannot map";
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
    std::shared_ptr<FifoMemory> memory = context_.fifoMemory();
    const size_t bytes = kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes);
    kern::ExportHandle exported;
    void* fifo = memory->allocateExportable(bytes, what, &exported);
    OwnedFd descriptor(exported.fd);
    auto connection = std::make_unique<P2pConnection>(memory, fifo, false, request.peerBells);
    writeFifoHeader(*memory, fifo, shape);
    P2pOffer p2p{};
    p2p.magic = kP2pOfferMagic;
    p2p.bytes = bytes;
    p2p.ownerPid = int32_t(getpid());
    std::memset(offer, 0, sizeof *offer);
    const std::string peer = context_.describePeer(request.peer);
    if (descriptor.get() < 0) {
      // A handle in the offer (legacy CUDA IPC): the sender marks the FIFO's header once mapped.
      std::memcpy(p2p.handle, exported.bytes, sizeof p2p.handle);
      std::memcpy(offer->bytes, &p2p, sizeof p2p);
      TUTTI_TRACE(log::P2p, "%s: FIFO of %zu bytes offered by IPC handle", what.c_str(), bytes);
      auto* header = static_cast<kern::FifoHeader*>(fifo);
      return std::make_unique<PendingMemoryReceive>(context_, request.peer, std::move(connection), [memory, header] {
        uint64_t attached = 0;
        memory->copyOut(&attached, &header->attached, sizeof attached);
        return attached != 0;
      });
    }
    DescriptorServer& server = descriptorServer();
    const uint64_t token = server.offer(descriptor.get(), context_.peerPid(request.peer));
    p2p.token = token;
    std::memcpy(p2p.server, server.name().data(), server.name().size());
    std::memcpy(offer->bytes, &p2p, sizeof p2p);
    TUTTI_TRACE(log::P2p, "%s: FIFO of %zu bytes offered as descriptor %llu at @%s", what.c_str(), bytes,
                static_cast<unsigned long long>(token), server.name().c_str());
    DescriptorServer* offeredBy = &server;
    return std::make_unique<PendingMemoryReceive>(context_, request.peer, std::move(connection), [offeredBy, token, peer, what] {
      switch (offeredBy->state(token)) {
        case DescriptorServer::State::Confirmed: offeredBy->withdraw(token); return true;
        case DescriptorServer::State::Refused:
          throw Error(ErrorCode::Remote, what + ": " + peer + " could not attach: " + offeredBy->refusal(token));
        default: return false;
      }
    });
  }

  std::unique_ptr<Connection> attach(const ConnectionRequest& request, const ConnectionOffer& offer, SteadyTime deadline) override {
    const std::string what = fifoWhat(request);
    P2pOffer p2p;
    std::memcpy(&p2p, offer.bytes, sizeof p2p);
    if (p2p.magic != kP2pOfferMagic)
      throw Error(ErrorCode::Remote, what + ": the offer of " + context_.describePeer(request.peer) +
                                         " is not a p2p offer (do both ranks run the same backend and variables?)");
    if (p2p.ownerPid != context_.peerPid(request.peer))
      throw Error(ErrorCode::Remote, what + ": the p2p offer comes from process " + std::to_string(p2p.ownerPid) + ", not from " +
                                         context_.describePeer(request.peer));
    std::shared_ptr<FifoMemory> memory = context_.fifoMemory();
    if (p2p.token == 0) {  // a handle in the offer
      kern::ExportHandle handle;
      std::memcpy(handle.bytes, p2p.handle, sizeof handle.bytes);
      void* fifo = memory->importExported(handle, size_t(p2p.bytes), what);
      auto connection = std::make_unique<P2pConnection>(memory, fifo, true, request.peerBells);
      checkPeerFifo(*memory, fifo, size_t(p2p.bytes), what);
      const uint64_t one = 1;
      memory->copyIn(&static_cast<kern::FifoHeader*>(fifo)->attached, &one, sizeof one);
      return connection;
    }
    const std::string server(p2p.server, strnlen(p2p.server, sizeof p2p.server));
    TakenDescriptor taken = takeDescriptor(server, p2p.ownerPid, p2p.token, deadline, &context_.abortFlag(), what);
    kern::ExportHandle handle;
    handle.fd = taken.fd();
    void* fifo = memory->importExported(handle, size_t(p2p.bytes), what);
    auto connection = std::make_unique<P2pConnection>(memory, fifo, true, request.peerBells);
    checkPeerFifo(*memory, fifo, size_t(p2p.bytes), what);
    taken.confirm();
    return connection;
  }

 private:
  // One per communicator's transport, made at the first offer.
  DescriptorServer& descriptorServer() {
    std::lock_guard<std::mutex> lock(serverMutex_);
    if (!server_) server_ = std::make_unique<DescriptorServer>(context_.where());
    return *server_;
  }

  TransportContext& context_;
  P2pChoice choice_;
  std::mutex serverMutex_;
  std::unique_ptr<DescriptorServer> server_;
};

}  // namespace

std::unique_ptr<Transport> makeP2pTransport(TransportContext& context) { return std::make_unique<P2pTransport>(context); }

}  // namespace tutti
