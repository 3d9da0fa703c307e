// The shm transport: a FIFO per connection in a POSIX shared memory segment of the receiver's,
// mapped by the sender through the segment's descriptor.
//
// Shared memory is host memory: where the communicator's executor has memory of its own (a GPU),
// each side maps the segment for it (FifoMemory::mapHost), and the executor reads and writes the
// FIFO over the bus, as NCCL's shared-memory transport does between GPUs without peer access.
// The header is built, checked and marked attached through the host's mapping.
#include "transports/shm/shm_transport.h"

#include <cstring>

#include "base/tunables.h"
#include "transports/fifo_setup.h"
#include "transports/segment.h"

namespace tutti {
namespace {

static_assert(sizeof(SegmentDescriptor) <= kConnectionOfferBytes);

class ShmConnection final : public Connection {
 public:
  ShmConnection(std::unique_ptr<Segment> segment, std::unique_ptr<HostMapping> mapping, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(mapping->executor()), WakeTarget::peerWorkers(peerBells), "shm"),
        segment_(std::move(segment)),
        mapping_(std::move(mapping)) {}
  kern::FifoHeader* hostHeader() const { return static_cast<kern::FifoHeader*>(segment_->base()); }

 private:
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<HostMapping> mapping_;  // unmapped before the segment goes
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(TransportContext& context) : context_(context) {}

  std::string name() const override { return "shm"; }

  bool canConnect(const PeerPair& pair, std::string* whyNot) const override {
    if (pair.locality == Locality::OtherHost) {
      *whyNot = std::string("the peer is ") + localityName(pair.locality);
      return false;
    }
    if (tunables::kShmDisable.get()) {
      *whyNot = "NCCL_SHM_DISABLE is set";
      return false;
    }
    return true;
  }

  std::unique_ptr<PendingReceive> offer(const ConnectionRequest& request, ConnectionOffer* offer) override {
    const std::string what = fifoWhat(request);
    const FifoShape shape = checkedFifoShape(context_, what);
    SegmentDescriptor descriptor{};
    auto segment = createSegment(kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes), false, &descriptor, what);
    kern::fifoInit(static_cast<kern::FifoHeader*>(segment->base()), shape.nsteps, shape.slotBytes, shape.llBytes);
    std::memset(offer, 0, sizeof *offer);
    std::memcpy(offer->bytes, &descriptor, sizeof descriptor);
    auto mapping = std::make_unique<HostMapping>(context_.fifoMemory(), segment->base(), segment->bytes(), what);
    auto connection = std::make_unique<ShmConnection>(std::move(segment), std::move(mapping), request.peerBells);
    kern::FifoHeader* fifo = connection->hostHeader();  // lives as long as the connection
    return std::make_unique<PendingMemoryReceive>(context_, request.peer, std::move(connection),
                                                  [fifo] { return kern::fifoLoadAcquire(&fifo->attached) != 0; });
  }

  std::unique_ptr<Connection> attach(const ConnectionRequest& request, const ConnectionOffer& offer, SteadyTime) override {
    const std::string what = fifoWhat(request);
    SegmentDescriptor descriptor;
    std::memcpy(&descriptor, offer.bytes, sizeof descriptor);
    auto segment = attachSegment(descriptor, what);
    checkPeerFifo(*hostFifoMemory(), segment->base(), segment->bytes(), what);
    auto mapping = std::make_unique<HostMapping>(context_.fifoMemory(), segment->base(), segment->bytes(), what);
    auto connection = std::make_unique<ShmConnection>(std::move(segment), std::move(mapping), request.peerBells);
    kern::fifoStoreRelease(&connection->hostHeader()->attached, 1);
    return connection;
  }

 private:
  TransportContext& context_;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport(TransportContext& context) { return std::make_unique<ShmTransport>(context); }

}  // namespace tutti
