// The "Socket" net backend. A connection is nsocks TCP sockets; a message is an 8-byte length on
// socket 0 (gathered with a small payload into one sendmsg, so it leaves as one segment), then
// its payload cut into chunks dealt round-robin over the sockets. Both sides cut alike, so each
// socket is an ordered stream of known pieces and several messages pipeline. All I/O is
// nonblocking: driven by test() in the net proxy's progress pass (on the proxy thread, or on a
// waiting executor worker, one at a time), or with NCCL_SOCKET_NTHREADS > 1 by that many helper
// threads per connection (NCCL_NSOCKS_PERTHREAD sockets each), see SocketStreams.
//
// A listener accepts only connections that present the nonce of its handle: anything else that
// connects (a port scanner, garbage, a truncated hello) is logged and dropped, and the real peer
// is still accepted. The listener closes once its peer's sockets are all in.
#include "transports/net/socket/socket_backend.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "base/tunables.h"

namespace tutti::transport::net {
namespace {

constexpr uint64_t kHandleMagic = 0x7475747469534b31ull;  // "tuttiSK1"
// A length no message has: the sender's goodbye (see NetSendComm::closeGracefully).
constexpr uint64_t kGoodbye = ~uint64_t(0);
constexpr size_t kMinChunkBytes = 64 * 1024;
constexpr size_t kMaxRequests = 32;
constexpr int kMaxSockets = 64;
constexpr int kGatherPieces = 8;            // pieces one sendmsg takes, at most
constexpr size_t kGatherBytes = 64 * 1024;  // and this much in all (a larger first piece goes alone)
constexpr size_t kStageBytes = 16 * 1024;   // a receiving socket's read-ahead (see pullIn)
// How long one connector may take to present its hello before it is dropped.
constexpr std::chrono::seconds kHelloTimeout{5};

struct HandleLayout {
  uint64_t magic;
  uint64_t nonce;
  uint32_t nsocks;
  uint32_t pad;
  uint8_t address[SocketAddress::kWireBytes];
};
static_assert(sizeof(HandleLayout) <= kNetHandleBytes);

int linkTimeoutSeconds() { return int(std::clamp<int64_t>(tunables::kNetLinkTimeout.get(), 0, 24 * 3600)); }

uint64_t randomNonce() {
  std::random_device device;
  return (uint64_t(device()) << 32) ^ device();
}

// One piece of one message on one socket.
struct Piece {
  char* data;
  size_t bytes;
  size_t done = 0;
  struct SocketRequest* owner;
};

// Pieces of one request may finish on different helper threads, hence the atomics.
struct SocketRequest : NetRequest {
  char* data = nullptr;
  size_t capacity = 0;  // receive: the most that may arrive
  uint64_t size = 0;    // send: the length; receive: known once the header is in
  uint64_t header = 0;  // the length on the wire
  std::atomic<size_t> piecesLeft{0};
  std::atomic<bool> expanded{false};  // receive: header read and pieces queued
  std::atomic<bool> done{false};
};

// Splits `size` bytes into chunks dealt round-robin over nsocks sockets.
size_t chunkBytesFor(size_t size, int nsocks) {
  size_t share = (size + size_t(nsocks) - 1) / size_t(nsocks);
  return std::max(kMinChunkBytes, (share + 4095) / 4096 * 4096);
}

int helperThreadsFor(int nsocks) {
  return int(std::clamp<int64_t>(tunables::kSocketNthreads.get(), 1, int64_t(nsocks)));
}

// An eventfd: a counter that poll() sees as readable while non-zero.
class EventFd {
 public:
  EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw Error(ErrorCode::System, std::string("NET/Socket: eventfd: ") + std::strerror(errno));
  }
  ~EventFd() { ::close(fd_); }
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;
  int fd() const { return fd_; }
  void signal() {
    uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }
  void drain() {
    uint64_t value;
    (void)!::read(fd_, &value, sizeof value);
  }

