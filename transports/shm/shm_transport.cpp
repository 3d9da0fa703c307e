// The shm transport: a FIFO per connection in a POSIX shared memory segment of the receiver's,
// mapped by the sender through the segment's descriptor.
//
// Shared memory is host memory, so a communicator whose FIFOs live elsewhere (device memory)
// cannot use it. The sender's "attached" mark is then the FIFO header's own: both processes map
// the header, and nothing else of theirs is shared.
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
  ShmConnection(std::unique_ptr<Segment> segment, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(segment->base()), WakeTarget::peerWorkers(peerBells), "shm"),
        segment_(std::move(segment)) {}

 private:
  std::unique_ptr<Segment> segment_;
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(TransportContext& context) : context_(context) {}

  std::string name() const override { return "shm"; }

  bool canConnect(Locality locality, std::string* whyNot) const override {
    if (locality == Locality::OtherHost) {
      *whyNot = std::string("the peer is ") + localityName(locality);
      return false;
    }
    if (tunables::kShmDisable.get()) {
      *whyNot = "NCCL_SHM_DISABLE is set";
      return false;
    }
    if (!context_.fifoMemory()->hostAccessible()) {
      *whyNot = std::string("the FIFOs are in ") + context_.fifoMemory()->name() + " memory, and shared segments are host memory";
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
    auto connection = std::make_unique<ShmConnection>(std::move(segment), request.peerBells);
    kern::FifoHeader* fifo = connection->fifo();  // lives as long as the connection
    return std::make_unique<PendingMemoryReceive>(context_, request.peer, std::move(connection),
                                                  [fifo] { return kern::fifoLoadAcquire(&fifo->attached) != 0; });
  }

  std::unique_ptr<Connection> attach(const ConnectionRequest& request, const ConnectionOffer& offer, SteadyTime) override {
    const std::string what = fifoWhat(request);
    SegmentDescriptor descriptor;
    std::memcpy(&descriptor, offer.bytes, sizeof descriptor);
    auto segment = attachSegment(descriptor, what);
    checkPeerFifo(*hostFifoMemory(), segment->base(), segment->bytes(), what);
    auto connection = std::make_unique<ShmConnection>(std::move(segment), request.peerBells);
    kern::fifoStoreRelease(&connection->fifo()->attached, 1);
    return connection;
  }

 private:
  TransportContext& context_;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport(TransportContext& context) { return std::make_unique<ShmTransport>(context); }

}  // namespace tutti
