// The transport interface: how two ranks get a connection, and what the executor then needs of it.
//
// A connection is one direction between two ranks on one channel: the receiver owns a FIFO
// (kernels/fifo.h), the sender writes into it. Every transport answers the same few calls, as
// NCCL's transport tables and Gloo's transport/pair.h do, and each lives in its own folder
// (local/, p2p/, shm/, net/) with the same file names. transports/registry.cpp lists them in
// order of preference; connection setup (runtime/comm/connection_setup.cpp) takes the first that can
// connect a pair, so adding a transport is adding its files and one line there (or, from outside
// the library, a registerTransport call). What the runtime may do on a connection it learns from
// the transport's TransportTraits, never from its name.
//
// Setup runs in three phases over every connection of one or more communicators, so that one
// thread can drive several ranks of a job (ncclCommInitAll, a group over its communicators):
//   1. offer: every receiver makes its FIFO and fills an opaque ConnectionOffer, which the runtime
//      carries to the sender over the bootstrap;
//   2. attach: every sender attaches from the offer it received;
//   3. complete: every receiver finishes (net: accepts; memory transports: wait until the sender
//      attached, so that a receiver whose operation ends at once cannot free the FIFO under it).
// Offers never wait. Attach and complete are steps (PendingSend::poll, PendingReceive::poll) that
// never wait for the peer either: each returns null while the peer has not done its part, and
// the runtime polls all of them in one loop, interleaved, with the setup's deadline and the
// abort flag. That is NCCL's contract for a net plugin's connect and accept: some plugins'
// connect completes only once the peer's accept has answered it, so running every connect before
// any accept would wait forever.
//
// What a transport may use: base/, the FIFO layout and bells of kernels/, topology's NetPort (to
// describe its NICs), and what the communicator hands it through TransportContext; never runtime/
// (the layers point down).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "topology/graph.h"
#include "topology/net_ports.h"
#include "topology/p2p_level.h"
#include "transports/fifo_memory.h"

