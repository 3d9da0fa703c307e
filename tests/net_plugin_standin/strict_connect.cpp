// The stand-in's setup calls: init and finalize, its one device, listen, connect, accept and
// closeListen, each of connect and accept a stage machine that never blocks.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "tests/net_plugin_standin/strict_plugin.h"

namespace strict {
namespace {

constexpr uint64_t kHandleMagic = 0x5354524943544844ull;  // "STRICTHD"
constexpr uint64_t kHelloMagic = 0x5354524943544845ull;
constexpr uint64_t kReplyMagic = 0x5354524943545250ull;
constexpr uint64_t kAccepted = 1, kRefused = 2;
constexpr unsigned long kNetSubsystem = 0x10;  // NCCL_NET
constexpr int kInfoLevel = 3;

// A connect between its first call and the comm it returns; the handle points at it.
struct PendingConnect {
  Context* context;
  Knobs knobs;
  int fd = -1;
  int stage = 0;  // 0 TCP connecting, 1 writing the hello, 2 reading the accept's reply
  SocketAddress target;
  uint64_t listenerId;
  unsigned char hello[16];
  size_t helloSent = 0;
  unsigned char reply[16];
  size_t replyGot = 0;
};

void put64(unsigned char* at, uint64_t value) { std::memcpy(at, &value, sizeof value); }
uint64_t get64(const unsigned char* at) {
  uint64_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

uint64_t newListenerId() {
  static std::mt19937_64 random{std::random_device{}()};
  return random() | 1;  // never 0
}

Context* contextOf(void* context, const char* call, ncclResult_t* result) {
  Registry& r = registry();
  Context* c = context ? static_cast<Context*>(context) : r.processContext;
  if (c == nullptr || r.contexts.count(c) == 0) {
    *result = misuse(ncclInvalidUsage, call, "context %p is not one init returned (or it was finalized)", context);
    return nullptr;
  }
  return c;
}

Comm* newComm(CommKind kind, Context* context, const Knobs& knobs, int fd, const std::string& peer) {
  Comm* c = new Comm();
  c->kind = kind;
  c->context = context;
  c->knobs = knobs;
  c->fd = fd;
  c->peer = peer;
  context->comms++;
  registry().comms.insert(c);
  return c;
}

ncclResult_t endConnect(Handle* handle, PendingConnect* p, ncclResult_t result) {
  if (p->fd >= 0) ::close(p->fd);
  registry().pendingConnects.erase(uint64_t(uintptr_t(p)));
  handle->pending = 0;
  delete p;
  return result;
}

// Advances a connect as far as it can go now; *done once the send comm exists.
ncclResult_t advanceConnect(Handle* handle, PendingConnect* p, void** sendComm) {
  const std::string where = toString(p->target) + " (listener #" + std::to_string(p->listenerId % 100000) + ")";
  if (p->stage == 0) {
    pollfd pfd{p->fd, POLLOUT, 0};
    if (::poll(&pfd, 1, 0) == 0) return ncclSuccess;
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0)
      return endConnect(handle, p,
                        failure("connect", "to %s: %s: its listener is closed, or the handle has expired",
                                where.c_str(), std::strerror(error)));
    p->stage = 1;
  }
  if (p->stage == 1) {
    const long n = writeSome(p->fd, p->hello + p->helloSent, sizeof p->hello - p->helloSent);
    if (n < 0)
      return endConnect(handle, p,
                        failure("connect", "to %s: sending the hello: %s", where.c_str(), std::strerror(errno)));
    p->helloSent += size_t(n);
    if (p->helloSent < sizeof p->hello) return ncclSuccess;
    p->stage = 2;
    if (!p->knobs.has(kConnect)) {  // lax: the comm exists before the peer has accepted it
      Comm* c = newComm(CommKind::Send, p->context, p->knobs, p->fd, toString(p->target));
      c->replyLeft = sizeof p->reply;
      p->fd = -1;
      *sendComm = c;
      return endConnect(handle, p, ncclSuccess);
    }
  }
  const long n = readSome(p->fd, p->reply + p->replyGot, sizeof p->reply - p->replyGot);
  if (n == -1)
    return endConnect(handle, p,
                      failure("connect",
                              "to %s: the listener closed the connection before accepting it "
                              "(closeListen, or its handle has expired)",
                              where.c_str()));
  if (n < 0)
    return endConnect(handle, p,
                      failure("connect", "to %s: waiting for the accept: %s", where.c_str(), std::strerror(errno)));
  p->replyGot += size_t(n);
  if (p->replyGot < sizeof p->reply) return ncclSuccess;  // the peer's accept has not answered yet
  if (get64(p->reply) != kReplyMagic || get64(p->reply + 8) != kAccepted)
    return endConnect(handle, p,
                      failure("connect",
                              "to %s: refused: that listener is closed or has accepted its one "
                              "connection (the handle has expired)",
                              where.c_str()));
  *sendComm = newComm(CommKind::Send, p->context, p->knobs, p->fd, toString(p->target));
  p->fd = -1;
  return endConnect(handle, p, ncclSuccess);
}

Listen* liveListen(void* listenComm, const char* call, ncclResult_t* result) {
  Registry& r = registry();
  auto* l = static_cast<Listen*>(listenComm);
  if (listenComm == nullptr || r.comms.count(listenComm) == 0 || l->kind != CommKind::Listen) {
    *result = misuse(ncclInternalError, call, "listen comm %p is not open (closed by closeListen, or never listened)",
                     listenComm);
    return nullptr;
  }
  return l;
}

void closeListeningSocket(Listen* l) {
  if (l->fd >= 0) ::close(l->fd);
  l->fd = -1;
  if (l->knobs.has(kExpire)) registry().expiredListeners.insert(l->id);
}

}  // namespace

ncclResult_t init(bool perCommunicator, Logger logger, void** context) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const Knobs knobs = readKnobs();
  r.latestKnobs = knobs;
  r.initialized = true;
  Context* c;
  if (perCommunicator) {
    c = new Context();
    r.contexts.insert(c);
  } else {
    if (r.processContext == nullptr) {
      r.processContext = new Context();
      r.contexts.insert(r.processContext);
    }
    c = r.processContext;
  }
  c->knobs = knobs;
  if (context) *context = perCommunicator ? c : nullptr;
  if (logger) logger(kInfoLevel, kNetSubsystem, __FILE__, __LINE__, "NET/Strict: %s", describe(knobs).c_str());
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ncclResult_t result = ncclSuccess;
  Context* c = contextOf(context, "finalize", &result);
  if (c == nullptr) return result;
  if (c->comms != 0)
    return misuse(ncclInternalError, "finalize", "context %p still has %d comm(s) open", context, c->comms);
  r.contexts.erase(c);
  if (c == r.processContext) r.processContext = nullptr;
  delete c;
  return ncclSuccess;
}

