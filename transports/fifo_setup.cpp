// FIFO set-up shared by the memory transports: slot count check, header, peer check, wait.
#include "transports/fifo_setup.h"

#include "base/error.h"
#include "kernels/fifo.h"

namespace tutti::transport {

void checkFifoSteps(int64_t nsteps, const std::string& context) {
  if (nsteps >= 2 && nsteps <= int64_t(kern::kMaxFifoSteps)) return;
  throw Error(ErrorCode::InvalidUsage, (context.empty() ? "" : context + ": ") +
                                           "TUTTI_NSTEPS=" + std::to_string(nsteps) + " is outside 2.." +
                                           std::to_string(kern::kMaxFifoSteps));
}

std::string fifoWhat(const ConnectionRequest& request) { return "FIFO of the " + request.description; }

FifoShape checkedFifoShape(const TransportContext& context, const std::string& what) {
  const FifoShape shape = context.fifoShape();
  checkFifoSteps(shape.nsteps, what);
  return shape;
}

void writeFifoHeader(kern::DeviceMemory& memory, void* fifo, FifoShape shape, bool simpleElsewhere) {
  kern::FifoHeader header{};
  kern::fifoInit(&header, shape.nsteps, shape.slotBytes, shape.llBytes, simpleElsewhere);
  memory.copyIn(fifo, &header, sizeof header);
}

void checkPeerFifo(kern::DeviceMemory& memory, const void* fifo, size_t bytes, const std::string& context) {
  kern::FifoHeader header{};
  if (bytes >= sizeof header) memory.copyOut(&header, fifo, sizeof header);
  const bool elsewhere = header.slotOffset == 0;
  const size_t simpleEnd = kern::fifoBytes(header.nsteps, header.slotBytes, 0, elsewhere);
  if (bytes < sizeof header || header.magic != kern::kFifoMagic || header.nsteps == 0 ||
      header.nsteps > kern::kMaxFifoSteps || (!elsewhere && header.slotOffset != kern::fifoHeaderBytes()) ||
      simpleEnd + size_t(header.nsteps) * header.llSlotBytes > bytes ||
      (header.llSlotBytes != 0 && header.llOffset != simpleEnd))
    throw Error(ErrorCode::Remote, context + ": the peer's FIFO segment is malformed");
}

std::unique_ptr<Connection> PendingMemoryReceive::poll(SteadyTime) {
  if (connection_ == nullptr || !attached_()) return nullptr;
  return std::move(connection_);
}

}  // namespace tutti::transport