 private:
  int fd_;
};

// The state both directions share: the sockets, a queue of pieces per socket, and the helper
// threads. With one helper (NCCL_SOCKET_NTHREADS=1, the default) whoever makes the proxy's
// progress pass moves the bytes itself inside test(); with T > 1, helper thread h drives sockets h, h+T, ... with
// nonblocking I/O and poll, so several cores can carry one connection. A queue's consumer (the
// thread driving its socket) works on its front piece outside the lock: deque::push_back keeps
// references to existing elements valid.
class SocketStreams {
 public:
  using OnPiece = std::function<void(Piece&)>;

  SocketStreams(std::vector<Socket> sockets, std::string peer, bool sending)
      : sockets_(std::move(sockets)), lanes_(sockets_.size()), peer_(std::move(peer)), sending_(sending) {
    if (!sending_)
      for (Lane& lane : lanes_) lane.stage.assign(kStageBytes, 0);  // touched once, here
  }

  ~SocketStreams() { stopHelpers(); }

  // Starts T = NCCL_SOCKET_NTHREADS helpers (at most one per socket) when T > 1. onPiece: see pullIn.
  void startHelpers(OnPiece onPiece) {
    onPiece_ = std::move(onPiece);
    int threads = helperThreadsFor(count());
    if (threads <= 1) return;
    for (int h = 0; h < threads; h++) wake_.push_back(std::make_unique<EventFd>());
    for (int h = 0; h < threads; h++) helpers_.emplace_back([this, h] { helperLoop(h); });
  }

  void stopHelpers() {
    stop_.store(true);
    for (auto& w : wake_) w->signal();
    for (auto& t : helpers_) t.join();
    helpers_.clear();
  }

  bool threaded() const { return !helpers_.empty(); }
  int count() const { return int(sockets_.size()); }
  const std::string& peer() const { return peer_; }
  int fd(int i) const { return sockets_[size_t(i)].fd(); }
  // After the peer's goodbye its end of stream is expected, not an error.
  std::atomic<bool> peerSaidGoodbye{false};

  // What the proxy polls: the sockets themselves, or the helpers' completion signal; nothing
  // after the peer's goodbye, since its end of stream would keep the sockets readable and every
  // poll would return at once (the proxy took a core until its own communicator was destroyed).
  std::vector<int> descriptors() const {
    if (peerSaidGoodbye.load()) return {};
    if (threaded()) return {done_.fd()};
    std::vector<int> fds;
    for (const Socket& s : sockets_) fds.push_back(s.fd());
    return fds;
  }

  void push(int i, Piece piece) {
    {
      std::lock_guard<std::mutex> lock(lanes_[size_t(i)].mutex);
      lanes_[size_t(i)].queue.push_back(piece);
    }
    if (threaded()) wake_[size_t(i) % wake_.size()]->signal();
  }

  // Deals a message's payload over the sockets, after whatever each already holds. The count
  // of pieces is set before any is queued, so none can complete the request early.
  void queuePayload(SocketRequest* request, const Piece* header = nullptr) {
    size_t chunk = chunkBytesFor(request->size, count());
    request->piecesLeft.fetch_add((request->size + chunk - 1) / chunk);
    if (header) push(0, *header);
    size_t offset = 0;
    for (int i = 0; offset < request->size; i = (i + 1) % count()) {
      size_t bytes = std::min(chunk, size_t(request->size) - offset);
      push(i, Piece{request->data + offset, bytes, 0, request});
      offset += bytes;
    }
  }

  // progress(), returning its error instead of throwing it: a request that completed before the
  // error (the peer's last message, read in the same pass as its end of stream) is still its
  // caller's, and the error goes to the next request that waits.
  std::exception_ptr progressKeepingFailure() {
    try {
      progress();
    } catch (const Error&) {
      return std::current_exception();
    }
    return nullptr;
  }

  // Unthreaded, moves what can move now; then throws the first error the streams hit (here or in
  // a helper), which stays: every later call throws it too.
  void progress() {
    if (threaded()) {
      done_.drain();
    } else if (!failed_.load(std::memory_order_acquire)) {
      try {
        for (bool moved = true; moved;) {
          moved = false;
          for (int i = 0; i < count(); i++) moved = move(i) || moved;
        }
      } catch (const Error& e) {
        recordFailure(e);
      }
    }
    if (!failed_.load(std::memory_order_acquire)) return;  // no lock on the path every test() takes
    std::lock_guard<std::mutex> lock(errorMutex_);
    throw Error(errorCode_, errorText_);
  }

