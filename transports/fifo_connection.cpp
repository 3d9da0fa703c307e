// FIFO connections over local memory or POSIX shared memory.
#include "transports/fifo_connection.h"

#include "base/error.h"

namespace tutti {

const char* transportName(Transport transport) { return transport == Transport::Local ? "local" : "shm"; }

void checkFifoSteps(int64_t nsteps, const std::string& context) {
  if (nsteps >= 2 && nsteps <= int64_t(kern::kMaxFifoSteps)) return;
  throw Error(ErrorCode::InvalidUsage, (context.empty() ? "" : context + ": ") + "TUTTI_NSTEPS=" + std::to_string(nsteps) +
                                           " is outside 2.." + std::to_string(kern::kMaxFifoSteps));
}

FifoConnection::FifoConnection(std::unique_ptr<Segment> segment, Transport transport)
    : segment_(std::move(segment)), fifo_(static_cast<kern::FifoHeader*>(segment_->base())), transport_(transport) {}

std::unique_ptr<FifoConnection> FifoConnection::createReceiver(Transport transport, uint32_t nsteps, size_t slotBytes,
                                                               SegmentDescriptor* descriptor, const std::string& context) {
  checkFifoSteps(nsteps, context);
  auto segment = createSegment(kern::fifoBytes(nsteps, slotBytes), transport == Transport::Local, descriptor, context);
  kern::fifoInit(static_cast<kern::FifoHeader*>(segment->base()), nsteps, slotBytes);
  return std::unique_ptr<FifoConnection>(new FifoConnection(std::move(segment), transport));
}

std::unique_ptr<FifoConnection> FifoConnection::attachSender(const SegmentDescriptor& descriptor, const std::string& context) {
  auto segment = attachSegment(descriptor, context);
  auto* fifo = static_cast<kern::FifoHeader*>(segment->base());
  if (segment->bytes() < sizeof(kern::FifoHeader) || fifo->magic != kern::kFifoMagic || fifo->nsteps == 0 ||
      fifo->nsteps > kern::kMaxFifoSteps || kern::fifoBytes(fifo->nsteps, fifo->slotBytes) > segment->bytes())
    throw Error(ErrorCode::Remote, context + ": the peer's FIFO segment is malformed");
  Transport transport = descriptor.kind == 2 ? Transport::Local : Transport::Shm;
  return std::unique_ptr<FifoConnection>(new FifoConnection(std::move(segment), transport));
}

}  // namespace tutti