namespace tutti::transport {

// Where a peer is, seen from this rank. Both ends of a pair see the same.
enum class Locality : uint8_t {
  SameProcess,  // rank threads of one process
  SameHost,     // processes of one node
  OtherHost,    // across the network
};
const char* localityName(Locality locality);  // "in this process", "on this host", "on another host"

// A pair of ranks as connection setup asks the transports about it. Both ends see the same.
struct PeerPair {
  Locality locality = Locality::OtherHost;
  int ranks[2] = {-1, -1};  // the pair, for log lines
  // Their GPUs' distance on their node (topology/p2p_level.h), known where both have a GPU placed
  // in the node's graph: what NCCL_P2P_LEVEL is held against.
  topo::GpuPair gpus;
  // Rank threads of one process: their devices, and whether each can reach the other's memory
  // (kern::Executor::canAccessPeer both ways; true for one device or host memory).
  int devices[2] = {-1, -1};
  bool peerAccess = true;
};

// The FIFOs every connection of a communicator gets: agreed by its ranks at init.
struct FifoShape {
  uint32_t nsteps = 0;
  size_t slotBytes = 0;
  // The largest LL message (kernels/fifo.h), for the memory transports' FIFOs of a device
  // executor; 0: no LL slots (the host executor, and the network, whose proxy moves Simple slots).
  size_t llBytes = 0;
};

// What the receiver hands the sender, out of band: a shm segment's name, a net listener's
// handle... Fixed size, so that the bootstrap carries every transport's offer alike; each
// transport static_asserts that its own fits.
constexpr size_t kConnectionOfferBytes = 128;
struct ConnectionOffer {
  alignas(8) uint8_t bytes[kConnectionOfferBytes];
};

// The communicator as its transports see it: what they may read and call, without knowing the
// runtime's ncclComm. The runtime implements it; tests implement it to run a transport alone.
class TransportContext {
 public:
  virtual ~TransportContext() = default;
  // This rank and a peer as messages name them: "rank 3 of 8 (host pid 12)", "rank 5 (host pid 34)".
  virtual std::string where() const = 0;
  virtual std::string describePeer(int peer) const = 0;
  // The peer's process id, which transports between processes of a host check (SO_PEERCRED).
  virtual int peerPid(int peer) const = 0;
  virtual int device() const = 0;  // the "[dev]" of the log lines of a transport's own threads
  // Set by an abort or a failure: every wait of a transport ends soon after (Aborted).
  virtual const std::atomic<bool>& abortFlag() const = 0;
  virtual double timeoutSeconds() const = 0;  // TUTTI_TIMEOUT, for messages about bounded waits
  virtual int spin() const = 0;               // busy polls before a wait sleeps (read live)
  // Whether the communicator has recorded an error already.
  virtual bool failed() const = 0;
  // Records a fatal error of the communicator and tells the other ranks; peer: the rank whose
  // connection failed (-1: none). For failures met outside a call (a proxy thread).
  virtual void fail(const Error& error, int peer) = 0;
  virtual FifoShape fifoShape() const = 0;
  // Where the communicator's FIFOs live (host memory today; device memory for a device backend).
  virtual std::shared_ptr<kern::DeviceMemory> fifoMemory() const = 0;
  // The net backend the communicator asks for (ncclConfig_t.netName); "" leaves it to NCCL_NET.
  virtual std::string netName() const = 0;
  // The path type between this rank's GPU and the NIC whose sysfs path is `nicPciPath`, from the
  // topology graph (NCCL_NET_GDR_LEVEL is compared with it); nullopt where either has no PCI
  // location there (host processes, the emulated device, a NIC the graph does not hold).
  virtual std::optional<topo::PathType> gpuNicPath(const std::string& nicPciPath) const { return std::nullopt; }
  // Whether the communicator's executor can read a peer process's buffers itself (cross-memory
  // reads: the host executor), so that connections between processes may offer it.
  virtual bool executorReadsOtherProcesses() const { return false; }
};

// One connection as setup asks a transport for it (the direction is the call: offer receives,
// attach sends).
struct ConnectionRequest {
  int peer = -1;
  int channel = 0;
  int tag = 0;  // the lane's tag: separate FIFOs for separate uses of one peer
  // Across hosts, the net device (the backend's index: the topology's <net dev>) the channel's
  // ring takes on this rank's node, so that each channel keeps to one NIC; -1 when the topology
  // does not say (its NICs are not the backend's devices): the transport chooses.
  int netDevice = -1;
  // "connection from rank 0 (...) to rank 1 (...), channel 0, ring": errors say which.
  std::string description;
  kern::Bell* workerBell = nullptr;  // this rank's worker that runs the channel: a proxy rings it
  // The peer's worker bells (its control block), one per worker, where this rank maps them (peers
  // on this host); null otherwise.
  kern::Bell* peerBells = nullptr;
  // The pair as canConnect was asked about it (this rank first), for transports whose connections
  // depend on it: p2p read mode, where the Simple slots live in the sender's memory.
  PeerPair pair;
};

// Whom the executor wakes after it moves a connection's FIFO (publishes a slot, or frees one).
class WakeTarget {
 public:
  // The peer's worker that runs the channel: its bell in the peer's control block.
  static WakeTarget peerWorkers(kern::Bell* bellsByWorker) { return WakeTarget(bellsByWorker, true); }
  // A proxy thread that moves the FIFO on (net).
  static WakeTarget proxy(kern::Bell* bell) { return WakeTarget(bell, false); }
  // Nobody: the other side polls. For executors that cannot ring a futex (a GPU kernel), whose
  // peers then watch the FIFO counters themselves.
  static WakeTarget none() { return WakeTarget(nullptr, false); }

  // The bell for the executor's `worker`; null when nobody is to be woken.
  kern::Bell* bellFor(int worker) const {
    if (bells_ == nullptr) return nullptr;
    return perWorker_ ? &bells_[worker] : bells_;
  }

