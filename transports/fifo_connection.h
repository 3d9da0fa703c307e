// A FIFO connection: one direction between two ranks on one channel, backed by memory both can
// reach. The receiver creates it (it owns the FIFO); the sender attaches to it through a
// descriptor that the runtime carries over the bootstrap. Two transports back it on a host:
// "local" (rank threads of one process: plain memory) and "shm" (processes on one node).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/fifo.h"
#include "transports/segment.h"

namespace tutti {

enum class Transport : uint8_t { Local, Shm };
const char* transportName(Transport transport);

// The one check of TUTTI_NSTEPS's range, 2..kern::kMaxFifoSteps: communicator init runs it on the
// value it reads, createReceiver on the value the ranks agreed. Throws InvalidUsage, prefixed with
// "<context>: " unless context is empty.
void checkFifoSteps(int64_t nsteps, const std::string& context);

class FifoConnection {
 public:
  static std::unique_ptr<FifoConnection> createReceiver(Transport transport, uint32_t nsteps, size_t slotBytes,
                                                        SegmentDescriptor* descriptor, const std::string& context);
  static std::unique_ptr<FifoConnection> attachSender(const SegmentDescriptor& descriptor, const std::string& context);

  kern::FifoHeader* fifo() const { return fifo_; }
  Transport transport() const { return transport_; }

 private:
  FifoConnection(std::unique_ptr<Segment> segment, Transport transport);
  std::unique_ptr<Segment> segment_;
  kern::FifoHeader* fifo_;
  Transport transport_;
};

}  // namespace tutti
