// The "Socket" net backend. A connection is nsocks TCP sockets; a message is an 8-byte length on
// socket 0 (sent with MSG_MORE so a small message leaves as one segment), then its payload cut
// into chunks dealt round-robin over the sockets. Both sides cut alike, so each socket is an
// ordered stream of known pieces and several messages pipeline. All I/O is nonblocking and driven
// by test(): the proxy thread is the only caller, so no helper threads are needed yet
// (NCCL_SOCKET_NTHREADS only multiplies the sockets).
//
// A listener accepts only connections that present the nonce of its handle: anything else that
// connects (a port scanner, garbage, a truncated hello) is logged and dropped, and the real peer
// is still accepted. The listener closes once its peer's sockets are all in.
#include "transports/net/socket/socket_backend.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/params.h"

namespace tutti::net {
namespace {

constexpr uint64_t kHandleMagic = 0x7475747469534b31ull;  // "tuttiSK1"
// A length no message has: the sender's goodbye (see NetSendComm::closeGracefully).
constexpr uint64_t kGoodbye = ~uint64_t(0);
constexpr size_t kMinChunkBytes = 64 * 1024;
constexpr size_t kMaxRequests = 32;
constexpr int kMaxSockets = 64;
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

int linkTimeoutSeconds() { return int(std::clamp<int64_t>(params::getInt("TUTTI_NET_LINK_TIMEOUT"), 0, 24 * 3600)); }

std::string errnoText(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

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

struct SocketRequest : NetRequest {
  char* data = nullptr;
  size_t capacity = 0;   // receive: the most that may arrive
  uint64_t size = 0;     // send: the length; receive: known once the header is in
  uint64_t header = 0;   // the length on the wire
  size_t piecesLeft = 0;
  bool expanded = false; // receive: header read and pieces queued
  bool done = false;
};

// Splits `size` bytes into chunks dealt round-robin over nsocks sockets.
size_t chunkBytesFor(size_t size, int nsocks) {
  size_t share = (size + size_t(nsocks) - 1) / size_t(nsocks);
  return std::max(kMinChunkBytes, (share + 4095) / 4096 * 4096);
}

// The state both directions share: the sockets and a queue of pieces per socket.
class SocketStreams {
 public:
  SocketStreams(std::vector<Socket> sockets, std::string peer) : sockets_(std::move(sockets)), queues_(sockets_.size()), peer_(std::move(peer)) {}

  int count() const { return int(sockets_.size()); }
  const std::string& peer() const { return peer_; }
  std::deque<Piece>& queue(int i) { return queues_[size_t(i)]; }

  int fd(int i) const { return sockets_[size_t(i)].fd(); }
  // After the peer's goodbye its end of stream is expected, not an error.
  bool peerSaidGoodbye = false;

  std::vector<int> descriptors() const {
    std::vector<int> fds;
    for (const Socket& s : sockets_) fds.push_back(s.fd());
    return fds;
  }

  // Deals a message's payload over the sockets, after whatever each already holds.
  void queuePayload(SocketRequest* request) {
    size_t chunk = chunkBytesFor(request->size, count());
    size_t offset = 0;
    for (int i = 0; offset < request->size; i = (i + 1) % count()) {
      size_t bytes = std::min(chunk, size_t(request->size) - offset);
      queues_[size_t(i)].push_back(Piece{request->data + offset, bytes, 0, request});
      request->piecesLeft++;
      offset += bytes;
    }
  }

  // Sends what the socket takes now. Returns true when something moved.
  bool pushOut(int i) {
    bool moved = false;
    auto& q = queues_[size_t(i)];
    while (!q.empty()) {
      Piece& piece = q.front();
      bool more = q.size() > 1;  // e.g. a header followed by its payload
      ssize_t count = piece.bytes == piece.done
                          ? 0
                          : ::send(sockets_[size_t(i)].fd(), piece.data + piece.done, piece.bytes - piece.done,
                                   MSG_NOSIGNAL | (more ? MSG_MORE : 0));
      if (count < 0) {
        int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) return moved;
        failed("send to", i, err);
      }
      piece.done += size_t(count);
      moved = moved || count > 0;
      if (piece.done < piece.bytes) return moved;
      finishPiece(piece);
      q.pop_front();
    }
    return moved;
  }

  // Reads what has arrived for the front piece(s). Returns true when something moved.
  bool pullIn(int i, const std::function<void(Piece&)>& onPiece) {
    bool moved = false;
    auto& q = queues_[size_t(i)];
    while (!q.empty()) {
      Piece& piece = q.front();
      if (piece.done < piece.bytes) {
        ssize_t count = ::recv(sockets_[size_t(i)].fd(), piece.data + piece.done, piece.bytes - piece.done, 0);
        if (count == 0 && peerSaidGoodbye) return moved;
        if (count == 0)
          throw Error(ErrorCode::Remote, "recv from " + peer_ + " (socket " + std::to_string(i) + " of " + std::to_string(count_()) +
                                             "): the peer closed the connection (end of stream)");
        if (count < 0) {
          int err = errno;
          if (err == EINTR) continue;
          if (err == EAGAIN || err == EWOULDBLOCK) return moved;
          failed("recv from", i, err);
        }
        piece.done += size_t(count);
        moved = true;
        if (piece.done < piece.bytes) return moved;
      }
      Piece finished = piece;
      q.pop_front();
      finishPiece(finished);
      onPiece(finished);  // may queue more on this socket
    }
    return moved;
  }

 private:
  int count_() const { return count(); }
  void finishPiece(Piece& piece) {
    if (piece.owner != nullptr && --piece.owner->piecesLeft == 0 && piece.owner->expanded)
      piece.owner->done = true;
  }
  [[noreturn]] void failed(const char* operation, int i, int err) {
    ErrorCode code = err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
                             err == ECONNABORTED || err == ENETDOWN
                         ? ErrorCode::Remote
                         : ErrorCode::System;
    throw Error(code, std::string(operation) + " " + peer_ + " (socket " + std::to_string(i) + " of " + std::to_string(count()) +
                          "): " + errnoText(err));
  }

  std::vector<Socket> sockets_;
  std::vector<std::deque<Piece>> queues_;
  std::string peer_;
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
  explicit SocketSendComm(std::vector<Socket> sockets, std::string peer) : streams_(std::move(sockets), std::move(peer)) {}

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
    streams_.queue(0).push_back(Piece{reinterpret_cast<char*>(&request->header), sizeof request->header, 0, request.get()});
    streams_.queuePayload(request.get());
    requests_.push_back(std::move(request));
    progress();
    return requests_.back().get();
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    return completeRequest(requests_, request, bytes);
  }