 private:
  WakeTarget(kern::Bell* bells, bool perWorker) : bells_(bells), perWorker_(perWorker) {}
  kern::Bell* bells_;
  bool perWorker_;
};

// What a transport's connections are, for the runtime to decide by without knowing its name.
struct TransportTraits {
  // Its FIFOs carry LL lines that the executors read and write in place (memory transports); a
  // transport whose proxy moves only Simple slots (the network) says no, and its connections use
  // Simple at every size.
  bool carriesLL = true;
  // Its FIFOs live in memory that both processes map (shared memory, GPU peer memory), so that
  // a message may name an address in the sender's registered buffers through the mappings that
  // runtime/comm/peer_buffers.h makes (kDirectMapped, kernels/work.h).
  bool mapsPeerBuffers = false;
};

// One end of a made connection, as the executor uses it. The transport's subclass owns what
// backs it (memory both ranks reach, a proxy's FIFO), released when the connection is destroyed.
class Connection {
 public:
  Connection(kern::FifoHeader* fifo, WakeTarget wake, std::string transport)
      : fifo_(fifo), wake_(wake), transport_(std::move(transport)) {}
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The FIFO's header, in the communicator's FIFO memory: device memory is only for the executor.
  kern::FifoHeader* fifo() const { return fifo_; }
  kern::Bell* bellFor(int worker) const { return wake_.bellFor(worker); }
  const std::string& transport() const { return transport_; }  // "local", "shm", "net/Socket"
  // Whether both ends live in one address space, so that an address in the sender's user buffer
  // means the same at the receiver (direct messages, kernels/fifo.h): the local transport's. Both
  // ends of a connection answer alike.
  virtual bool sharesAddressSpace() const { return false; }
  // Whether the receiver reads the sender's user buffers in the sender's process with cross-memory
  // reads (direct messages between processes, kernels/work.h kDirectAcrossProcesses), as its probe
  // at setup found. Both ends answer alike; the sender's end may wait, bounded, for the verdict.
  virtual bool readsAcrossProcesses() const { return false; }
  // Simple slot 0 as this end's executor reaches it, where the slots are not after the FIFO's
  // header (kernels/fifo.h): p2p read mode keeps them in the sender's memory, which the receiver
  // maps. Null: the FIFO's own. Both ends of a connection in read mode answer non-null.
  virtual char* simpleSlots() const { return nullptr; }
  // Messages the copy engine has carried from this end's staging FIFO to the receiver's (p2p under
  // NCCL_P2P_USE_CUDA_MEMCPY, the sender's end); 0 where the executor's stores move them.
  virtual uint64_t copiedByEngine() const { return 0; }
  // The traits of the transport that made it, which connection setup records once it is made:
  // what the executor may do on it is decided from them, never from a choice made again later.
  const TransportTraits& carrier() const { return carrier_; }
  void adoptCarrier(const TransportTraits& traits) { carrier_ = traits; }

