// The IB backend's sending and receiving comms and its listener (protocol in ib_comms.h).
#include "transports/net/ib/ib_comms.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"

namespace tutti::net::ib {
namespace {

constexpr char kReadyByte = 'R';  // the connector's QP is in RTS: clear-to-send entries may come
constexpr char kByeByte = 'B';    // the sender closes after its last message
constexpr uint64_t kCtsWrite = 1ull << 63;  // wr_id flag of the receiver's clear-to-send writes
constexpr int kDepth = 2 * kSlots + 2;

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

// True when the peer closed the TCP socket, said goodbye or cannot be reached.
bool peerClosed(Socket& socket, int ms) { return peerState(socket, ms) != PeerState::Alive; }

// The side socket watches the link as the Socket backend's connections do (keepalive probes and a
// send timeout of TUTTI_NET_LINK_TIMEOUT): a cut link stays silent to a QP with nothing in flight,
// and a receive that waits for data would otherwise wait for TUTTI_TIMEOUT.
void watchLink(Socket& socket) {
  socket.setLinkTimeout(int(std::clamp<int64_t>(tunables::kNetLinkTimeout.get(), 0, 24 * 3600)));
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
    qp_ = std::make_unique<IbQueuePair>(device_, peer, kDepth);
    fifoMr_ = device_->registerOwned(fifo_.get(), sizeof(CtsEntry) * kSlots);
    socket_ = std::move(socket);
    watchLink(socket_);
  }
  ~IbSendComm() override {
    socket_.close();
    qp_.reset();
    device_->deregister(fifoMr_);
    for (Request& r : requests_)
      if (r.inUse && r.cached) device_->release(r.cached);
  }