 private:
  struct Lane {
    std::mutex mutex;
    std::deque<Piece> queue;
    // Receiving: bytes read ahead of the pieces (see pullIn); only the socket's mover uses them.
    std::vector<char> stage;
    size_t stageBegin = 0, stageEnd = 0;
  };

  bool move(int i) { return sending_ ? pushOut(i) : pullIn(i); }

  Piece* front(int i) {
    std::lock_guard<std::mutex> lock(lanes_[size_t(i)].mutex);
    auto& q = lanes_[size_t(i)].queue;
    return q.empty() ? nullptr : &q.front();
  }

  Piece popFront(int i) {
    std::lock_guard<std::mutex> lock(lanes_[size_t(i)].mutex);
    Piece piece = lanes_[size_t(i)].queue.front();
    lanes_[size_t(i)].queue.pop_front();
    return piece;
  }

  // Sends what the socket takes now, small queued pieces gathered into one sendmsg (a small
  // message's header and payload leave in one system call; large pieces go one by one, as
  // before); MSG_MORE while pieces remain beyond those. Returns true when something moved.
  bool pushOut(int i) {
    bool moved = false;
    for (;;) {
      Piece* pieces[kGatherPieces];
      int n = 0;
      bool more = false;
      {
        // Elements of a deque stay put while others are pushed behind them; only this mover pops.
        std::lock_guard<std::mutex> lock(lanes_[size_t(i)].mutex);
        size_t gathered = 0;
        for (Piece& piece : lanes_[size_t(i)].queue) {
          if (n == kGatherPieces || (n > 0 && gathered + piece.bytes > kGatherBytes)) {
            more = true;
            break;
          }
          pieces[n++] = &piece;
          gathered += piece.bytes;
        }
      }
      if (n == 0) return moved;
      iovec iov[kGatherPieces];
      int parts = 0;
      for (int j = 0; j < n; j++)
        if (pieces[j]->done < pieces[j]->bytes)
          iov[parts++] = iovec{pieces[j]->data + pieces[j]->done, pieces[j]->bytes - pieces[j]->done};
      size_t left = 0;
      if (parts > 0) {
        msghdr message{};
        message.msg_iov = iov;
        message.msg_iovlen = size_t(parts);
        ssize_t count = ::sendmsg(sockets_[size_t(i)].fd(), &message, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (count < 0) {
          int err = errno;
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) return moved;
          failed("send to", i, err);
        }
        left = size_t(count);
        moved = moved || count > 0;
      }
      for (int j = 0; j < n; j++) {
        Piece* piece = pieces[j];
        size_t take = std::min(left, piece->bytes - piece->done);
        piece->done += take;
        left -= take;
        if (piece->done < piece->bytes) return moved;  // the socket is full
        finishPiece(popFront(i));
      }
    }
  }