ncclResult_t devices(int* ndev) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.initialized) return misuse(ncclInternalError, "devices", "called before init");
  if (ndev == nullptr) return misuse(ncclInvalidArgument, "devices", "ndev is NULL");
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t properties(int dev, Properties* props) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.initialized) return misuse(ncclInternalError, "getProperties", "called before init");
  if (dev != 0) return misuse(ncclInvalidArgument, "getProperties", "no device %d (there is one: 0)", dev);
  props->name = "strict0";
  props->guid = 0x5354524943540000ull;
  props->speed = 10000;
  props->maxRecvs = r.latestKnobs.maxRecvs;
  props->maxBytes = kMaxMessageBytes;
  return ncclSuccess;
}

ncclResult_t listen(void* context, int dev, void* handleBytes, void** listenComm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ncclResult_t result = ncclSuccess;
  Context* c = contextOf(context, "listen", &result);
  if (c == nullptr) return result;
  if (dev != 0) return misuse(ncclInvalidArgument, "listen", "no device %d (there is one: 0)", dev);
  if (handleBytes == nullptr || listenComm == nullptr)
    return misuse(ncclInvalidArgument, "listen", "handle or listenComm is NULL");
  SocketAddress address;
  std::string why;
  if (!chooseAddress(&address, &why)) return failure("listen", "%s", why.c_str());
  const int fd = ::socket(address.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const socklen_t length = address.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  SocketAddress bound = address;
  socklen_t boundLength = sizeof bound;
  if (fd < 0 || ::bind(fd, &address.sa, length) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, &bound.sa, &boundLength) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return failure("listen", "on %s: %s", toString(address).c_str(), std::strerror(error));
  }
  Listen* l = new Listen();
  l->context = c;
  l->knobs = c->knobs;
  l->fd = fd;
  l->id = newListenerId();
  l->address = bound;
  c->comms++;
  r.comms.insert(l);
  Handle handle{};
  handle.magic = kHandleMagic;
  handle.listenerId = l->id;
  handle.address = bound;
  std::memset(handleBytes, 0, kHandleBytes);
  std::memcpy(handleBytes, &handle, sizeof handle);
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t connect(void* context, int dev, void* handleBytes, void** sendComm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ncclResult_t result = ncclSuccess;
  Context* c = contextOf(context, "connect", &result);
  if (c == nullptr) return result;
  if (dev != 0) return misuse(ncclInvalidArgument, "connect", "no device %d (there is one: 0)", dev);
  if (handleBytes == nullptr || sendComm == nullptr)
    return misuse(ncclInvalidArgument, "connect", "handle or sendComm is NULL");
  *sendComm = nullptr;
  auto* handle = static_cast<Handle*>(handleBytes);
  if (handle->magic != kHandleMagic)
    return misuse(ncclInvalidUsage, "connect", "the handle is not one this plugin's listen wrote");
  if (handle->pending != 0) {
    if (r.pendingConnects.count(handle->pending) == 0)
      return misuse(ncclInternalError, "connect",
                    "the handle points at a connect that is not in progress (a stale copy of a handle?)");
    return advanceConnect(handle, reinterpret_cast<PendingConnect*>(uintptr_t(handle->pending)), sendComm);
  }
  if (c->knobs.has(kExpire) && r.expiredListeners.count(handle->listenerId))
    return failure("connect",
                   "to %s: its listener is closed (closeListen) or has accepted its one connection: "
                   "the handle has expired",
                   toString(handle->address).c_str());
  auto* p = new PendingConnect();
  p->context = c;
  p->knobs = c->knobs;
  p->target = handle->address;
  p->listenerId = handle->listenerId;
  put64(p->hello, kHelloMagic);
  put64(p->hello + 8, handle->listenerId);
  p->fd = ::socket(p->target.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  handle->pending = uint64_t(uintptr_t(p));
  r.pendingConnects.insert(handle->pending);
  const socklen_t length = p->target.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (p->fd < 0 || (::connect(p->fd, &p->target.sa, length) != 0 && errno != EINPROGRESS))
    return endConnect(handle, p,
                      failure("connect", "to %s: %s: its listener is closed, or the handle has expired",
                              toString(p->target).c_str(), std::strerror(errno)));
  if (c->knobs.has(kConnect)) return ncclSuccess;  // never done on the first call
  return advanceConnect(handle, p, sendComm);
}

ncclResult_t accept(void* listenComm, void** recvComm) {
  Registry& r = registry();
  int blockOn = -1;  // BLOCK_ACCEPT: the listener to wait on, outside the lock, as a blocking accept does
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    ncclResult_t ignored = ncclSuccess;
    Listen* l = liveListen(listenComm, "accept", &ignored);
    if (l != nullptr && l->knobs.has(kBlockAccept) && l->stage == 0 && !l->accepted) blockOn = l->fd;
  }
  if (blockOn >= 0) {
    pollfd waitFor{blockOn, POLLIN, 0};
    ::poll(&waitFor, 1, kBlockAcceptSeconds * 1000);
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  ncclResult_t result = ncclSuccess;
  Listen* l = liveListen(listenComm, "accept", &result);
  if (l == nullptr) return result;
  if (recvComm == nullptr) return misuse(ncclInvalidArgument, "accept", "recvComm is NULL");
  *recvComm = nullptr;
  if (l->accepted)
    return misuse(ncclInternalError, "accept",
                  "listener %s has returned its one connection already; accept again is misuse",
                  toString(l->address).c_str());
  const bool oneStage = l->knobs.has(kAccept);  // ACCEPT: one stage per call
  if (l->stage == 0) {
    const int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return ncclSuccess;
      return failure("accept", "on %s: %s", toString(l->address).c_str(), std::strerror(errno));
    }
    l->acceptFd = fd;
    l->helloGot = l->replySent = 0;
    l->stage = 1;
    if (oneStage) return ncclSuccess;
  }
  if (l->stage == 1) {
    const long n = readSome(l->acceptFd, l->hello + l->helloGot, sizeof l->hello - l->helloGot);
    if (n < 0) {  // that connector went away: wait for another
      ::close(l->acceptFd);
      l->acceptFd = -1;
      l->stage = 0;
      return ncclSuccess;
    }
    l->helloGot += size_t(n);
    if (l->helloGot < sizeof l->hello) return ncclSuccess;
    if (get64(l->hello) != kHelloMagic || get64(l->hello + 8) != l->id) {
      unsigned char refusal[16];
      put64(refusal, kReplyMagic);
      put64(refusal + 8, kRefused);
      writeSome(l->acceptFd, refusal, sizeof refusal);
      ::close(l->acceptFd);
      l->acceptFd = -1;
      l->stage = 0;
      return ncclSuccess;
    }
    l->stage = 2;
    if (oneStage) return ncclSuccess;
  }
  if (l->stage == 2) {
    unsigned char reply[16];
    put64(reply, kReplyMagic);
    put64(reply + 8, kAccepted);
    const long n = writeSome(l->acceptFd, reply + l->replySent, sizeof reply - l->replySent);
    if (n < 0) {
      ::close(l->acceptFd);
      l->acceptFd = -1;
      l->stage = 0;
      return ncclSuccess;
    }
    l->replySent += size_t(n);
    if (l->replySent < sizeof reply) return ncclSuccess;
    l->stage = 3;
    if (oneStage) return ncclSuccess;
  }
  SocketAddress peer{};
  socklen_t length = sizeof peer;
  ::getpeername(l->acceptFd, &peer.sa, &length);
  *recvComm = newComm(CommKind::Recv, l->context, l->knobs, l->acceptFd, toString(peer));
  l->acceptFd = -1;
  l->accepted = true;
  if (l->knobs.has(kExpire)) closeListeningSocket(l);  // its one connection is in: the handle is spent
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  ncclResult_t result = ncclSuccess;
  Listen* l = liveListen(listenComm, "closeListen", &result);
  if (l == nullptr) return result;
  if (l->acceptFd >= 0) closeAbruptly(l->acceptFd);  // a connection half accepted is refused
  closeListeningSocket(l);
  l->context->comms--;
  r.comms.erase(l);
  delete l;
  return ncclSuccess;
}

}  // namespace strict
