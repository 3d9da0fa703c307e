// The net proxy thread: FIFO slots to isend, irecv to FIFO slots, bells both ways (see net_proxy.h).
#include "transports/net/net_proxy.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/pages.h"
#include "transports/net/gdr_policy.h"

namespace tutti::transport::net {
namespace {
// How long a failed connection waits for the failing peer's notice (see the fault handling).
constexpr std::chrono::milliseconds kNoticeWait{1000};
// How long the proxy sleeps in poll before it looks at its bell again (see waitForWork).
constexpr long kMinPollSliceNs = 50 * 1000;
constexpr long kMaxPollSliceNs = 1000 * 1000;
// While a worker drives, the thread sleeps on the handover bell at most this long, and so takes
// sockets a worker released (releaseDriving, which does not ring) within it.
constexpr long kReleasedGraceNs = 1000 * 1000;
// The wait policy's busy stretch (net_proxy.h): after the last pass that moved a slot, this long
// of passes without sleeping (spinning, then yielding) before the thread backs off into slices.
constexpr auto kBusyAfterMovement = std::chrono::milliseconds(5);

// Every message on the wire starts with tutti's header, at a fixed place: the first
// kWireHeaderBytes of the slot it is sent from and received into; the executor's data follows it.
// The receiver reads the message's size there, so it never needs the size the backend reports
// (a plugin's test() need not write it, as NCCL does not rely on it), and the call's signature and
// count (kernels/fifo.h, `sigs`), so that a mismatched call over the network is caught as between
// processes of a host. Each slot is this much longer than the executor's chunks (64: the data
// stays aligned for vector loads).
struct WireHeader {
  uint32_t magic;    // kWireMagic: a peer of another tutti version (or not tutti) is told apart
  uint32_t version;  // kWireVersion
  uint64_t bytes;    // the data after the header
  uint64_t signature;
  uint64_t count;
};
constexpr size_t kWireHeaderBytes = 64;
constexpr uint32_t kWireMagic = 0x74747769;  // "iwtt"
constexpr uint32_t kWireVersion = 2;         // 1 was a 16-byte trailer after the data, found by the received size
static_assert(sizeof(WireHeader) <= kWireHeaderBytes, "the header must fit the room each slot keeps for it");
}  // namespace

// One direction of one network connection and the local FIFO the executor sees.
namespace {
struct Unmap {
  size_t bytes;
  void operator()(void* p) const { munmap(p, bytes); }
};
}  // namespace

struct NetProxy::Connection {
  std::unique_ptr<void, Unmap> memory{nullptr, Unmap{0}};  // the FIFO, as this thread and the backend see it
  std::unique_ptr<HostMapping> mapping;                    // as the executor sees it; unmapped before the memory goes
  kern::FifoHeader* fifo = nullptr;
  std::unique_ptr<net::NetSendComm> send;
  std::unique_ptr<net::NetRecvComm> recv;
  net::MemoryRegistration registration;
  // The slots: after the header in `memory`, or device memory registered by dmabuf (GPUDirect
  // RDMA), which `deviceMemory` allocated and this thread reaches only through its copies.
  char* slots = nullptr;
  std::shared_ptr<kern::DeviceMemory> deviceMemory;
  int peer = -1;
  int channel = 0;
  int tag = 0;
  kern::Bell* workerBell = nullptr;
  uint64_t posted = 0;     // slots handed to the backend
  uint64_t completed = 0;  // of those, slots the backend has finished
  net::NetRequest* requests[kern::kMaxFifoSteps] = {};
  // A receive whose peer ended its connection without a goodbye (a plugin's): what the backend
  // said. It is no longer polled; see the fault handling in net_proxy.h.
  std::string endedByPeer;
  // Whether its backend offers descriptors to sleep on (plugins offer none): the wait policy.
  bool pollable = true;

