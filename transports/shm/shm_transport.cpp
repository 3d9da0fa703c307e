// The shm transport: a FIFO per connection in a POSIX shared memory segment of the receiver's,
// mapped by the sender through the segment's descriptor.
//
// Shared memory is host memory: where the communicator's executor has memory of its own (a GPU),
// each side maps the segment for it (kern::DeviceMemory::mapHostMemory), and the executor reads and writes the
// FIFO over the bus, as NCCL's shared-memory transport does between GPUs without peer access.
// The header is built, checked and marked attached through the host's mapping.
//
// Zero-copy between processes (kernels/work.h, kDirectAcrossProcesses): where the communicator's
// executor reads other processes itself (the host executor) and TUTTI_CMA is on, the sender gives
// its pid and the address of a probe word in the FIFO header when it attaches (under Yama
// ptrace_scope 1 also naming the receiver its reader), and the receiver, before its connection
// completes, reads that word with process_vm_readv and posts the verdict in the header. Launch
// asks both ends (readsAcrossProcesses); the sender's end waits for the verdict. A failed probe
// leaves the connection copying, with an INFO line that says why.
#include "transports/shm/shm_transport.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/cross_memory.h"
#include "base/log.h"
#include "base/tunables.h"
#include "transports/fifo_setup.h"
#include "transports/segment.h"