  // Reads what has arrived for the front piece(s); a finished header goes to onPiece (which
  // may queue more). A small piece (a length, a small payload) reads whatever has arrived into
  // the socket's stage, so that a small message's length and payload take one recv; staged bytes
  // go to the next pieces first (they are this socket's stream, in order), and stay staged while
  // no receive is posted. Returns true when something moved.
  bool pullIn(int i) {
    bool moved = false;
    Lane& lane = lanes_[size_t(i)];
    while (Piece* piece = front(i)) {
      while (piece->done < piece->bytes) {
        const size_t need = piece->bytes - piece->done;
        if (lane.stageEnd > lane.stageBegin) {
          const size_t take = std::min(need, lane.stageEnd - lane.stageBegin);
          std::memcpy(piece->data + piece->done, lane.stage.data() + lane.stageBegin, take);
          piece->done += take;
          lane.stageBegin += take;
          if (lane.stageBegin == lane.stageEnd) lane.stageBegin = lane.stageEnd = 0;
          moved = true;
          continue;
        }
        const bool staged = need < lane.stage.size();
        ssize_t count = ::recv(sockets_[size_t(i)].fd(), staged ? lane.stage.data() : piece->data + piece->done,
                               staged ? lane.stage.size() : need, 0);
        if (count == 0 && peerSaidGoodbye.load()) return moved;
        if (count == 0)
          throw Error(ErrorCode::Remote, "recv from " + peer_ + " (socket " + std::to_string(i) + " of " +
                                             std::to_string(this->count()) +
                                             "): the peer closed the connection (end of stream)");
        if (count < 0) {
          int err = errno;
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) return moved;
          failed("recv from", i, err);
        }
        moved = true;
        if (staged) {
          lane.stageEnd = size_t(count);
          continue;
        }
        piece->done += size_t(count);
        if (piece->done < piece->bytes) return moved;  // the socket is drained
      }
      // Only a header goes on to onPiece. A payload piece may be its request's last, and once
      // the request is done the proxy may free it: nothing may touch it after finishPiece.
      Piece finished = popFront(i);
      bool header = finished.owner != nullptr && !finished.owner->expanded.load();
      finishPiece(finished);
      if (header) onPiece_(finished);
    }
    return moved;
  }

  void finishPiece(const Piece& piece) {
    if (piece.owner != nullptr && piece.owner->piecesLeft.fetch_sub(1) == 1 && piece.owner->expanded.load()) {
      piece.owner->done.store(true);
      if (threaded()) done_.signal();
    }
  }

  [[noreturn]] void failed(const char* operation, int i, int err) {
    ErrorCode code = err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH ||
                             err == ENETUNREACH || err == ECONNABORTED || err == ENETDOWN
                         ? ErrorCode::Remote
                         : ErrorCode::System;
    throw Error(code, std::string(operation) + " " + peer_ + " (socket " + std::to_string(i) + " of " +
                          std::to_string(count()) + "): " + errnoText(err));
  }

  // Helper h: its sockets' I/O until stopped or failed. Waits in poll on its sockets (those with
  // queued pieces) and its wake-up event, 100 ms at most, so a stop is seen promptly.
  void helperLoop(int h) {
    const int T = int(wake_.size());
    std::vector<pollfd> fds;
    try {
      while (!stop_.load()) {
        bool moved = false;
        for (int i = h; i < count(); i += T) moved = move(i) || moved;
        if (moved) continue;
        fds.clear();
        fds.push_back(pollfd{wake_[size_t(h)]->fd(), POLLIN, 0});
        for (int i = h; i < count(); i += T)
          if (front(i)) fds.push_back(pollfd{sockets_[size_t(i)].fd(), short(sending_ ? POLLOUT : POLLIN), 0});
        ::poll(fds.data(), fds.size(), 100);
        if (fds[0].revents) wake_[size_t(h)]->drain();
      }
    } catch (const Error& e) {
      recordFailure(e);
      done_.signal();
    }
  }

  void recordFailure(const Error& e) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    errorCode_ = e.code();
    errorText_ = e.message();
    failed_.store(true, std::memory_order_release);  // after the text: a reader that sees it finds both
  }

  std::vector<Socket> sockets_;
  std::vector<Lane> lanes_;
  std::string peer_;
  const bool sending_;
  OnPiece onPiece_;

  std::vector<std::unique_ptr<EventFd>> wake_;  // one per helper: work was queued for it
  EventFd done_;                                // a request finished, or a helper failed
  std::mutex errorMutex_;                       // errorCode_ and errorText_, written once
  std::atomic<bool> failed_{false};
  ErrorCode errorCode_ = ErrorCode::Internal;
  std::string errorText_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;  // last: joined (stopHelpers) before the rest goes
};

// The test() of both directions: a finished request reports its size and is released.
template <typename Request>
bool completeRequest(std::deque<std::unique_ptr<Request>>& requests, NetRequest* request, size_t* bytes) {
  auto* r = static_cast<Request*>(request);
  if (!r->done) return false;
  if (bytes) *bytes = size_t(r->size);
  auto it = std::find_if(requests.begin(), requests.end(), [&](auto& q) { return q.get() == request; });
  if (it != requests.end()) requests.erase(it);
  return true;
}