  // The connector's half of the handshake; the rest arrives in finishConnect().
  void sendHello(uint64_t nonce, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
    IbHello hello{};
    hello.magic = kIbHandleMagic;
    hello.nonce = nonce;
    hello.info = qp_->localInfo();
    hello.info.fifoAddress = uint64_t(uintptr_t(fifo_.get()));
    hello.info.fifoRkey = fifoMr_->rkey;
    socket_.sendAll(&hello, sizeof hello, deadline, abortFlag);
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override {
    return {device_->registerOwned(data, bytes)};
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
    if (registration.backendData) r.mr = static_cast<ibv_mr*>(registration.backendData);
    else if (bytes > 0) r.mr = r.cached = device_->acquire(data, bytes);
    progress();
    return &r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    Request* r = static_cast<Request*>(request);
    return finishRequest(*r, r->bytes, bytes, *device_);
  }

  std::vector<int> pollDescriptors() const override { return {}; }

  void closeGracefully() override {
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
    bool done = false;
    bool inUse = false;
  };

  // Waits for nothing: takes the acceptor's QP information once it has arrived.
  bool finishConnect() {
    if (connected_) return true;
    Socket::ReadResult r = socket_.readSome(reinterpret_cast<char*>(&remote_) + remoteBytes_, sizeof remote_ - remoteBytes_);
    remoteBytes_ += r.bytes;
    if (remoteBytes_ < sizeof remote_) {
      if (r.closed)
        throw Error(ErrorCode::Remote, "NET/IB: connect to " + qp_->peer() + " on " + device_->name() +
                                           ": the peer closed the connection before sending its QP information");
      return false;
    }
    qp_->connectTo(remote_);
    socket_.sendAll(&kReadyByte, 1, deadlineAfter(10), nullptr);
    connected_ = true;
    return true;
  }

  void progress() {
    if (!finishConnect()) return;
    bool waiting = false;
    while (nextPost_ < nextSequence_) {
      Request& r = requests_[(nextPost_ - 1) % kSlots];
      CtsEntry& entry = fifo_[(nextPost_ - 1) % kSlots];
      if (__atomic_load_n(&entry.sequence, __ATOMIC_ACQUIRE) != nextPost_) {
        waiting = true;
        break;
      }
      if (r.bytes > entry.capacity)
        throw Error(ErrorCode::Remote, "NET/IB: isend to " + qp_->peer() + " on " + device_->name() + ": a message of " +
                                           std::to_string(r.bytes) + " bytes is longer than the receive posted (" +
                                           std::to_string(entry.capacity) + " bytes)");
      ibv_sge sge{uint64_t(uintptr_t(r.data)), uint32_t(r.bytes), r.mr ? r.mr->lkey : 0};
      ibv_send_wr wr{};
      wr.wr_id = r.sequence;
      wr.sg_list = &sge;
      wr.num_sge = r.bytes ? 1 : 0;
      wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.imm_data = uint32_t(r.bytes);
      wr.wr.rdma.remote_addr = entry.address;
      wr.wr.rdma.rkey = entry.rkey;
      qp_->postSend(&wr, "isend");
      ++nextPost_;
    }
    ibv_wc wc[kSlots];
    int n = qp_->poll(wc, kSlots, "isend");
    for (int i = 0; i < n; ++i) requests_[(wc[i].wr_id - 1) % kSlots].done = true;
    // A receiver that went away sends no clear-to-send entry and, with nothing in flight, no
    // completion says so: look at the TCP socket now and then.
    if (waiting && n == 0 && ++idlePolls_ % kIdlePollsPerLook == 0) {
      PeerState state = peerState(socket_, 0);
      if (state == PeerState::LinkTimedOut)
        throw Error(ErrorCode::Remote, "NET/IB: isend to " + qp_->peer() + " on " + device_->name() +
                                           ": the link to the peer is down (no answer within TUTTI_NET_LINK_TIMEOUT)");
      if (state != PeerState::Alive)
        throw Error(ErrorCode::Remote, "NET/IB: isend to " + qp_->peer() + " on " + device_->name() + ": the peer closed the connection");
    }
  }

  std::shared_ptr<IbDevice> device_;
  std::unique_ptr<IbQueuePair> qp_;
  std::unique_ptr<CtsEntry[]> fifo_;
  ibv_mr* fifoMr_ = nullptr;
  Socket socket_;
  QpInfo remote_{};
  size_t remoteBytes_ = 0;
  bool connected_ = false;
  Request requests_[kSlots];
  uint64_t nextSequence_ = 1, nextPost_ = 1;
  uint64_t idlePolls_ = 0;
};

class IbRecvComm final : public NetRecvComm {
 public:
  IbRecvComm(std::shared_ptr<IbDevice> device, std::unique_ptr<IbQueuePair> qp, Socket socket, const QpInfo& remote)
      : device_(std::move(device)), qp_(std::move(qp)), cts_(new CtsEntry[kSlots]()), socket_(std::move(socket)),
        remoteFifo_(remote.fifoAddress), remoteFifoRkey_(remote.fifoRkey) {
    ctsMr_ = device_->registerOwned(cts_.get(), sizeof(CtsEntry) * kSlots);
    watchLink(socket_);
  }
  ~IbRecvComm() override {
    socket_.close();
    qp_.reset();
    device_->deregister(ctsMr_);
    for (Request& r : requests_)
      if (r.inUse && r.cached) device_->release(r.cached);
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override {
    return {device_->registerOwned(data, bytes)};
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
    if (registration.backendData) r.mr = static_cast<ibv_mr*>(registration.backendData);
    else if (capacity > 0) r.mr = r.cached = device_->acquire(data, capacity);
    ibv_recv_wr wr{};
    wr.wr_id = r.sequence;
    wr.num_sge = 0;  // the data arrives by RDMA write; the work request takes its immediate
    guarded([&] { qp_->postRecv(&wr, "irecv"); });
    ++nextSequence_;
    progress();
    return &r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    Request* r = static_cast<Request*>(request);
    return finishRequest(*r, r->received, bytes, *device_);
  }

  void flush(void*, size_t, MemoryRegistration) override {}  // host memory: nothing to make visible
  std::vector<int> pollDescriptors() const override { return {}; }

 private:
  struct Request : NetRequest {
    void* data = nullptr;
    size_t capacity = 0;
    size_t received = 0;
    uint64_t sequence = 0;
    ibv_mr* mr = nullptr;
    ibv_mr* cached = nullptr;
    bool done = false;
    bool inUse = false;
  };

  // Runs `f`; an error it throws names the closed connection when the peer has gone.
  template <typename F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Remote && peerClosed(socket_, 200))
        throw Error(ErrorCode::Remote, e.message() + "; the peer closed the connection");
      throw;
    }
  }