namespace tutti::transport::shm {
namespace {

static_assert(sizeof(SegmentDescriptor) <= kConnectionOfferBytes);

// Whether zero-copy across processes is wanted at all on this rank's connections.
bool crossReadsWanted(const TransportContext& context) {
  return tunables::kCma.get() && context.executorReadsOtherProcesses();
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(const TransportContext& context, bool sender, std::unique_ptr<Segment> segment,
                std::unique_ptr<HostMapping> mapping, kern::Bell* peerBells)
      : Connection(static_cast<kern::FifoHeader*>(mapping->executor()), WakeTarget::peerWorkers(peerBells), "shm"),
        context_(context),
        sender_(sender),
        segment_(std::move(segment)),
        mapping_(std::move(mapping)) {}
  kern::FifoHeader* hostHeader() const { return static_cast<kern::FifoHeader*>(segment_->base()); }

  // The sender's end: offers the receiver its process to read (see the top).
  void offerCrossReads(int receiverPid, const std::string& what) {
    if (!crossReadsWanted(context_)) return;
    if (cma::ptraceScope() == 1) {
      std::string whyNot;
      if (!cma::nameReader(receiverPid, &whyNot)) {
        TUTTI_INFO(log::Shm, "%s: zero-copy across processes off, copying: %s", what.c_str(), whyNot.c_str());
        return;
      }
    }
    probeWord_ = 0x7475747469636d61ull ^ uint64_t(reinterpret_cast<uintptr_t>(this)) ^ uint64_t(getpid());
    kern::FifoHeader* h = hostHeader();
    h->senderPid = uint64_t(getpid());
    h->probeAddr = uint64_t(reinterpret_cast<uintptr_t>(&probeWord_));
    h->probeValue = probeWord_;
  }

  // The receiver's end, once the sender has attached: the test read, and the verdict posted.
  void probeCrossReads(int peer, const std::string& what) {
    kern::FifoHeader* h = hostHeader();
    std::string whyNot;
    const pid_t pid = pid_t(h->senderPid);
    if (!crossReadsWanted(context_)) {
      // Said only where it would have been used: the host executor with TUTTI_CMA=0.
      if (context_.executorReadsOtherProcesses()) whyNot = "TUTTI_CMA=0";
    } else if (pid == 0) {
      whyNot =
          context_.describePeer(peer) + " does not offer its buffers (TUTTI_CMA=0 there, or it named another reader)";
    } else if (pid != pid_t(context_.peerPid(peer))) {
      whyNot = context_.describePeer(peer) + " gave pid " + std::to_string(pid) + ", not the one it joined with";
    } else {
      uint64_t got = 0;
      const int error = cma::read(pid, reinterpret_cast<const void*>(uintptr_t(h->probeAddr)), &got, sizeof got);
      if (error != 0) {
        const int scope = cma::ptraceScope();
        whyNot = "a test read of pid " + std::to_string(pid) +
                 " with process_vm_readv failed: " + cma::errnoName(error) +
                 (scope >= 1 ? " (Yama ptrace_scope is " + std::to_string(scope) + ")" : std::string());
      } else if (got != h->probeValue) {
        whyNot = "a test read of pid " + std::to_string(pid) + " returned other bytes than the peer wrote";
      } else {
        reads_ = true;
      }
    }
    kern::fifoStoreRelease(&h->crossReads, reads_ ? kern::kCrossReadsYes : kern::kCrossReadsNo);
    if (reads_)
      TUTTI_INFO(log::Shm,
                 "%s: zero-copy across processes: registered buffers of pid %d are read in place (process_vm_readv)",
                 what.c_str(), int(pid));
    else if (!whyNot.empty())
      TUTTI_INFO(log::Shm, "%s: zero-copy across processes off, copying: %s", what.c_str(), whyNot.c_str());
  }

  bool readsAcrossProcesses() const override {
    if (!sender_ || reads_) return reads_;
    kern::FifoHeader* h = hostHeader();
    if (h->senderPid == 0) return false;  // not offered
    // The receiver posts its verdict just before its setup completes, which this rank's launch
    // rarely runs ahead of; a verdict still missing at the deadline leaves the connection copying
    // (the receiver takes either kind of message).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(context_.timeoutSeconds());
    uint64_t verdict;
    while ((verdict = kern::fifoLoadAcquire(&h->crossReads)) == 0) {
      if (context_.abortFlag().load() || std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    reads_ = verdict == kern::kCrossReadsYes;
    return reads_;
  }

 private:
  const TransportContext& context_;
  bool sender_;
  mutable bool reads_ = false;  // the verdict: the receiver reads the sender's buffers in place
  uint64_t probeWord_ = 0;      // the sender's: what the receiver's test read must find
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<HostMapping> mapping_;  // unmapped before the segment goes
};

// The receiver's pending connection: the memory transports' wait for the sender, then the probe.
class ShmPendingReceive final : public PendingReceive {
 public:
  ShmPendingReceive(std::unique_ptr<PendingReceive> wait, ShmConnection* connection, int peer, std::string what)
      : wait_(std::move(wait)), connection_(connection), peer_(peer), what_(std::move(what)) {}
  std::unique_ptr<Connection> poll(SteadyTime deadline) override {
    std::unique_ptr<Connection> made = wait_->poll(deadline);
    if (!made) return nullptr;
    connection_->probeCrossReads(peer_, what_);
    return made;
  }

 private:
  std::unique_ptr<PendingReceive> wait_;
  ShmConnection* connection_;  // owned by wait_, then by the caller
  int peer_;
  std::string what_;
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(TransportContext& context) : context_(context) {}

  std::string name() const override { return "shm"; }
  TransportTraits traits() const override { return {.carriesLL = true, .mapsPeerBuffers = true}; }

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
    auto segment =
        createSegment(kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes), false, &descriptor, what);
    kern::fifoInit(static_cast<kern::FifoHeader*>(segment->base()), shape.nsteps, shape.slotBytes, shape.llBytes);
    std::memset(offer, 0, sizeof *offer);
    std::memcpy(offer->bytes, &descriptor, sizeof descriptor);
    auto mapping = std::make_unique<HostMapping>(context_.fifoMemory(), segment->base(), segment->bytes(), what);
    auto connection =
        std::make_unique<ShmConnection>(context_, false, std::move(segment), std::move(mapping), request.peerBells);
    kern::FifoHeader* fifo = connection->hostHeader();  // lives as long as the connection
    ShmConnection* made = connection.get();
    auto wait = std::make_unique<PendingMemoryReceive>(std::move(connection),
                                                       [fifo] { return kern::fifoLoadAcquire(&fifo->attached) != 0; });
    return std::make_unique<ShmPendingReceive>(std::move(wait), made, request.peer, what);
  }

  std::unique_ptr<PendingSend> attach(const ConnectionRequest& request, const ConnectionOffer& offer,
                                      SteadyTime) override {
    const std::string what = fifoWhat(request);
    SegmentDescriptor descriptor;
    std::memcpy(&descriptor, offer.bytes, sizeof descriptor);
    auto segment = attachSegment(descriptor, what);
    checkPeerFifo(*hostFifoMemory(), segment->base(), segment->bytes(), what);
    auto mapping = std::make_unique<HostMapping>(context_.fifoMemory(), segment->base(), segment->bytes(), what);
    auto connection =
        std::make_unique<ShmConnection>(context_, true, std::move(segment), std::move(mapping), request.peerBells);
    connection->offerCrossReads(context_.peerPid(request.peer), what);
    kern::fifoStoreRelease(&connection->hostHeader()->attached, 1);
    return PendingSend::made(std::move(connection));
  }

 private:
  TransportContext& context_;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport(TransportContext& context) {
  return std::make_unique<ShmTransport>(context);
}

}  // namespace tutti::transport::shm