  ~Connection() {
    if (send) send->deregisterMemory(registration);
    if (recv) recv->deregisterMemory(registration);
    if (deviceMemory && slots) deviceMemory->release(slots);
  }
  // Where message `index` starts on the wire: its header, then the executor's slot.
  char* slot(uint64_t index) const { return slots + (index % fifo->nsteps) * fifo->slotBytes; }
  // The header of message `index`, read or written through the copies of device memory where the
  // slots are the device's.
  void writeHeader(uint64_t index, const WireHeader& header) const {
    if (deviceMemory)
      deviceMemory->copyIn(slot(index), &header, sizeof header);
    else
      std::memcpy(slot(index), &header, sizeof header);
  }
  WireHeader readHeader(uint64_t index) const {
    WireHeader header;
    if (deviceMemory)
      deviceMemory->copyOut(&header, slot(index), sizeof header);
    else
      std::memcpy(&header, slot(index), sizeof header);
    return header;
  }
  bool inFlight() const { return posted != completed && endedByPeer.empty(); }
  // Sends published, or handed to the backend and not finished: an operation waits on them.
  bool sendsOutstanding() const { return send && kern::fifoLoadAcquire(&fifo->head) != completed; }
};

struct NetProxy::Failure {
  Error error;
  const Connection* connection;
};

NetProxy::NetProxy(TransportContext& context, std::unique_ptr<net::NetBackend> backend)
    : context_(context), backend_(std::move(backend)), pollSliceNs_(kMinPollSliceNs) {
  thread_ = std::thread([this] { run(); });
}

NetProxy::~NetProxy() {
  stop_.store(true);
  kern::ringBell(&bell_);
  kern::ringBell(&handover_);
  thread_.join();
  if (drained_)
    for (auto& c : connections_)
      if (c->send) c->send->closeGracefully();
}

kern::FifoHeader* NetProxy::add(std::unique_ptr<Connection> c, int peer, int channel, int tag, kern::Bell* workerBell) {
  c->peer = peer;
  c->channel = channel;
  c->tag = tag;
  c->workerBell = workerBell;
  // Page-aligned and touched once here, by the kernel and by this process (recv() and sendmsg()
  // copy through the slots, the workers write and read them): FIFOs are reused for the
  // communicator's life. Shared pages, so that an executor with memory of its own can map them
  // (kern::DeviceMemory::mapHostMemory: pinned and mapped for a GPU).
  const FifoShape shape = context_.fifoShape();
  const size_t slotBytes = shape.slotBytes + kWireHeaderBytes;
  const size_t slotsBytes = size_t(shape.nsteps) * slotBytes;
  const std::string what = context_.where() + ": FIFO for the network connection " + (c->send ? "to" : "from") +
                           " rank " + std::to_string(c->peer) + " on channel " + std::to_string(c->channel);
  // GPUDirect RDMA: the slots in device memory that the NIC registers by dmabuf; the header (head,
  // tail, sizes) stays host memory mapped for the executor, as this thread polls it.
  std::shared_ptr<kern::DeviceMemory> fifoMemory = context_.fifoMemory();
  const bool gdr = useGdr(c->send != nullptr, *fifoMemory);
  const size_t fullBytes = (kern::fifoBytes(shape.nsteps, slotBytes) + kern::kFifoSlotAlign - 1) /
                           kern::kFifoSlotAlign * kern::kFifoSlotAlign;
  const size_t bytes = gdr ? fullBytes - slotsBytes : fullBytes;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throwSystemError(what + ": allocating " + std::to_string(bytes) + " bytes", errno);
  c->memory = std::unique_ptr<void, Unmap>(memory, Unmap{bytes});
  zeroPagesForKernel(memory, bytes, what.c_str());
  c->fifo = static_cast<kern::FifoHeader*>(memory);
  kern::fifoInit(c->fifo, shape.nsteps, slotBytes);
  c->mapping = std::make_unique<HostMapping>(fifoMemory, memory, bytes, what);
  auto* fifo = static_cast<kern::FifoHeader*>(c->mapping->executor());
  if (gdr) {
    kern::ExportHandle handle;
    c->slots =
        static_cast<char*>(fifoMemory->allocateExportable(slotsBytes, what + " (slots in device memory)", &handle));
    c->deviceMemory = fifoMemory;
    if (handle.fd >= 0) ::close(handle.fd);
    const kern::DmaBufRange range = fifoMemory->exportDmaBuf(c->slots, slotsBytes, what);
    try {
      c->registration = c->send ? c->send->registerDmaBuf(c->slots, slotsBytes, range.fd, range.offset)
                                : c->recv->registerDmaBuf(c->slots, slotsBytes, range.fd, range.offset);
    } catch (...) {
      ::close(range.fd);
      throw;
    }
    ::close(range.fd);
    // The executor finds slot 0 at this offset from the header as it sees it (kern::fifoSlot),
    // after the room for the wire header.
    c->fifo->slotOffset = uint64_t(uintptr_t(c->slots)) - uint64_t(uintptr_t(fifo)) + kWireHeaderBytes;
    TUTTI_INFO(log::Net, "%s: slots in device memory registered by dmabuf (GPUDirect RDMA%s)", what.c_str(),
               c->send ? " read" : "");
  } else {
    c->slots = static_cast<char*>(memory) + c->fifo->slotOffset;
    c->fifo->slotOffset += kWireHeaderBytes;  // the executor's data follows each message's header
    if (c->send) c->registration = c->send->registerMemory(memory, bytes);
    if (c->recv) c->registration = c->recv->registerMemory(memory, bytes);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    added_.push_back(std::move(c));
    hasAdded_.store(true);
  }
  kern::ringBell(&bell_);
  return fifo;
}

bool NetProxy::useGdr(bool send, kern::DeviceMemory& memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<bool>& decided = gdr_[send ? 1 : 0];
  if (decided) return *decided;
  const net::NetProperties nic = backend_->properties(0);
  const net::GdrChoice choice = net::chooseGdr(send, nic, memory.memorySpace() != kern::MemorySpace::Host,
                                               memory.exportsDmaBuf(), context_.gpuNicPath(nic.pciPath));
  if (!choice.why.empty())
    TUTTI_INFO(log::Net, "%s: network %s FIFOs %s: %s", context_.where().c_str(), send ? "send" : "receive",
               choice.deviceMemory ? "in device memory registered by dmabuf (GPUDirect RDMA)" : "in host memory",
               choice.why.c_str());
  decided = choice.deviceMemory;
  return choice.deviceMemory;
}

kern::FifoHeader* NetProxy::addSend(std::unique_ptr<net::NetSendComm> comm, int peer, int channel, int tag,
                                    kern::Bell* workerBell) {
  auto c = std::make_unique<Connection>();
  c->pollable = !comm->pollDescriptors().empty();
  c->send = std::move(comm);
  return add(std::move(c), peer, channel, tag, workerBell);
}

kern::FifoHeader* NetProxy::addRecv(std::unique_ptr<net::NetRecvComm> comm, int peer, int channel, int tag,
                                    kern::Bell* workerBell) {
  auto c = std::make_unique<Connection>();
  c->pollable = !comm->pollDescriptors().empty();
  c->recv = std::move(comm);
  return add(std::move(c), peer, channel, tag, workerBell);
}

bool NetProxy::progress(Connection& c) {
  kern::FifoHeader* fifo = c.fifo;
  const uint32_t nsteps = fifo->nsteps;
  bool moved = false;
  if (c.send) {
    const uint64_t head = kern::fifoLoadAcquire(&fifo->head);
    while (c.posted < head) {
      const uint32_t i = uint32_t(c.posted % nsteps);
      char* slot = c.slot(c.posted);
      const size_t size = size_t(fifo->sizes[i]);
      if (size > fifo->slotBytes - kWireHeaderBytes)
        throw Error(ErrorCode::Internal, "message " + std::to_string(c.posted) + " of " + std::to_string(size) +
                                             " bytes leaves no room for its header in a slot of " +
                                             std::to_string(fifo->slotBytes) + " bytes");
      c.writeHeader(c.posted, WireHeader{kWireMagic, kWireVersion, size, fifo->sigs[i], fifo->sigCounts[i]});
      net::NetRequest* r = c.send->isend(slot, kWireHeaderBytes + size, 0, c.registration);
      if (r == nullptr) break;
      c.requests[c.posted % nsteps] = r;
      c.posted++;
      moved = true;
    }
    bool freed = false;
    while (c.completed < c.posted && c.send->test(c.requests[c.completed % nsteps], nullptr)) {
      c.requests[c.completed % nsteps] = nullptr;
      c.completed++;
      freed = true;
    }
    if (freed) {
      kern::fifoStoreRelease(&fifo->tail, c.completed);
      kern::ringBell(c.workerBell);
    }
    return moved || freed;
  }
  if (!c.endedByPeer.empty()) return false;
  // A receive that fails (the peer's end, or a fault) leaves the messages that arrived before it
  // to deliver first: they are tested and published, and only then is the failure raised. A
  // connection delivers in order, so with a plugin's EOF the last of the peer's messages can
  // complete in the very call that fails the next receive.
  std::optional<Error> failed;
  const uint64_t tail = kern::fifoLoadAcquire(&fifo->tail);
  try {
    while (c.posted - tail < nsteps) {
      net::NetRequest* r = c.recv->irecv(c.slot(c.posted), size_t(fifo->slotBytes), 0, c.registration);
      if (r == nullptr) break;
      c.requests[c.posted % nsteps] = r;
      c.posted++;
      moved = true;
    }
  } catch (const Error& e) {
    failed = e;
  }
  bool arrived = false;
  const auto publish = [&] {
    if (!arrived) return;
    kern::fifoStoreRelease(&fifo->head, c.completed);
    kern::ringBell(c.workerBell);
  };
  try {
    testArrivals(c, &arrived);
  } catch (const Error&) {
    publish();
    throw;
  }
  publish();
  if (failed) throw *failed;
  return moved || arrived;
}

// Takes the receives of `c` that the backend has finished, in order, into the FIFO (sizes and
// signatures from tutti's header); sets *arrived for each. The caller publishes them.
void NetProxy::testArrivals(Connection& c, bool* arrived) {
  kern::FifoHeader* fifo = c.fifo;
  const uint32_t nsteps = fifo->nsteps;
  for (;;) {
    // The size the backend reports is not relied on (a plugin may leave it unwritten): only a
    // flush is sized by it, and by the whole slot where it is 0.
    size_t reported = 0;
    if (c.completed == c.posted || !c.recv->test(c.requests[c.completed % nsteps], &reported)) break;
    char* slot = c.slot(c.completed);
    c.recv->flush(slot, reported > 0 ? reported : size_t(fifo->slotBytes), c.registration);
    const WireHeader header = c.readHeader(c.completed);
    if (header.magic != kWireMagic || header.version != kWireVersion ||
        header.bytes > fifo->slotBytes - kWireHeaderBytes)
      throw Error(ErrorCode::Remote, "message " + std::to_string(c.completed) +
                                         " arrived without a valid tutti header (magic " +
                                         std::to_string(header.magic) + ", version " + std::to_string(header.version) +
                                         ", " + std::to_string(header.bytes) + " bytes; " + std::to_string(reported) +
                                         " bytes by the backend's count): a peer of another tutti version?");
    const uint32_t i = uint32_t(c.completed % nsteps);
    fifo->sizes[i] = header.bytes;
    fifo->sigs[i] = header.signature;
    fifo->sigCounts[i] = header.count;
    c.requests[c.completed % nsteps] = nullptr;
    c.completed++;
    *arrived = true;
  }
}

// Sleeps until something may have changed: a socket is ready, or the bell rang. A bell cannot be
// polled, so while requests are in flight the sockets are polled for a slice that starts short
// (an executor's next slot is seen soon) and doubles while nothing moves.
void NetProxy::waitForWork(uint32_t seen, bool inFlight) {
  if (!inFlight) {
    kern::waitBell(&bell_, seen, 100 * 1000 * 1000L);
    return;
  }
  std::vector<pollfd> fds;
  {
    std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
    if (!lock.owns_lock()) {  // a worker is making a pass (see run)
      kern::waitBell(&bell_, seen, kMinPollSliceNs);
      return;
    }
    // Channels that wake only once armed are armed now; what came before the arming raises no
    // event, so one more pass looks for it first.
    bool armed = false;
    for (auto& c : connections_) {
      if (!c->inFlight()) continue;
      try {
        armed = (c->send ? c->send->armForSleep() : c->recv->armForSleep()) || armed;
      } catch (const Error& e) {  // reported by the proxy thread, as a pass's failures are
        if (!failure_) failure_ = std::make_unique<Failure>(Failure{e, c.get()});
        failed_.store(true, std::memory_order_release);
        return;
      }
    }
    if (armed && pass(nullptr)) {
      pollSliceNs_ = kMinPollSliceNs;
      return;
    }
    for (auto& c : connections_) {
      if (!c->inFlight()) continue;
      short events = c->send && !c->send->pollsForInput() ? POLLOUT : POLLIN;
      for (int fd : c->send ? c->send->pollDescriptors() : c->recv->pollDescriptors())
        fds.push_back(pollfd{fd, events, 0});
    }
  }
  if (fds.empty()) {  // only connections without descriptors: a slice on the bell, growing while idle
    kern::waitBell(&bell_, seen, pollSliceNs_);
    pollSliceNs_ = std::min(2 * pollSliceNs_, kMaxPollSliceNs);
    return;
  }
  const timespec slice{0, pollSliceNs_};
  ::ppoll(fds.data(), fds.size(), &slice, nullptr);
  // A quiet link is looked at ever less often, up to once a millisecond; any movement resets it.
  pollSliceNs_ = std::min(2 * pollSliceNs_, kMaxPollSliceNs);
}

// After a pass that moved nothing: true if an executor rang within the communicator's spin busy polls. Only the
// bell is watched here, not the sockets: a pass costs a syscall per socket, nearly all of them
// EAGAIN, and on a machine short of cores that spin takes the core the peer's sender and the
// kernel's TCP processing need (the proxy was 70% of an all-reduce's CPU time, 95% of its recv
// calls empty).
bool NetProxy::spinOnBell(uint32_t seen) {
  for (int i = 0, spin = context_.spin(); i < spin; i++) {
    if (bell_.seq.load(std::memory_order_acquire) != seen) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  return false;
}

// One pass over every connection. A connection that fails stops the pass; the first failure is
// kept for the proxy thread to report, and no pass runs after it.
bool NetProxy::pass(bool* inFlight, Unpollable* unpollable) {
  bool moved = false;
  uint64_t unsent = 0;
  bool needHost = false;
  for (auto& c : connections_) {
    try {
      moved = progress(*c) || moved;
    } catch (const Error& e) {
      if (endedByPeer(*c, e)) continue;
      if (!failure_) failure_ = std::make_unique<Failure>(Failure{e, c.get()});
      failed_.store(true, std::memory_order_release);
      return moved;
    }
    if (inFlight != nullptr) *inFlight = *inFlight || c->inFlight();
    if (unpollable != nullptr && !c->pollable) {
      unpollable->inFlight = unpollable->inFlight || c->inFlight();
      unpollable->sending = unpollable->sending || c->sendsOutstanding();
    }
    if (c->send) {
      const uint64_t head = kern::fifoLoadAcquire(&c->fifo->head);
      unsent += head - c->completed;
      needHost = needHost || head != c->posted || (c->inFlight() && !c->send->completesUnattended());
    }
  }
  unsent_.store(unsent, std::memory_order_release);
  sendsNeedHost_.store(needHost, std::memory_order_release);
  passes_.fetch_add(1, std::memory_order_release);
  return moved;
}

// A receive from a backend without goodbyes (a plugin) that fails has met the peer's end of the
// connection, orderly or not: the ABI does not tell them apart. Its posted receives are tutti's
// own read-ahead, not an operation's, and every message the peer sent before it closed has arrived
// (a connection delivers in order), so the end is no fault by itself: the connection is kept as
// ended and no longer polled. What waits on the peer fails by its own path (see net_proxy.h).
bool NetProxy::endedByPeer(Connection& c, const Error& e) {
  if (!c.recv || c.recv->peerSaysGoodbye() || (e.code() != ErrorCode::Remote && e.code() != ErrorCode::System))
    return false;
  c.endedByPeer = e.message();
  TUTTI_INFO(log::Net,
             "%s: the network connection from %s on channel %d ended after %llu message(s) (%s); no goodbye "
             "is expected of a plugin, so this is no error unless an operation waits on that peer",
             context_.where().c_str(), context_.describePeer(c.peer).c_str(), c.channel,
             static_cast<unsigned long long>(c.completed), e.message().c_str());
  return true;
}

// Takes the connections added since the last pass (under progressMutex_).
void NetProxy::adoptAdded() {
  if (!hasAdded_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : added_) connections_.push_back(std::move(c));
  added_.clear();
  hasAdded_.store(false);
}

bool NetProxy::tryProgress() {
  if (failed_.load(std::memory_order_acquire) || context_.abortFlag().load(std::memory_order_relaxed)) return false;
  std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  adoptAdded();  // a launch's new connections, which the proxy thread may not have taken yet
  const bool moved = pass(nullptr);
  if (failure_) {  // the proxy thread reports it
    kern::ringBell(&bell_);
    kern::ringBell(&handover_);
  }
  return moved;
}

bool NetProxy::sendsWaiting() {
  std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (hasAdded_.load(std::memory_order_acquire)) return true;  // not seen by a pass yet
  for (const auto& c : connections_)
    if (c->send && kern::fifoLoadAcquire(&c->fifo->head) != c->completed) return true;
  return false;
}

void NetProxy::reportFailure(const Failure& f) {
  const Connection& c = *f.connection;
  ErrorCode code = f.error.code() == ErrorCode::System ? ErrorCode::System : ErrorCode::Remote;
  std::string message = context_.where() + ": network connection " + (c.send ? "to " : "from ") +
                        context_.describePeer(c.peer) + " on channel " + std::to_string(c.channel) +
                        (c.tag != 0 ? " tag " + std::to_string(c.tag) : std::string()) +
                        " failed: " + f.error.message();
  // A rank that fails tells everyone why and then closes its connections: give that notice a
  // moment to arrive, so the cause is reported rather than its closing.
  for (auto until = std::chrono::steady_clock::now() + kNoticeWait;
       std::chrono::steady_clock::now() < until && !context_.failed() && !stop_.load();)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!context_.failed()) TUTTI_WARN("%s", message.c_str());
  context_.fail(Error(code, message), c.peer);
}

void NetProxy::run() {
  log::setThreadDevice(context_.device());
  while (!stop_.load(std::memory_order_acquire)) {
    const uint32_t seen = bell_.seq.load(std::memory_order_acquire);
    const uint32_t handoverSeen = handover_.seq.load(std::memory_order_seq_cst);
    if (drivers_.load(std::memory_order_seq_cst) > 0 && !failed_.load(std::memory_order_acquire)) {
      kern::waitBell(&handover_, handoverSeen, kReleasedGraceNs);
      continue;
    }
    bool moved = false, inFlight = false;
    Unpollable unpollable;
    std::unique_ptr<Failure> failure;
    {
      // A worker making a pass has the sockets: rather than queue behind it (and be woken when
      // it lets go, a switch on its core each time), look again shortly.
      std::unique_lock<std::mutex> progressLock(progressMutex_, std::try_to_lock);
      if (!progressLock.owns_lock()) {
        kern::waitBell(&bell_, seen, kMinPollSliceNs);
        continue;
      }
      adoptAdded();
      if (!failed_.load(std::memory_order_acquire) && !context_.abortFlag().load(std::memory_order_relaxed))
        moved = pass(&inFlight, &unpollable);
      failure = std::move(failure_);
    }
    if (failure) {
      reportFailure(*failure);
      continue;
    }
    if (failed_.load(std::memory_order_acquire) || context_.abortFlag().load(std::memory_order_relaxed)) {
      // Nothing more moves after an abort or a failure; wait to be stopped.
      kern::waitBell(&bell_, seen, 100 * 1000 * 1000L);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (moved) lastMovement_ = now;
    if (moved || spinOnBell(seen)) {
      pollSliceNs_ = kMinPollSliceNs;
      continue;
    }
    // A device launch is outstanding: its kernel publishes without ringing, so look again now.
    if (holds_.load(std::memory_order_acquire) > 0) {
      std::this_thread::yield();
      continue;
    }
    // Connections without descriptors (plugins) cannot wake the thread: while they carry an
    // operation's messages, look again now rather than after a slice (the wait policy, net_proxy.h).
    if (unpollable.inFlight && (unpollable.sending || now - lastMovement_ < kBusyAfterMovement)) {
      pollSliceNs_ = kMinPollSliceNs;
      std::this_thread::yield();
      continue;
    }
    if (holds_.load(std::memory_order_acquire) > 0) sleepsWhileHeld_.fetch_add(1, std::memory_order_relaxed);
    waitForWork(seen, inFlight);
  }
}

void NetProxy::drain(double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t start = passes_.load(std::memory_order_acquire);
  while (std::chrono::steady_clock::now() < deadline && !context_.abortFlag().load()) {
    kern::ringBell(&bell_);
    kern::ringBell(&handover_);
    if (passes_.load(std::memory_order_acquire) > start + 1 && unsent_.load(std::memory_order_acquire) == 0 &&
        !hasAdded_.load()) {
      drained_ = true;
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace tutti::transport::net