  std::vector<int> pollDescriptors() const override { return streams_.descriptors(); }

  void closeGracefully() override {
    if (!requests_.empty()) return;  // not drained: let the peer see the connection end
    static const uint64_t goodbye = kGoodbye;
    (void)!::send(streams_.fd(0), &goodbye, sizeof goodbye, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

 private:
  void progress() {
    for (int i = 0; i < streams_.count(); i++) streams_.pushOut(i);
  }
  SocketStreams streams_;
  std::deque<std::unique_ptr<SocketRequest>> requests_;
};

class SocketRecvComm : public NetRecvComm {
 public:
  explicit SocketRecvComm(std::vector<Socket> sockets, std::string peer) : streams_(std::move(sockets), std::move(peer)) {}

  MemoryRegistration registerMemory(void*, size_t) override { return {}; }
  void deregisterMemory(MemoryRegistration) override {}
  void flush(void*, size_t, MemoryRegistration) override {}

  NetRequest* irecv(void* data, size_t capacity, int, MemoryRegistration) override {
    if (requests_.size() >= kMaxRequests) return nullptr;
    auto request = std::make_unique<SocketRequest>();
    request->data = static_cast<char*>(data);
    request->capacity = capacity;
    requests_.push_back(std::move(request));
    queueNextHeader();
    progress();
    return requests_.back().get();
  }

  bool test(NetRequest* request, size_t* bytes) override {
    progress();
    return completeRequest(requests_, request, bytes);
  }

  std::vector<int> pollDescriptors() const override { return streams_.descriptors(); }

 private:
  // The next posted receive reads its header once the previous one's pieces are all queued.
  void queueNextHeader() {
    if (headerPending_) return;
    for (auto& r : requests_)
      if (!r->expanded) {
        r->piecesLeft = 1;
        streams_.queue(0).push_back(Piece{reinterpret_cast<char*>(&r->header), sizeof r->header, 0, r.get()});
        headerPending_ = true;
        return;
      }
  }

  void progress() {
    auto onPiece = [this](Piece& piece) {
      SocketRequest* r = piece.owner;
      if (r->expanded) return;
      if (r->header == kGoodbye) {
        // No message follows; the receive stays pending (the executor times out if it waits).
        streams_.peerSaidGoodbye = true;
        r->piecesLeft = 1;
        return;
      }
      // The header: the message's length, checked before any byte of it is accepted.
      if (r->header > r->capacity)
        throw Error(ErrorCode::Remote, "recv from " + streams_.peer() + ": the peer announced a message of " + std::to_string(r->header) +
                                           " bytes where at most " + std::to_string(r->capacity) +
                                           " fit (a peer of another version, corruption, or not a tutti peer)");
      r->size = r->header;
      r->expanded = true;
      headerPending_ = false;
      streams_.queuePayload(r);
      if (r->piecesLeft == 0) r->done = true;
      queueNextHeader();
    };
    for (bool moved = true; moved;) {
      moved = false;
      for (int i = 0; i < streams_.count(); i++) moved = streams_.pullIn(i, onPiece) || moved;
    }
  }

  SocketStreams streams_;
  std::deque<std::unique_ptr<SocketRequest>> requests_;
  bool headerPending_ = false;
};

class SocketListenComm : public NetListenComm {
 public:
  SocketListenComm(Socket listener, uint64_t nonce, int nsocks) : listener_(std::move(listener)), nonce_(nonce), nsocks_(nsocks) {}

  std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    std::vector<Socket> sockets(static_cast<size_t>(nsocks_));
    int have = 0;
    std::string peer;
    while (have < nsocks_) {
      Socket candidate = listener_.accept(deadline, abortFlag);
      SocketHello hello{};
      try {
        candidate.recvAll(&hello, sizeof hello, std::min(deadline, SteadyClock::now() + kHelloTimeout), abortFlag);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::Aborted) throw;
        TUTTI_WARN("NET/Socket: dropped a connection from %s to %s without a complete hello: %s", candidate.peerAddress().toString().c_str(),
                   listener_.localAddress().toString().c_str(), e.what());
        continue;
      }
      if (hello.magic != kSocketHelloMagic || hello.nonce != nonce_ || hello.nsocks != uint32_t(nsocks_) || hello.index >= uint32_t(nsocks_) ||
          sockets[hello.index].valid()) {
        TUTTI_WARN("NET/Socket: dropped a connection from %s to %s: its hello does not match this listener (wrong secret, "
                   "garbage, or a duplicate socket)",
                   candidate.peerAddress().toString().c_str(), listener_.localAddress().toString().c_str());
        continue;
      }
      peer = candidate.peerAddress().toString();
      candidate.setLinkTimeout(linkTimeoutSeconds());
      sockets[hello.index] = std::move(candidate);
      have++;
    }
    listener_.close();  // nothing else may connect to this port now
    return std::make_unique<SocketRecvComm>(std::move(sockets), peer);
  }