class SocketSendComm : public NetSendComm {
 public:
  explicit SocketSendComm(std::vector<Socket> sockets, std::string peer)
      : streams_(std::move(sockets), std::move(peer), true) {
    streams_.startHelpers([](Piece&) {});
  }
  ~SocketSendComm() override { streams_.stopHelpers(); }

  MemoryRegistration registerMemory(void*, size_t) override { return {}; }
  void deregisterMemory(MemoryRegistration) override {}

  NetRequest* isend(const void* data, size_t bytes, int, MemoryRegistration) override {
    if (requests_.size() >= kMaxRequests) return nullptr;
    auto request = std::make_unique<SocketRequest>();
    request->data = const_cast<char*>(static_cast<const char*>(data));
    request->size = bytes;
    request->header = bytes;
    request->expanded = true;
    request->piecesLeft = 1;
    SocketRequest* r = request.get();
    requests_.push_back(std::move(request));
    Piece header{reinterpret_cast<char*>(&r->header), sizeof r->header, 0, r};
    streams_.queuePayload(r, &header);
    (void)streams_.progressKeepingFailure();  // an error goes to test(), after what completed before it
    return r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    std::exception_ptr failure = streams_.progressKeepingFailure();
    if (completeRequest(requests_, request, bytes)) return true;
    if (failure) std::rethrow_exception(failure);
    return false;
  }

  std::vector<int> pollDescriptors() const override { return streams_.descriptors(); }

