// What the memory transports (local, p2p, shm) share when they set up a FIFO: the check of
// its number of slots, its header written through the FIFO memory, the check of a peer's header,
// and the receiver's wait for its sender.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "transports/fifo_memory.h"
#include "transports/transport.h"

namespace tutti::transport {

// The one check of TUTTI_NSTEPS's range, 2..kern::kMaxFifoSteps: communicator init runs it on the
// value it reads, each offer on the value the ranks agreed. Throws InvalidUsage, prefixed with
// "<context>: " unless context is empty.
void checkFifoSteps(int64_t nsteps, const std::string& context);

// How errors about a connection's FIFO begin: "FIFO of the <request's description>".
std::string fifoWhat(const ConnectionRequest& request);
// The communicator's FIFO shape, its slot count checked (checkFifoSteps) for a FIFO about to be made.
FifoShape checkedFifoShape(const TransportContext& context, const std::string& what);

// Writes a fresh header for `shape` at `fifo`, built on the host and copied in: the memory may be
// out of the host's reach. simpleElsewhere: the FIFO has no Simple slots after its header (p2p
// read mode: the sender's memory holds them; kernels/fifo.h).
void writeFifoHeader(kern::DeviceMemory& memory, void* fifo, FifoShape shape, bool simpleElsewhere = false);

// Checks the header of a peer's FIFO of `bytes` (copied out of `memory`): throws Remote
// "<context>: the peer's FIFO segment is malformed" unless it is one (with its Simple slots after
// the header, or, slotOffset 0, elsewhere).
void checkPeerFifo(kern::DeviceMemory& memory, const void* fifo, size_t bytes, const std::string& context);

// A memory transport's receiver between offer and complete: its connection is made at the offer;
// each step hands it over once `attached` says the sender has the FIFO (the runtime bounds the
// wait for that with TUTTI_TIMEOUT).
class PendingMemoryReceive final : public PendingReceive {
 public:
  PendingMemoryReceive(std::unique_ptr<Connection> connection, std::function<bool()> attached)
      : connection_(std::move(connection)), attached_(std::move(attached)) {}
  std::unique_ptr<Connection> poll(SteadyTime deadline) override;

 private:
  std::unique_ptr<Connection> connection_;
  std::function<bool()> attached_;
};

}  // namespace tutti::transport