 private:
  kern::FifoHeader* fifo_;
  WakeTarget wake_;
  std::string transport_;
  TransportTraits carrier_{.carriesLL = false, .mapsPeerBuffers = false};  // until setup records them
};

// A receiver's connection between its offer and its completion.
class PendingReceive {
 public:
  virtual ~PendingReceive() = default;
  // Phase 3, one step: the connection once the sender has done its part, null while it has not
  // (the runtime calls again). Never waits for the peer; `deadline` bounds only waits on this host
  // (a descriptor server's answer). Throws Remote / Aborted; the runtime adds which connection.
  virtual std::unique_ptr<Connection> poll(SteadyTime deadline) = 0;
};

// A sender's connection between the offer it received and its completion.
class PendingSend {
 public:
  virtual ~PendingSend() = default;
  // Phase 2, one step: the connection once made, null while the peer has not answered yet (a
  // plugin's connect that waits for the peer's accept). Never waits for the peer.
  virtual std::unique_ptr<Connection> poll(SteadyTime deadline) = 0;
  // A step that is done at once: the connection an attach made.
  static std::unique_ptr<PendingSend> made(std::unique_ptr<Connection> connection);
};

// A transport's progress engine, for transports whose FIFOs the executor cannot move alone: a
// thread that moves them to and from the network (net), NCCL's proxy. A worker that waits on one
// of its FIFOs may make the passes itself instead (see transports/net/net_proxy.h).
class TransportProxy {
 public:
  virtual ~TransportProxy() = default;
  // One progress pass on the calling thread, if no other thread is making one: true if a slot moved.
  virtual bool tryProgress() = 0;
  // Whether published send slots have not left yet (no system call).
  virtual bool sendsWaiting() = 0;
  // A worker starts driving the passes itself; stops (hands them back at once); or releases them
  // at the end of an operation (the thread takes them back shortly unless a worker drives again).
  virtual void startDriving() = 0;
  virtual void stopDriving() = 0;
  virtual void releaseDriving() = 0;
  virtual void wake() = 0;  // the thread is wanted now: workers of a launch leave it the passes
  // Brackets a device launch, from its submission to its end: a kernel rings no bell, so while any
  // is outstanding the thread polls its FIFOs without sleeping (as NCCL's proxy spins while it has
  // operations), and a message a kernel publishes leaves at once rather than at the thread's next
  // timer.
  virtual void holdPolling() = 0;
  virtual void releasePolling() = 0;
  // What the holds did, for tests: holds taken, and sleeps the thread began (on its bell, or in
  // poll with a timeout) while one was taken.
  struct HoldStats {
    uint64_t holds = 0;
    uint64_t sleepsWhileHeld = 0;
  };
  virtual HoldStats holdStats() const = 0;
  // Waits (at most `seconds`, or an abort) until every published send slot has left: a healthy
  // communicator's last sends reach their peers before its connections close.
  virtual void drain(double seconds) = 0;
};

// Where peers on other hosts reach this rank through a transport, for rank 0's layout line.
struct Endpoint {
  std::string interfaceName;  // "eth0"
  std::string address;        // "10.0.0.1"
};

// One transport of one communicator: made by the registry for each communicator, with its
// context (transports/registry.h).
class Transport {
 public:
  virtual ~Transport() = default;
  // What its connections are called in logs and by tuttiCommTransports: "local", "shm",
  // "net/Socket" ("net" while its backend is not open yet).
  virtual std::string name() const = 0;
  virtual TransportTraits traits() const = 0;
  // Whether it can connect the pair, given its locality, the variables that turn it off
  // (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL against the GPUs' distance, NCCL_SHM_DISABLE) and where the
  // FIFOs live; if not, *whyNot says why, for "no transport can connect ...". Both ends of a pair
  // must reach the same verdict, so it depends only on the pair and on what every rank of a job
  // shares.
  virtual bool canConnect(const PeerPair& pair, std::string* whyNot) const = 0;
  // Gets ready for connections (net: opens the backend, starts the proxy thread). Idempotent;
  // setup calls it before the first phase. Throws when the transport cannot work here.
  virtual void open() {}
  // Phase 1, receiving side: makes the FIFO and fills `offer`.
  virtual std::unique_ptr<PendingReceive> offer(const ConnectionRequest& request, ConnectionOffer* offer) = 0;
  // Phase 2, sending side: attaches to the peer's FIFO from its offer, as steps that setup polls
  // (PendingSend::made where the attach is done at once, as for the memory transports).
  virtual std::unique_ptr<PendingSend> attach(const ConnectionRequest& request, const ConnectionOffer& offer,
                                              SteadyTime deadline) = 0;
  // Its progress engine once one runs; null for transports whose FIFOs the executor moves alone.
  virtual TransportProxy* proxy() { return nullptr; }
  // Waits (at most `seconds`, or an abort or a failure) until every message this rank's
  // connections published has left for its receiver, where a thread of the transport carries them
  // (the net proxy, the p2p copy thread): a healthy communicator calls it before it tears down,
  // so that its last sends reach their peers.
  virtual void drainSends(double seconds) {}
  // Where peers on other hosts reach this rank; empty for transports within a host. Opens it.
  virtual Endpoint endpoint() { return {}; }
  // The ports through which it reaches other hosts, as the topology's NICs (device i is the
  // topology's <net dev="i">); empty for transports within a host, and where the host's NICs are
  // better told by discovery. Opens it.
  virtual std::vector<topo::NetPort> networkPorts() { return {}; }
};

}  // namespace tutti::transport