  void progress() {
    if (!ready_) {
      // A sender that never sent a message may close without ever connecting its QP: its
      // goodbye (and the end of the connection after it) is no error, no data will come.
      if (peerSaidBye_) return;
      char byte = 0;
      Socket::ReadResult r = socket_.readSome(&byte, 1);
      if (r.bytes == 1 && byte == kReadyByte) ready_ = true;
      else if (r.bytes == 1 && byte == kByeByte) {
        peerSaidBye_ = true;
        return;
      } else if (r.error == ETIMEDOUT)
        throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qp_->peer() + " on " + device_->name() +
                                           ": the link to the peer is down (no answer within TUTTI_NET_LINK_TIMEOUT)"
                                           " before its QP was ready");
      else if (r.closed)
        throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qp_->peer() + " on " + device_->name() +
                                           ": the peer closed the connection before its QP was ready");
      else if (r.bytes == 1)
        throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qp_->peer() + " on " + device_->name() +
                                           ": the peer sent byte " + std::to_string(int(byte)) +
                                           " where its QP's ready byte belongs (not a tutti IB peer?)");
      else return;
    }
    bool idle = false;
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
        qp_->postSend(&wr, "irecv (clear to send)");
        ++nextCts_;
      }
      ibv_wc wc[2 * kSlots];
      int n = qp_->poll(wc, 2 * kSlots, "irecv");
      for (int i = 0; i < n; ++i) {
        if (wc[i].wr_id & kCtsWrite) continue;
        Request& r = requests_[(wc[i].wr_id - 1) % kSlots];
        r.received = wc[i].imm_data;
        r.done = true;
      }
      idle = n == 0;
    });
    if (idle && awaitingData() && !peerSaidBye_ && ++idlePolls_ % kIdlePollsPerLook == 0) checkPeer();
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
      throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qp_->peer() + " on " + device_->name() +
                                         ": the link to the peer is down (no answer within TUTTI_NET_LINK_TIMEOUT)");
    if (state == PeerState::Closed)
      throw Error(ErrorCode::Remote, "NET/IB: irecv from " + qp_->peer() + " on " + device_->name() +
                                         ": the peer closed the connection without saying goodbye");
  }

  std::shared_ptr<IbDevice> device_;
  std::unique_ptr<IbQueuePair> qp_;
  std::unique_ptr<CtsEntry[]> cts_;
  ibv_mr* ctsMr_ = nullptr;
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
      TUTTI_INFO(log::Net, "NET/IB: dropped a connection from %s to the listener on %s: %s", peer.c_str(), device_->name().c_str(), e.what());
      return nullptr;
    }
    if (hello.magic != kIbHandleMagic || hello.nonce != nonce_) {
      TUTTI_INFO(log::Net, "NET/IB: dropped a connection from %s to the listener on %s: not this listener's peer", peer.c_str(),
                 device_->name().c_str());
      return nullptr;
    }
    auto qp = std::make_unique<IbQueuePair>(device_, peer, kDepth);
    qp->connectTo(hello.info);
    QpInfo mine = qp->localInfo();
    socket.sendAll(&mine, sizeof mine, deadline, abortFlag);
    return std::make_unique<IbRecvComm>(device_, std::move(qp), std::move(socket), hello.info);
  }

  std::shared_ptr<IbDevice> device_;
  Socket listener_;
  uint64_t nonce_;
};

}  // namespace

std::unique_ptr<NetSendComm> makeIbSendComm(std::shared_ptr<IbDevice> device, Socket socket, std::string peer, uint64_t nonce,
                                            SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  auto comm = std::make_unique<IbSendComm>(std::move(device), std::move(socket), std::move(peer));
  comm->sendHello(nonce, deadline, abortFlag);
  return comm;
}

std::unique_ptr<NetListenComm> makeIbListenComm(std::shared_ptr<IbDevice> device, Socket listener, uint64_t nonce) {
  return std::make_unique<IbListenComm>(std::move(device), std::move(listener), nonce);
}

}  // namespace tutti::net::ib