  void closeGracefully() override {
    if (!requests_.empty()) return;  // not drained: let the peer see the connection end
    static const uint64_t goodbye = kGoodbye;
    (void)!::send(streams_.fd(0), &goodbye, sizeof goodbye, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

 private:
  SocketStreams streams_;
  std::deque<std::unique_ptr<SocketRequest>> requests_;  // the proxy thread's only
};

class SocketRecvComm : public NetRecvComm {
 public:
  explicit SocketRecvComm(std::vector<Socket> sockets, std::string peer)
      : streams_(std::move(sockets), std::move(peer), false) {
    streams_.startHelpers([this](Piece& piece) { onPiece(piece); });
  }
  ~SocketRecvComm() override { streams_.stopHelpers(); }

  MemoryRegistration registerMemory(void*, size_t) override { return {}; }
  void deregisterMemory(MemoryRegistration) override {}
  void flush(void*, size_t, MemoryRegistration) override {}

  NetRequest* irecv(void* data, size_t capacity, int, MemoryRegistration) override {
    SocketRequest* r;
    {
      std::lock_guard<std::mutex> lock(requestsMutex_);
      if (requests_.size() >= kMaxRequests) return nullptr;
      auto request = std::make_unique<SocketRequest>();
      request->data = static_cast<char*>(data);
      request->capacity = capacity;
      r = request.get();
      requests_.push_back(std::move(request));
      queueNextHeader();
    }
    (void)streams_.progressKeepingFailure();  // an error goes to test(), after what completed before it
    return r;
  }

  bool test(NetRequest* request, size_t* bytes) override {
    std::exception_ptr failure = streams_.progressKeepingFailure();
    std::lock_guard<std::mutex> lock(requestsMutex_);
    if (completeRequest(requests_, request, bytes)) return true;
    if (failure) std::rethrow_exception(failure);
    return false;
  }

  std::vector<int> pollDescriptors() const override { return streams_.descriptors(); }

 private:
  // The next posted receive reads its header once the previous one's pieces are all queued.
  // Under requestsMutex_.
  void queueNextHeader() {
    if (headerPending_) return;
    for (auto& r : requests_)
      if (!r->expanded) {
        r->piecesLeft = 1;
        headerPending_ = true;
        streams_.push(0, Piece{reinterpret_cast<char*>(&r->header), sizeof r->header, 0, r.get()});
        return;
      }
  }

  // A finished header, on the thread that drives socket 0 (headers only travel there).
  void onPiece(Piece& piece) {
    SocketRequest* r = piece.owner;
    if (r->header == kGoodbye) {
      // No message follows; the receive stays pending (the executor times out if it waits).
      streams_.peerSaidGoodbye = true;
      r->piecesLeft = 1;
      return;
    }
    // The header: the message's length, checked before any byte of it is accepted.
    if (r->header > r->capacity)
      throw Error(ErrorCode::Remote, "recv from " + streams_.peer() + ": the peer announced a message of " +
                                         std::to_string(r->header) + " bytes where at most " +
                                         std::to_string(r->capacity) +
                                         " fit (a peer of another version, corruption, or not a tutti peer)");
    r->size = r->header;
    std::lock_guard<std::mutex> lock(requestsMutex_);
    headerPending_ = false;
    r->expanded = true;
    streams_.queuePayload(r);
    if (r->piecesLeft == 0) r->done = true;
    queueNextHeader();
  }

  SocketStreams streams_;
  std::mutex requestsMutex_;  // requests_ and headerPending_: the proxy posts, socket 0's driver expands
  std::deque<std::unique_ptr<SocketRequest>> requests_;
  bool headerPending_ = false;
};

class SocketListenComm : public NetListenComm {
 public:
  SocketListenComm(Socket listener, uint64_t nonce, int nsocks)
      : listener_(std::move(listener)), nonce_(nonce), nsocks_(nsocks), sockets_(static_cast<size_t>(nsocks)) {}

  std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    while (have_ < nsocks_) {
      Socket candidate = listener_.accept(deadline, abortFlag);
      take(std::move(candidate), std::min(deadline, SteadyClock::now() + kHelloTimeout), abortFlag);
    }
    return finish();
  }

  // What has connected is kept between calls; a connector's hello is waited for (a peer sends it
  // right after connecting), for kHelloTimeout at most.
  std::unique_ptr<NetRecvComm> acceptIfReady() override {
    while (have_ < nsocks_) {
      Socket candidate = listener_.tryAccept();
      if (!candidate.valid()) return nullptr;
      take(std::move(candidate), SteadyClock::now() + kHelloTimeout, nullptr);
    }
    return finish();
  }

 private:
  // Keeps `candidate` if its hello matches this listener's handle; drops (and logs) it otherwise.
  void take(Socket candidate, SteadyTime helloDeadline, const std::atomic<bool>* abortFlag) {
    SocketHello hello{};
    try {
      candidate.recvAll(&hello, sizeof hello, helloDeadline, abortFlag);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Aborted) throw;
      TUTTI_WARN("NET/Socket: dropped a connection from %s to %s without a complete hello: %s",
                 candidate.peerAddress().toString().c_str(), listener_.localAddress().toString().c_str(), e.what());
      return;
    }
    if (hello.magic != kSocketHelloMagic || hello.nonce != nonce_ || hello.nsocks != uint32_t(nsocks_) ||
        hello.index >= uint32_t(nsocks_) || sockets_[hello.index].valid()) {
      TUTTI_WARN(
          "NET/Socket: dropped a connection from %s to %s: its hello does not match this listener (wrong secret, "
          "garbage, or a duplicate socket)",
          candidate.peerAddress().toString().c_str(), listener_.localAddress().toString().c_str());
      return;
    }
    peer_ = candidate.peerAddress().toString();
    candidate.setLinkTimeout(linkTimeoutSeconds());
    sockets_[hello.index] = std::move(candidate);
    have_++;
  }

  std::unique_ptr<NetRecvComm> finish() {
    if (finished_)
      throw Error(ErrorCode::InvalidUsage, "NET/Socket: accept on a listener that already accepted its peer");
    finished_ = true;
    listener_.close();  // nothing else may connect to this port now
    return std::make_unique<SocketRecvComm>(std::move(sockets_), peer_);
  }

  Socket listener_;
  uint64_t nonce_;
  int nsocks_;
  std::vector<Socket> sockets_;  // the peer's, by index, as they come in
  int have_ = 0;
  std::string peer_;
  bool finished_ = false;
};

class SocketBackend : public NetBackend {
 public:
  explicit SocketBackend(std::vector<NetworkInterface> interfaces) : interfaces_(std::move(interfaces)) {}

  const char* name() const override { return "Socket"; }
  int deviceCount() override { return int(interfaces_.size()); }

