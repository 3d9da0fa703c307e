// The IB backend's sending and receiving comms and its listener (protocol in ib_comms.h).
#include "transports/net/ib/ib_comms.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"

namespace tutti::transport::net::ib {
namespace {

constexpr char kByeByte = 'B';              // the sender closes after its last message
constexpr uint64_t kCtsWrite = 1ull << 63;  // wr_id flag of the receiver's clear-to-send writes
// The connector's QP is in RTS: it says so with a zero-byte write with immediate, which takes the
// receive the acceptor posted before it answered, and clear-to-send entries may come. (A byte on
// the side socket said it before: the receiver then read that socket at every proxy pass, a failing
// system call per pass for each channel whose sender had not connected.)
constexpr uint64_t kReadyWrite = 1ull << 62;
constexpr int kDepth =
    2 * kSlots + 2;  // per QP: a data write and a completion write for every slot, or a clear-to-send each

// The QPs of one side of a connection: each has its own completion queue.
using QueuePairs = std::vector<std::unique_ptr<IbQueuePair>>;

QueuePairs makeQueuePairs(const std::shared_ptr<IbDevice>& device, const std::string& peer, size_t count) {
  QueuePairs qps;
  for (size_t i = 0; i < count; ++i) qps.push_back(std::make_unique<IbQueuePair>(device, peer, kDepth));
  return qps;
}

// Where part `part` of a message of `bytes` begins and how long it is, the message cut in `parts`.
std::pair<size_t, size_t> partOf(size_t bytes, size_t parts, size_t part) {
  size_t chunk = parts == 1 ? bytes : (bytes + parts - 1) / parts;
  chunk = parts == 1 ? chunk : (chunk + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
  size_t begin = std::min(bytes, part * chunk);
  return {begin, std::min(chunk, bytes - begin)};
}

// What the side TCP socket says of the peer, waiting at most `ms` for news.
enum class PeerState { Alive, SaidBye, Closed, LinkTimedOut };
PeerState peerState(Socket& socket, int ms) {
  pollfd p{socket.fd(), POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return PeerState::Alive;
  char bytes[16];
  Socket::ReadResult r = socket.readSome(bytes, sizeof bytes);
  if (std::memchr(bytes, kByeByte, r.bytes) != nullptr) return PeerState::SaidBye;
  if (r.error == ETIMEDOUT) return PeerState::LinkTimedOut;
  return r.closed ? PeerState::Closed : PeerState::Alive;
}

// The side socket watches the link as the Socket backend's connections do (keepalive probes and a
// send timeout of TUTTI_NET_LINK_TIMEOUT): a cut link stays silent to a QP with nothing in flight,
// and a receive that waits for data would otherwise wait for TUTTI_TIMEOUT.
void watchLink(Socket& socket) {
  socket.setLinkTimeout(int(std::clamp<int64_t>(tunables::kNetLinkTimeout.get(), 0, 24 * 3600)));
}

// Arms every QP's completion queue before the proxy sleeps on their channels (NetSendComm::
// armForSleep). Only then: a CQ armed while a worker spins on it raises an event for each
// completion, each taken later with a system call.
bool armAll(QueuePairs& qps) {
  bool armed = false;
  for (auto& qp : qps) armed = qp->armForSleep() || armed;
  return armed;
}

// Polls without a completion between looks at the side socket (the proxy polls about every ms).
constexpr uint64_t kIdlePollsPerLook = 1024;

// A send's or receive's test: once done, reports its bytes, gives its registration back to the
// device's cache and frees its slot. False while it runs.
template <typename Request>
bool finishRequest(Request& r, size_t done, size_t* bytes, IbDevice& device) {
  if (!r.done) return false;
  if (bytes) *bytes = done;
  if (r.cached) device.release(r.cached);
  r.cached = nullptr;
  r.inUse = false;
  return true;
}

class IbSendComm final : public NetSendComm {
 public:
  IbSendComm(std::shared_ptr<IbDevice> device, Socket socket, std::string peer)
      : device_(std::move(device)), fifo_(new CtsEntry[kSlots]()) {
    qps_ = makeQueuePairs(device_, peer, size_t(tunables::kIbQpsPerConnection.get()));
    splitData_ = tunables::kIbSplitDataOnQps.get();
    adaptiveRouting_ = useAdaptiveRouting(device_->portAttr().link_layer);
    arThreshold_ = uint64_t(tunables::kIbArThreshold.get());
    remote_.resize(qps_.size());
    // The CPU polls the entries' sequence written last: they must land in order (no relaxed ordering).
    fifoMr_ = device_->registerOwned(fifo_.get(), sizeof(CtsEntry) * kSlots, false);
    socket_ = std::move(socket);
    watchLink(socket_);
  }
  ~IbSendComm() override {
    socket_.close();
    qps_.clear();
    device_->deregister(fifoMr_);
    for (Request& r : requests_)
      if (r.inUse && r.cached) device_->release(r.cached);
  }

  // The connector's half of the handshake; the rest arrives in finishConnect().
  void sendHello(uint64_t nonce, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
    IbHello hello{};
    hello.magic = kIbHandleMagic;
    hello.nonce = nonce;
    hello.qps = uint32_t(qps_.size());
    hello.splitData = splitData_ ? 1 : 0;
    std::vector<QpInfo> infos;
    for (auto& qp : qps_) infos.push_back(qp->localInfo());
    infos[0].fifoAddress = uint64_t(uintptr_t(fifo_.get()));
    infos[0].fifoRkey = fifoMr_->rkey;
    socket_.sendAll(&hello, sizeof hello, deadline, abortFlag);
    socket_.sendAll(infos.data(), sizeof(QpInfo) * infos.size(), deadline, abortFlag);
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override { return {device_->registerOwned(data, bytes)}; }
  MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) override {
    return {device_->acquireDmaBuf(data, bytes, fd, offset, "the receiver " + peer())};
  }
  void deregisterMemory(MemoryRegistration registration) override {
    device_->deregister(static_cast<ibv_mr*>(registration.backendData));
  }

  NetRequest* isend(const void* data, size_t bytes, int, MemoryRegistration registration) override {
    Request& r = requests_[(nextSequence_ - 1) % kSlots];
    if (r.inUse || bytes > UINT32_MAX) return nullptr;
    r = Request{};
    r.inUse = true;
    r.data = data;
    r.bytes = bytes;
    r.sequence = nextSequence_++;
    if (registration.backendData)
      r.mr = static_cast<ibv_mr*>(registration.backendData);
    else if (bytes > 0)
      r.mr = r.cached = device_->acquire(data, bytes);
    progress();
    return &r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    Request* r = static_cast<Request*>(request);
    return finishRequest(*r, r->bytes, bytes, *device_);
  }

  // The QPs' completion channels; and the socket until the acceptor's QP information has arrived.
  std::vector<int> pollDescriptors() const override {
    std::vector<int> fds;
    for (auto& qp : qps_) fds.push_back(qp->descriptor());
    if (!connected_) fds.push_back(socket_.fd());
    return fds;
  }
  bool pollsForInput() const override { return true; }
  bool armForSleep() override { return armAll(qps_); }
  bool completesUnattended() const override { return nextPost_ == nextSequence_; }

  void closeGracefully() override {
    // A connection never used has the acceptor's QP information unread: closing a socket with
    // unread bytes resets it, and the reset can overtake the goodbye. Take what has arrived first.
    char unread[512];
    while (::recv(socket_.fd(), unread, sizeof unread, MSG_DONTWAIT) > 0) {
    }
    char bye = kByeByte;
    (void)!::send(socket_.fd(), &bye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

 private:
  struct Request : NetRequest {
    const void* data = nullptr;
    size_t bytes = 0;
    uint64_t sequence = 0;
    ibv_mr* mr = nullptr;
    ibv_mr* cached = nullptr;  // from the device's cache: released when done
    int outstanding = 0;       // signaled writes posted and not yet completed
    bool done = false;
    bool inUse = false;
  };

  // Waits for nothing: takes the acceptor's QP information once it has arrived.
  bool finishConnect() {
    if (connected_) return true;
    size_t wanted = sizeof(QpInfo) * remote_.size();
    Socket::ReadResult r =
        socket_.readSome(reinterpret_cast<char*>(remote_.data()) + remoteBytes_, wanted - remoteBytes_);
    remoteBytes_ += r.bytes;
    if (remoteBytes_ < wanted) {
      if (r.closed)
        throw Error(ErrorCode::Remote, "NET/IB: connect to " + peer() + " on " + device_->name() +
                                           ": the peer closed the connection before sending its QP information");
      return false;
    }
    for (size_t i = 0; i < qps_.size(); ++i) qps_[i]->connectTo(remote_[i]);
    ibv_send_wr ready{};
    ready.wr_id = kReadyWrite;
    ready.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    ready.send_flags = IBV_SEND_SIGNALED;
    qps_.front()->postSend(&ready, "connect (ready write)");
    connected_ = true;
    return true;
  }

  void progress() {
    device_->throwIfFailed("isend", peer());
    if (!finishConnect()) return;
    // Completions first: polling may be what places an arrived clear-to-send entry (a software
    // verbs library that moves the bytes in the poller's thread), and the entries are read after.
    int completions = 0;
    for (auto& qp : qps_) {
      ibv_wc wc[kSlots];
      int n = qp->poll(wc, kSlots, "isend");
      completions += n;
      for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id == kReadyWrite) continue;
        Request& r = requests_[(wc[i].wr_id - 1) % kSlots];
        if (r.sequence != wc[i].wr_id || r.outstanding <= 0)
          throw Error(ErrorCode::Internal, "NET/IB: isend to " + peer() + " on " + device_->name() +
                                               ": a completion for message " + std::to_string(wc[i].wr_id) +
                                               " that is not in flight");
        if (--r.outstanding == 0) r.done = true;
      }
    }
    bool waiting = false;
    while (nextPost_ < nextSequence_) {
      Request& r = requests_[(nextPost_ - 1) % kSlots];
      CtsEntry& entry = fifo_[(nextPost_ - 1) % kSlots];
      if (__atomic_load_n(&entry.sequence, __ATOMIC_ACQUIRE) != nextPost_) {
        waiting = true;
        break;
      }
      if (r.bytes > entry.capacity)
        throw Error(ErrorCode::Remote, "NET/IB: isend to " + peer() + " on " + device_->name() + ": a message of " +
                                           std::to_string(r.bytes) + " bytes is longer than the receive posted (" +
                                           std::to_string(entry.capacity) + " bytes)");
      if (splitData_) {
        for (size_t i = 0; i < qps_.size(); ++i) {
          auto [begin, length] = partOf(r.bytes, qps_.size(), i);
          postWrite(*qps_[i], r, entry, begin, length);
        }
      } else {
        auto [begin, length] = partOf(r.bytes, 1, 0);
        postWrite(*qps_[(r.sequence - 1) % qps_.size()], r, entry, begin, length);
      }
      ++nextPost_;
    }
    // A receiver that went away sends no clear-to-send entry and, with nothing in flight, no
    // completion says so: look at the TCP socket now and then.
    if (waiting && completions == 0 && ++idlePolls_ % kIdlePollsPerLook == 0) {
      PeerState state = peerState(socket_, 0);
      if (state == PeerState::LinkTimedOut)
        throw Error(ErrorCode::Remote, "NET/IB: isend to " + peer() + " on " + device_->name() +
                                           ": the link to the peer is down (no answer within TUTTI_NET_LINK_TIMEOUT)");
      if (state != PeerState::Alive)
        throw Error(ErrorCode::Remote,
                    "NET/IB: isend to " + peer() + " on " + device_->name() + ": the peer closed the connection");
    }
  }

  // Writes [begin, begin + length) of `r` to its place in the receiver's buffer over `qp`, ending
  // with a write with immediate (the message's size) that completes one of the receiver's receives.
  // With adaptive routing, a large message goes as a plain write and a zero-byte write with
  // immediate after it on the same QP (see ib_comms.h).
  void postWrite(IbQueuePair& qp, Request& r, const CtsEntry& entry, size_t begin, size_t length) {
    ibv_sge sge{uint64_t(uintptr_t(r.data)) + begin, uint32_t(length), r.mr ? r.mr->lkey : 0};
    ibv_send_wr data{}, signal{};
    signal.wr_id = r.sequence;
    signal.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    signal.send_flags = IBV_SEND_SIGNALED;
    signal.imm_data = uint32_t(r.bytes);
    signal.wr.rdma.remote_addr = entry.address + begin;
    signal.wr.rdma.rkey = entry.rkey;
    if (adaptiveRouting_ && r.bytes > arThreshold_ && length > 0) {
      data.wr_id = r.sequence;
      data.sg_list = &sge;
      data.num_sge = 1;
      data.opcode = IBV_WR_RDMA_WRITE;
      data.wr.rdma.remote_addr = entry.address + begin;
      data.wr.rdma.rkey = entry.rkey;
      data.next = &signal;
      ++r.outstanding;
      qp.postSend(&data, "isend");
      return;
    }
    signal.sg_list = &sge;
    signal.num_sge = length ? 1 : 0;
    ++r.outstanding;
    qp.postSend(&signal, "isend");
  }

  const std::string& peer() const { return qps_.front()->peer(); }

  std::shared_ptr<IbDevice> device_;
  QueuePairs qps_;
  bool splitData_ = false;
  bool adaptiveRouting_ = false;
  uint64_t arThreshold_ = 0;
  std::unique_ptr<CtsEntry[]> fifo_;
  ibv_mr* fifoMr_ = nullptr;
  Socket socket_;
  std::vector<QpInfo> remote_;
  size_t remoteBytes_ = 0;
  bool connected_ = false;
  Request requests_[kSlots];
  uint64_t nextSequence_ = 1, nextPost_ = 1;
  uint64_t idlePolls_ = 0;
};

class IbRecvComm final : public NetRecvComm {
 public:
  IbRecvComm(std::shared_ptr<IbDevice> device, QueuePairs qps, bool splitData, Socket socket, const QpInfo& remote)
      : device_(std::move(device)),
        qps_(std::move(qps)),
        splitData_(splitData),
        cts_(new CtsEntry[kSlots]()),
        socket_(std::move(socket)),
        remoteFifo_(remote.fifoAddress),
        remoteFifoRkey_(remote.fifoRkey) {
    ctsMr_ = device_->registerOwned(cts_.get(), sizeof(CtsEntry) * kSlots, false);
    watchLink(socket_);
  }
  ~IbRecvComm() override {
    socket_.close();
    qps_.clear();
    flushQp_.reset();
    device_->deregister(flushMr_);
    device_->deregister(ctsMr_);
    for (Request& r : requests_)
      if (r.inUse && r.cached) device_->release(r.cached);
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override { return {device_->registerOwned(data, bytes)}; }
  MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) override {
    return {device_->acquireDmaBuf(data, bytes, fd, offset, "the sender " + qps_.front()->peer())};
  }
  void deregisterMemory(MemoryRegistration registration) override {
    device_->deregister(static_cast<ibv_mr*>(registration.backendData));
  }

  NetRequest* irecv(void* data, size_t capacity, int, MemoryRegistration registration) override {
    Request& r = requests_[(nextSequence_ - 1) % kSlots];
    if (r.inUse) return nullptr;
    r = Request{};
    r.inUse = true;
    r.data = data;
    r.capacity = std::min<size_t>(capacity, UINT32_MAX);
    r.sequence = nextSequence_;
    if (registration.backendData)
      r.mr = static_cast<ibv_mr*>(registration.backendData);
    else if (capacity > 0)
      r.mr = r.cached = device_->acquire(data, capacity);
    ibv_recv_wr wr{};
    wr.wr_id = r.sequence;  // how its completion finds this request, whatever the order across QPs
    wr.num_sge = 0;         // the data arrives by RDMA write; the work request takes its immediate
    // One receive on the QP the whole message comes over, or one on each QP for the parts.
    if (splitData_) {
      for (auto& qp : qps_) guarded([&] { qp->postRecv(&wr, "irecv"); });
      r.outstanding = int(qps_.size());
    } else {
      guarded([&] { qps_[(r.sequence - 1) % qps_.size()]->postRecv(&wr, "irecv"); });
      r.outstanding = 1;
    }
    ++nextSequence_;
    progress();
    return &r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    Request* r = static_cast<Request*>(request);
    return finishRequest(*r, r->received, bytes, *device_);
  }

  // Host memory: nothing to make visible. Device memory registered by dmabuf: as NCCL does, an
  // RDMA read of a few bytes of the received buffer over a QP connected to itself, waited for:
  // the NIC completes it only after its earlier writes to that memory are visible to the GPU.
  void flush(void* data, size_t bytes, MemoryRegistration registration) override {
    auto* mr = static_cast<ibv_mr*>(registration.backendData);
    if (bytes == 0 || !mr || tunables::kGdrFlushDisable.get() || !device_->isDmaBuf(mr)) return;
    if (!flushQp_) {
      flushQp_ = std::make_unique<IbQueuePair>(
          device_, "itself (GDR flush of the receive from " + qps_.front()->peer() + ")", 2);
      flushQp_->connectTo(flushQp_->localInfo());
      flushMr_ = device_->registerOwned(flushBytes_, sizeof flushBytes_, false);
    }
    ibv_sge sge{uint64_t(uintptr_t(flushBytes_)), uint32_t(std::min(bytes, sizeof flushBytes_)), flushMr_->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kCtsWrite;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = uint64_t(uintptr_t(data));
    wr.wr.rdma.rkey = mr->rkey;
    flushQp_->postSend(&wr, "flush (GDR RDMA read)");
    const SteadyTime deadline = deadlineAfter(kFlushSeconds);
    for (;;) {
      ibv_wc wc;
      if (flushQp_->poll(&wc, 1, "flush (GDR RDMA read)") == 1) return;
      if (SteadyClock::now() > deadline)
        throw Error(ErrorCode::System, "NET/IB: flush of the receive from " + qps_.front()->peer() + " on " +
                                           device_->name() +
                                           ": the RDMA read of the received buffer did not complete within " +
                                           std::to_string(kFlushSeconds) + " s");
      std::this_thread::yield();
    }
  }
  // The QPs' completion channels; and the side socket until the connector's QP is ready, for its
  // goodbye or end.
  std::vector<int> pollDescriptors() const override {
    std::vector<int> fds;
    for (auto& qp : qps_) fds.push_back(qp->descriptor());
    if (!ready_ && !peerSaidBye_) fds.push_back(socket_.fd());
    return fds;
  }
  bool armForSleep() override { return armAll(qps_); }

 private:
  struct Request : NetRequest {
    void* data = nullptr;
    size_t capacity = 0;
    size_t received = 0;
    uint64_t sequence = 0;
    ibv_mr* mr = nullptr;
    ibv_mr* cached = nullptr;
    int outstanding = 0;  // receives posted and not yet completed
    bool done = false;
    bool inUse = false;
  };

  // Runs `f`; an error it throws names the closed connection when the peer has gone. After the
  // sender's goodbye its QPs' end flushes the receives posted ahead: that is no error, and those
  // receives stay pending (the proxy posts receives before messages exist), as with Socket.
  template <typename F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Remote) throw;
      PeerState state = peerSaidBye_ ? PeerState::SaidBye : peerState(socket_, 200);
      if (state == PeerState::SaidBye) {
        peerSaidBye_ = true;
        return;
      }
      if (state != PeerState::Alive) throw Error(ErrorCode::Remote, e.message() + "; the peer closed the connection");
      throw;
    }
  }

  void progress() {
    device_->throwIfFailed("irecv", qps_.front()->peer());
    // A sender that never sent a message may close without ever connecting its QP: its goodbye
    // (and the end of the connection after it) is no error, no data will come.
    if (!ready_ && peerSaidBye_) return;
    bool idle = true;
    // Each QP on its own: one QP's error (after a goodbye) must not keep another's successes unseen.
    for (auto& qp : qps_)
      guarded([&] {
        ibv_wc wc[2 * kSlots];
        int n = qp->poll(wc, 2 * kSlots, "irecv");
        for (int i = 0; i < n; ++i) {
          if (wc[i].wr_id & kCtsWrite) continue;
          if (wc[i].wr_id == kReadyWrite) {  // the sender's QP is ready (see kReadyWrite)
            ready_ = true;
            continue;
          }
          Request& r = requests_[(wc[i].wr_id - 1) % kSlots];
          if (!r.inUse || r.sequence != wc[i].wr_id || r.outstanding <= 0)
            throw Error(ErrorCode::Internal, "NET/IB: irecv from " + qp->peer() + " on " + device_->name() +
                                                 ": a completion for message " + std::to_string(wc[i].wr_id) +
                                                 " that is not in flight");
          r.received = wc[i].imm_data;
          if (--r.outstanding == 0) r.done = true;
        }
        idle = idle && n == 0;
      });
    if (ready_)
      guarded([&] {
        while (nextCts_ < nextSequence_) {
          Request& r = requests_[(nextCts_ - 1) % kSlots];
          CtsEntry& entry = cts_[(nextCts_ - 1) % kSlots];
          entry = CtsEntry{uint64_t(uintptr_t(r.data)), r.mr ? r.mr->rkey : 0, uint32_t(r.capacity), r.sequence};
          ibv_sge sge{uint64_t(uintptr_t(&entry)), sizeof entry, ctsMr_->lkey};
          ibv_send_wr wr{};
          wr.wr_id = kCtsWrite | r.sequence;
          wr.sg_list = &sge;
          wr.num_sge = 1;
          wr.opcode = IBV_WR_RDMA_WRITE;
          wr.send_flags = IBV_SEND_SIGNALED;
          wr.wr.rdma.remote_addr = remoteFifo_ + ((nextCts_ - 1) % kSlots) * sizeof(CtsEntry);
          wr.wr.rdma.rkey = remoteFifoRkey_;
          qps_.front()->postSend(&wr, "irecv (clear to send)");
          ++nextCts_;
        }
      });
    // Before the sender's QP is ready, and while a receive waits for data, the side socket is
    // looked at now and then for a goodbye, a closed connection or a link that stopped answering.
    if (idle && (!ready_ || awaitingData()) && !peerSaidBye_ && ++idlePolls_ % kIdlePollsPerLook == 0) checkPeer();
  }

  bool awaitingData() const {
    for (const Request& r : requests_)
      if (r.inUse && !r.done) return true;
    return false;
  }

  // A receive waits for data: a sender that left without goodbye, or a link that stopped
  // answering, ends it now rather than at TUTTI_TIMEOUT.
  void checkPeer() {
    PeerState state = peerState(socket_, 0);
    if (state == PeerState::SaidBye) peerSaidBye_ = true;
    if (state == PeerState::LinkTimedOut)
      throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qps_.front()->peer() + " on " + device_->name() +
                                         ": the link to the peer is down (no answer within TUTTI_NET_LINK_TIMEOUT)" +
                                         (ready_ ? "" : " before its QP was ready"));
    if (state == PeerState::Closed)
      throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qps_.front()->peer() + " on " + device_->name() +
                                         ": the peer closed the connection without saying goodbye" +
                                         (ready_ ? "" : " before its QP was ready"));
  }

