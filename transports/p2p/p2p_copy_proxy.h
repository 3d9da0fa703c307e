// NCCL_P2P_USE_CUDA_MEMCPY: the connections (p2p between processes, local between rank threads on
// GPUs) whose messages cross to the receiver by the copy engine, not by the executor's stores. The
// sender's executor writes a staging FIFO in its own memory (the same layout as the receiver's);
// one thread per communicator and transport (CopyProxy) watches each
// staging FIFO's head, copies every published message into the receiver's FIFO with
// kern::DeviceMemory::copyAcross (cuMemcpyAsync on a GPU), then its size and signature words, and only then
// advances the receiver's head; the receiver's tail flows back into the staging header, which frees
// the sender's slot. Simple messages are copied by their size (a joined run's table included); LL
// messages (the staging LL slot's line 0 carries the message's flag) by their lines, each half
// still validated by its flag at the receiver. A direct message (an address, kernels/fifo.h) has no
// bytes in the slot: its words carry it.
//
// Nothing here is on the executor's side: it sees an ordinary FIFO whose receiver is slower.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/fifo.h"
#include "transports/fifo_memory.h"
#include "transports/transport.h"

namespace tutti::transport::p2p {

// One connection the proxy moves: the sender's staging FIFO and its import of the receiver's.
struct CopyLink {
  std::shared_ptr<kern::DeviceMemory> memory;
  kern::FifoHeader* staging = nullptr;  // the sender's, in its own memory
  kern::FifoHeader* peer = nullptr;     // the receiver's, mapped here
  int peerRank = -1;
  std::string what;  // "FIFO of the connection from ...", for errors
  // Read once at setup from the receiver's header (both FIFOs have its layout).
  uint32_t nsteps = 0;
  uint64_t slotBytes = 0, slotOffset = 0, llOffset = 0, llSlotBytes = 0;
  // Progress, the proxy's own: messages copied, and the receiver's tail last mirrored.
  uint64_t copied = 0, tail = 0;
  std::atomic<uint64_t> messages{0};  // copied so far, for tests and logs
};

// A link from the sender's `staging` FIFO to the receiver's `peer` FIFO, with the layout the
// receiver's `header` gives (read once at setup).
std::shared_ptr<CopyLink> makeCopyLink(std::shared_ptr<kern::DeviceMemory> memory, void* staging, void* peer,
                                       int peerRank, const std::string& what, const kern::FifoHeader& header);

class CopyProxy {
 public:
  explicit CopyProxy(TransportContext& context);
  ~CopyProxy();  // stop(): drains, then ends the thread
  CopyProxy(const CopyProxy&) = delete;
  CopyProxy& operator=(const CopyProxy&) = delete;

  void add(std::shared_ptr<CopyLink> link);
  // Takes the link out; once it returns the thread no longer touches the link's memory.
  void remove(const CopyLink* link);
  // Copies what was published (at most TUTTI_TIMEOUT, or until an abort or a failure), then ends
  // the thread: a sender's last messages reach their receiver before its connections close.
  void stop();
  // Waits (at most `seconds`, or until an abort or a failure) until what every link's sender
  // published was copied; the thread goes on (Transport::drainSends).
  void drain(double seconds);

 private:
  void run();
  bool pass();  // one pass over the links: true if anything moved
  bool drained();
  void move(CopyLink& link, uint64_t n);

  TransportContext& context_;
  std::mutex mutex_;  // the links, and a pass in flight
  std::condition_variable wake_;
  std::vector<std::shared_ptr<CopyLink>> links_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// A transport's copy thread (the local and p2p transports'): started by its first copy-mode
// connection, drained on request, stopped with the transport.
class CopyProxyOwner {
 public:
  explicit CopyProxyOwner(TransportContext& context) : context_(context) {}
  ~CopyProxyOwner() { stop(); }
  CopyProxyOwner(const CopyProxyOwner&) = delete;
  CopyProxyOwner& operator=(const CopyProxyOwner&) = delete;

  std::shared_ptr<CopyProxy> get();  // the thread, started at the first call
  void drain(double seconds);        // CopyProxy::drain, when a thread runs
  void stop();                       // CopyProxy::stop: the last messages reach their receivers first

 private:
  std::shared_ptr<CopyProxy> running();
  TransportContext& context_;
  std::mutex mutex_;
  std::shared_ptr<CopyProxy> proxy_;
};

}  // namespace tutti::transport::p2p