 private:
  Socket listener_;
  uint64_t nonce_;
  int nsocks_;
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

  std::unique_ptr<NetSendComm> connect(int, const NetHandle& handle, SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    SocketHandleContents contents = readSocketHandle(handle);
    const SocketAddress& remote = contents.address;
    std::vector<Socket> sockets;
    for (uint32_t i = 0; i < contents.nsocks; i++) {
      Socket socket = Socket::connect(remote, deadline, abortFlag);
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
      throw Error(ErrorCode::InvalidArgument, "NET/Socket: no device " + std::to_string(device) + " (" + std::to_string(interfaces_.size()) + " exist)");
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
  int64_t threads = params::getInt("NCCL_SOCKET_NTHREADS"), perThread = params::getInt("NCCL_NSOCKS_PERTHREAD");
  return int(std::clamp<int64_t>(std::max<int64_t>(threads, 1) * std::max<int64_t>(perThread, 1), 1, kMaxSockets));
}

std::unique_ptr<NetBackend> makeSocketBackend() {
  std::vector<NetworkInterface> interfaces = findNetworkInterfaces();
  for (const NetworkInterface& nic : interfaces)
    TUTTI_INFO(log::Net, "NET/Socket: using %s %s", nic.name.c_str(), nic.address.host().c_str());
  return std::make_unique<SocketBackend>(std::move(interfaces));
}

}  // namespace tutti::net