  std::shared_ptr<IbDevice> device_;
  QueuePairs qps_;
  bool splitData_;
  std::unique_ptr<CtsEntry[]> cts_;
  ibv_mr* ctsMr_ = nullptr;
  static constexpr int kFlushSeconds = 10;  // a local read; this long means the device is stuck
  std::unique_ptr<IbQueuePair> flushQp_;    // connected to itself, made at the first GDR flush
  ibv_mr* flushMr_ = nullptr;
  alignas(16) char flushBytes_[16] = {};
  Socket socket_;
  uint64_t remoteFifo_;
  uint32_t remoteFifoRkey_;
  bool ready_ = false;
  bool peerSaidBye_ = false;
  uint64_t idlePolls_ = 0;
  Request requests_[kSlots];
  uint64_t nextSequence_ = 1, nextCts_ = 1;
};

class IbListenComm final : public NetListenComm {
 public:
  IbListenComm(std::shared_ptr<IbDevice> device, Socket listener, uint64_t nonce)
      : device_(std::move(device)), listener_(std::move(listener)), nonce_(nonce) {}

  std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    for (;;) {
      Socket socket = listener_.accept(deadline, abortFlag);
      if (auto comm = handshake(std::move(socket), std::min(deadline, deadlineAfter(10)), abortFlag)) return comm;
    }
  }

  std::unique_ptr<NetRecvComm> acceptIfReady() override {
    Socket socket = listener_.tryAccept();
    if (!socket.valid()) return nullptr;
    return handshake(std::move(socket), deadlineAfter(10), nullptr);
  }

 private:
  // nullptr (and a log line) when what connected is not the peer this listener's handle went to.
  std::unique_ptr<NetRecvComm> handshake(Socket socket, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
    std::string peer = socket.peerAddress().toString();
    IbHello hello{};
    try {
      socket.recvAll(&hello, sizeof hello, deadline, abortFlag);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Aborted) throw;
      TUTTI_INFO(log::Net, "NET/IB: dropped a connection from %s to the listener on %s: %s", peer.c_str(),
                 device_->name().c_str(), e.what());
      return nullptr;
    }
    if (hello.magic != kIbHandleMagic || hello.nonce != nonce_ || hello.qps < 1 || hello.qps > uint32_t(kMaxQps)) {
      TUTTI_INFO(log::Net, "NET/IB: dropped a connection from %s to the listener on %s: not this listener's peer",
                 peer.c_str(), device_->name().c_str());
      return nullptr;
    }
    std::vector<QpInfo> remote(hello.qps);
    try {
      socket.recvAll(remote.data(), sizeof(QpInfo) * remote.size(), deadline, abortFlag);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Aborted) throw;
      TUTTI_INFO(log::Net, "NET/IB: dropped a connection from %s to the listener on %s: %s", peer.c_str(),
                 device_->name().c_str(), e.what());
      return nullptr;
    }
    QueuePairs qps = makeQueuePairs(device_, peer, remote.size());
    std::vector<QpInfo> mine;
    for (size_t i = 0; i < qps.size(); ++i) {
      qps[i]->connectTo(remote[i]);
      mine.push_back(qps[i]->localInfo());
    }
    ibv_recv_wr ready{};  // taken by the connector's ready write (kReadyWrite), before any message
    ready.wr_id = kReadyWrite;
    qps.front()->postRecv(&ready, "accept (the connector's ready write)");
    socket.sendAll(mine.data(), sizeof(QpInfo) * mine.size(), deadline, abortFlag);
    return std::make_unique<IbRecvComm>(device_, std::move(qps), hello.splitData != 0, std::move(socket), remote[0]);
  }

  std::shared_ptr<IbDevice> device_;
  Socket listener_;
  uint64_t nonce_;
};

}  // namespace

bool useAdaptiveRouting(uint8_t linkLayer) {
  int64_t setting = tunables::kIbAdaptiveRouting.get();
  if (setting >= 0) return setting != 0;
  return linkLayer == IBV_LINK_LAYER_INFINIBAND;
}

std::unique_ptr<NetSendComm> makeIbSendComm(std::shared_ptr<IbDevice> device, Socket socket, std::string peer,
                                            uint64_t nonce, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  auto comm = std::make_unique<IbSendComm>(std::move(device), std::move(socket), std::move(peer));
  comm->sendHello(nonce, deadline, abortFlag);
  return comm;
}

std::unique_ptr<NetListenComm> makeIbListenComm(std::shared_ptr<IbDevice> device, Socket listener, uint64_t nonce) {
  return std::make_unique<IbListenComm>(std::move(device), std::move(listener), nonce);
}

}  // namespace tutti::transport::net::ib