  NetProperties properties(int device) override {
    const NetworkInterface& nic = interfaceOf(device);
    NetProperties p;
    p.name = nic.name;
    p.pciPath = "/sys/class/net/" + nic.name;
    p.guid = uint64_t(device);
    p.speedMbps = readSpeed(nic.name);
    p.latencyUs = 0;
    p.address = nic.address.host();
    return p;
  }

  std::unique_ptr<NetListenComm> listen(int device, NetHandle* handle) override {
    const NetworkInterface& nic = interfaceOf(device);
    Socket listener = Socket::listen(nic.address);
    HandleLayout layout{};
    layout.magic = kHandleMagic;
    layout.nonce = randomNonce();
    layout.nsocks = uint32_t(socketsPerConnection());
    listener.localAddress().toWire(layout.address);
    std::memset(handle->bytes, 0, sizeof handle->bytes);
    std::memcpy(handle->bytes, &layout, sizeof layout);
    return std::make_unique<SocketListenComm>(std::move(listener), layout.nonce, int(layout.nsocks));
  }

  std::unique_ptr<NetSendComm> connect(int, const NetHandle& handle, SteadyTime deadline,
                                       const std::atomic<bool>* abortFlag) override {
    SocketHandleContents contents = readSocketHandle(handle);
    const SocketAddress& remote = contents.address;
    std::vector<Socket> sockets;
    for (uint32_t i = 0; i < contents.nsocks; i++) {
      // The listener was open when its handle was offered: a refusal is final.
      Socket socket = Socket::connect(remote, deadline, abortFlag, true);
      SocketHello hello{kSocketHelloMagic, contents.nonce, i, contents.nsocks};
      socket.sendAll(&hello, sizeof hello, deadline, abortFlag);
      socket.setLinkTimeout(linkTimeoutSeconds());
      sockets.push_back(std::move(socket));
    }
    return std::make_unique<SocketSendComm>(std::move(sockets), remote.toString());
  }

 private:
  const NetworkInterface& interfaceOf(int device) const {
    if (device < 0 || size_t(device) >= interfaces_.size())
      throw Error(ErrorCode::InvalidArgument, "NET/Socket: no device " + std::to_string(device) + " (" +
                                                  std::to_string(interfaces_.size()) + " exist)");
    return interfaces_[size_t(device)];
  }
  static int readSpeed(const std::string& name) {
    int speed = 0;
    if (FILE* f = std::fopen(("/sys/class/net/" + name + "/speed").c_str(), "r")) {
      if (std::fscanf(f, "%d", &speed) != 1 || speed < 0) speed = 0;
      std::fclose(f);
    }
    return speed;
  }
  std::vector<NetworkInterface> interfaces_;
};

}  // namespace

SocketHandleContents readSocketHandle(const NetHandle& handle) {
  HandleLayout layout{};
  std::memcpy(&layout, handle.bytes, sizeof layout);
  if (layout.magic != kHandleMagic || layout.nsocks == 0 || layout.nsocks > uint32_t(kMaxSockets))
    throw Error(ErrorCode::Remote, "NET/Socket: a listener's handle is malformed (magic or socket count)");
  SocketHandleContents contents;
  contents.address = SocketAddress::fromWire(layout.address);
  contents.nonce = layout.nonce;
  contents.nsocks = layout.nsocks;
  return contents;
}

int socketsPerConnection() {
  int64_t threads = tunables::kSocketNthreads.get(), perThread = tunables::kNsocksPerthread.get();
  return int(std::clamp<int64_t>(std::max<int64_t>(threads, 1) * std::max<int64_t>(perThread, 1), 1, kMaxSockets));
}

std::unique_ptr<NetBackend> makeSocketBackend() {
  std::vector<NetworkInterface> interfaces = findNetworkInterfaces();
  for (const NetworkInterface& nic : interfaces)
    TUTTI_INFO(log::Net, "NET/Socket: using %s %s", nic.name.c_str(), nic.address.host().c_str());
  return std::make_unique<SocketBackend>(std::move(interfaces));
}

}  // namespace tutti::transport::net
