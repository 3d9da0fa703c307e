// The stand-in's data calls: registrations, isend, irecv (up to maxRecvs buffers matched by tag),
// iflush, test, and closeSend/closeRecv. Bytes move only inside these calls (there is no thread):
// each frame is a 16-byte header (magic, tag, size) and the payload.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "tests/net_plugin_standin/strict_plugin.h"

namespace strict {
namespace {

constexpr uint32_t kFrameMagic = 0x4d524653;    // "SFRM"
constexpr uint32_t kGoodbyeMagic = 0x45594253;  // "SBYE"

void putHeader(unsigned char* at, uint32_t magic, int tag, uint64_t size) {
  std::memcpy(at, &magic, 4);
  std::memcpy(at + 4, &tag, 4);
  std::memcpy(at + 8, &size, 8);
}

// The comm has failed: said once on stderr, then every test of it answers `code`.
void fail(Comm* c, ncclResult_t code, const char* call, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
void fail(Comm* c, ncclResult_t code, const char* call, const char* fmt, ...) {
  if (c->error != ncclSuccess) return;
  char text[768];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  c->error = code;
  c->errorText = text;
  if (code == ncclSystemError)
    failure(call, "%s", text);
  else
    misuse(code, call, "%s", text);
}

Comm* liveComm(void* comm, CommKind kind, const char* call, ncclResult_t* result) {
  auto* c = static_cast<Comm*>(comm);
  if (comm == nullptr || registry().comms.count(comm) == 0 || c->kind != kind) {
    *result = misuse(ncclInternalError, call, "%s comm %p is not open (closed, or never returned by %s)",
                     kind == CommKind::Send ? "send" : "receive", comm, kind == CommKind::Send ? "connect" : "accept");
    return nullptr;
  }
  return c;
}

// The buffer must lie inside a registration made on this comm (regIsGlobal is 0).
ncclResult_t checkBuffer(Comm* c, void* mhandle, const void* data, size_t size, const char* call) {
  if (size == 0) return ncclSuccess;
  auto it = registry().registrations.find(mhandle);
  if (it == registry().registrations.end())
    return misuse(ncclInvalidUsage, call, "mhandle %p is not a live registration (deregistered, or never made)",
                  mhandle);
  const Registration& reg = it->second;
  if (reg.comm != c)
    return misuse(ncclInvalidUsage, call, "mhandle %p was registered on comm %p, not on %p (regIsGlobal is 0)", mhandle,
                  reg.comm, static_cast<void*>(c));
  const char* p = static_cast<const char*>(data);
  if (p < reg.base || p + size > reg.base + reg.bytes)
    return misuse(ncclInvalidUsage, call, "%zu bytes at %p lie outside the registration of %zu bytes at %p", size, data,
                  reg.bytes, static_cast<void*>(reg.base));
  return ncclSuccess;
}

// What every isend and irecv checks before taking the request: nullptr request means "try again".
ncclResult_t admit(Comm* c, const char* call, bool* busy) {
  *busy = false;
  if (c->outstanding.size() >= size_t(kMaxRequestsPerComm))
    return misuse(ncclInternalError, call, "already %d requests outstanding on the comm with %s (the most NCCL keeps)",
                  kMaxRequestsPerComm, c->peer.c_str());
  if (c->knobs.has(kBusy) && (c->busyCalls++ % 2) == 0) *busy = true;  // BUSY: every other call
  return ncclSuccess;
}

Request* issue(Comm* c, bool send, int n) {
  auto* r = new Request();
  r->comm = c;
  r->send = send;
  r->seq = c->issued++;
  r->n = n;
  // REORDER: complete requests answer not-done 3, 2 or 1 times first (fewer for each later one in
  // a run of three), so a later request can be seen done before an earlier one.
  if (c->knobs.has(kReorder)) r->notDoneAnswers = int(3 - r->seq % 3);
  registry().requests.insert(r);
  c->outstanding.push_back(r);
  return r;
}

void progressSend(Comm* c) {
  // The sender reads only the accept's reply; afterwards, anything readable is the peer's end.
  char sink[64];
  for (;;) {
    const long n = readSome(c->fd, sink, sizeof sink);
    if (n > 0) {
      c->replyLeft -= std::min(c->replyLeft, size_t(n));
      continue;
    }
    if (n < 0) c->peerEnded = true;
    break;
  }
  for (Request* r : c->outstanding) {
    if (r->complete) continue;
    Entry& e = r->entries[0];
    while (r->headerSent < sizeof r->header) {
      const long n = writeSome(c->fd, r->header + r->headerSent, sizeof r->header - r->headerSent);
      if (n < 0) return fail(c, ncclSystemError, "isend", "to %s: %s", c->peer.c_str(), std::strerror(errno));
      if (n == 0) return;
      r->headerSent += size_t(n);
    }
    while (e.done < e.size) {
      const long n = writeSome(c->fd, e.data + e.done, e.size - e.done);
      if (n < 0) return fail(c, ncclSystemError, "isend", "to %s: %s", c->peer.c_str(), std::strerror(errno));
      if (n == 0) return;
      e.done += size_t(n);
    }
    r->complete = true;
  }
  if (c->peerEnded)
    for (Request* r : c->outstanding)
      if (!r->complete)
        return fail(c, ncclSystemError, "isend", "the receiver at %s closed the connection with sends unsent",
                    c->peer.c_str());
}

// Matches the frame whose header was just read to the oldest incomplete receive: a buffer with its
// tag, large enough. False when no receive is posted yet (the frame waits in the socket).
bool matchFrame(Comm* c) {
  uint32_t magic;
  int tag;
  uint64_t size;
  std::memcpy(&magic, c->header, 4);
  std::memcpy(&tag, c->header + 4, 4);
  std::memcpy(&size, c->header + 8, 8);
  Request* oldest = nullptr;
  for (Request* r : c->outstanding)
    if (!r->complete) {
      oldest = r;
      break;
    }
  if (oldest == nullptr) return false;
  std::string tags;
  for (int i = 0; i < oldest->n; i++) {
    Entry& e = oldest->entries[i];
    tags += (i ? "," : "") + std::to_string(e.tag);
    if (e.filled || e.tag != tag) continue;
    if (size > e.size) {
      fail(c, ncclInvalidUsage, "irecv",
           "a message of %llu bytes (tag %d) from %s arrived for a receive of %zu bytes posted: larger than posted",
           static_cast<unsigned long long>(size), tag, c->peer.c_str(), e.size);
      return false;
    }
    c->target = oldest;
    c->targetEntry = i;
    c->payloadLeft = size;
    e.done = 0;
    return true;
  }
  fail(c, ncclInvalidUsage, "irecv",
       "a message with tag %d from %s matches no free buffer of the oldest irecv (tags %s)", tag, c->peer.c_str(),
       tags.c_str());
  return false;
}

void progressRecv(Comm* c) {
  while (c->error == ncclSuccess) {
    if (c->target == nullptr) {
      if (c->headerGot < sizeof c->header) {
        const long n = readSome(c->fd, c->header + c->headerGot, sizeof c->header - c->headerGot);
        if (n == -1) c->peerEnded = true;
        if (n == -2) return fail(c, ncclSystemError, "irecv", "from %s: %s", c->peer.c_str(), std::strerror(errno));
        if (n <= 0) break;
        c->headerGot += size_t(n);
        continue;
      }
      uint32_t magic;
      std::memcpy(&magic, c->header, 4);
      if (magic == kGoodbyeMagic) {
        c->peerSaidGoodbye = true;
        c->headerGot = 0;
        continue;
      }
      if (magic != kFrameMagic)
        return fail(c, ncclInternalError, "irecv", "a garbled frame header from %s", c->peer.c_str());
      if (!matchFrame(c)) break;
    }
    Entry& e = c->target->entries[c->targetEntry];
    if (c->payloadLeft > 0) {
      const long n = readSome(c->fd, e.data + e.done, size_t(c->payloadLeft));
      if (n == -1) c->peerEnded = true;
      if (n == -2) return fail(c, ncclSystemError, "irecv", "from %s: %s", c->peer.c_str(), std::strerror(errno));
      if (n <= 0) break;
      e.done += size_t(n);
      c->payloadLeft -= uint64_t(n);
      if (c->payloadLeft > 0) continue;
    }
    e.filled = true;
    bool all = true;
    for (int i = 0; i < c->target->n; i++) all = all && c->target->entries[i].filled;
    c->target->complete = all;
    c->target = nullptr;
    c->headerGot = 0;
  }
  if (!c->peerEnded || c->error != ncclSuccess) return;
  int posted = 0;
  for (Request* r : c->outstanding) posted += r->complete ? 0 : 1;
  // After a goodbye (lax), receives left posted simply never complete; without one (NO_GOODBYE, or
  // a peer that died), an end with receives posted fails them, as TCP plugins do.
  if (posted > 0 && (c->knobs.has(kNoGoodbye) || !c->peerSaidGoodbye))
    fail(c, ncclSystemError, "test", "the connection from %s ended (EOF, no goodbye) with %d receive(s) posted",
         c->peer.c_str(), posted);
}

void progress(Comm* c) {
  if (c->error != ncclSuccess) return;
  if (c->kind == CommKind::Send)
    progressSend(c);
  else
    progressRecv(c);
}

ncclResult_t closeComm(void* comm, CommKind kind, const char* call) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  ncclResult_t result = ncclSuccess;
  Comm* c = liveComm(comm, kind, call, &result);
  if (c == nullptr) return result;
  if (!c->outstanding.empty())
    std::fprintf(stderr, "NET/Strict note: %s: %zu request(s) still outstanding on the comm with %s are dropped\n",
                 call, c->outstanding.size(), c->peer.c_str());
  bool midFrame = false;
  for (Request* r : c->outstanding) {
    midFrame = midFrame || (r->send && !r->complete && r->headerSent > 0);
    retire(r);
  }
  c->outstanding.clear();
  for (auto it = reg.registrations.begin(); it != reg.registrations.end();)
    if (it->second.comm == c) {
      delete static_cast<Registration*>(it->first);
      it = reg.registrations.erase(it);
    } else {
      ++it;
    }
  if (c->knobs.has(kNoGoodbye)) {
    if (kind == CommKind::Send) drainInput(c->fd);  // a plain FIN (unread input would make it a reset)
  } else {
    drainInput(c->fd);
    if (kind == CommKind::Send && !midFrame && c->error == ncclSuccess) {
      unsigned char bye[16];
      putHeader(bye, kGoodbyeMagic, 0, 0);
      writeSome(c->fd, bye, sizeof bye);
    }
    ::shutdown(c->fd, SHUT_WR);
  }
  ::close(c->fd);
  c->context->comms--;
  reg.comms.erase(c);
  delete c;
  return ncclSuccess;
}

}  // namespace

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto* c = static_cast<Comm*>(comm);
  if (comm == nullptr || reg.comms.count(comm) == 0 || c->kind == CommKind::Listen)
    return misuse(ncclInternalError, "regMr", "comm %p is not an open send or receive comm", comm);
  if (mhandle == nullptr) return misuse(ncclInvalidArgument, "regMr", "mhandle is NULL");
  if (type != kPtrHost)
    return misuse(ncclInvalidArgument, "regMr", "pointer type %d: this plugin takes host memory only (NCCL_PTR_HOST)",
                  type);
  auto* r = new Registration{comm, static_cast<char*>(data), size};
  reg.registrations.emplace(r, *r);
  *mhandle = r;
  return ncclSuccess;
}

ncclResult_t regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return misuse(ncclInvalidUsage, "regMrDmaBuf", "this plugin does not report NCCL_PTR_DMABUF");
}

ncclResult_t deregMr(void* comm, void* mhandle) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  if (comm == nullptr || reg.comms.count(comm) == 0)
    return misuse(ncclInternalError, "deregMr", "comm %p is not open (closed before its registrations?)", comm);
  auto it = reg.registrations.find(mhandle);
  if (it == reg.registrations.end() || it->second.comm != comm)
    return misuse(ncclInternalError, "deregMr", "mhandle %p is not a live registration of comm %p", mhandle, comm);
  reg.registrations.erase(it);
  delete static_cast<Registration*>(mhandle);
  return ncclSuccess;
}

ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  ncclResult_t result = ncclSuccess;
  Comm* c = liveComm(sendComm, CommKind::Send, "isend", &result);
  if (c == nullptr) return result;
  if (request == nullptr) return misuse(ncclInvalidArgument, "isend", "request is NULL");
  *request = nullptr;
  if (c->error != ncclSuccess) return c->error;
  if (size > kMaxMessageBytes)
    return misuse(ncclInvalidUsage, "isend", "%zu bytes, above maxP2pBytes (%zu)", size, kMaxMessageBytes);
  if ((result = checkBuffer(c, mhandle, data, size, "isend")) != ncclSuccess) return result;
  bool busy = false;
  if ((result = admit(c, "isend", &busy)) != ncclSuccess || busy) return result;
  Request* r = issue(c, true, 1);
  r->entries[0] = Entry{static_cast<char*>(data), size, tag};
  putHeader(r->header, kFrameMagic, tag, size);
  if (!c->knobs.has(kReorder)) progress(c);  // lax: eager; REORDER: bytes move only in test()
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                   void** request) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  ncclResult_t result = ncclSuccess;
  Comm* c = liveComm(recvComm, CommKind::Recv, "irecv", &result);
  if (c == nullptr) return result;
  if (request == nullptr) return misuse(ncclInvalidArgument, "irecv", "request is NULL");
  *request = nullptr;
  if (n < 1 || n > c->knobs.maxRecvs)
    return misuse(ncclInvalidUsage, "irecv", "%d buffers, but getProperties reported maxRecvs %d", n,
                  c->knobs.maxRecvs);
  if (c->error != ncclSuccess) return c->error;
  for (int i = 0; i < n; i++) {
    if (sizes[i] > kMaxMessageBytes)
      return misuse(ncclInvalidUsage, "irecv", "buffer %d of %zu bytes, above maxP2pBytes", i, sizes[i]);
    if ((result = checkBuffer(c, mhandles[i], data[i], sizes[i], "irecv")) != ncclSuccess) return result;
  }
  bool busy = false;
  if ((result = admit(c, "irecv", &busy)) != ncclSuccess || busy) return result;
  Request* r = issue(c, false, n);
  for (int i = 0; i < n; i++) r->entries[i] = Entry{static_cast<char*>(data[i]), sizes[i], tags[i]};
  if (!c->knobs.has(kReorder)) progress(c);
  *request = r;
  return ncclSuccess;
}

ncclResult_t iflush(void* recvComm, int n, void**, const int*, void**, void** request) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  ncclResult_t result = ncclSuccess;
  Comm* c = liveComm(recvComm, CommKind::Recv, "iflush", &result);
  if (c == nullptr) return result;
  if (n < 1 || n > c->knobs.maxRecvs)
    return misuse(ncclInvalidUsage, "iflush", "%d buffers, but maxRecvs is %d", n, c->knobs.maxRecvs);
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto* r = static_cast<Request*>(request);
  if (reg.requests.count(r) == 0) {
    if (reg.freedSet.count(r))
      return misuse(ncclInternalError, "test",
                    "request %p was reported done by an earlier test (and freed then), or its comm was closed",
                    request);
    return misuse(ncclInternalError, "test", "request %p was never returned by isend or irecv", request);
  }
  if (done == nullptr) return misuse(ncclInvalidArgument, "test", "done is NULL");
  *done = 0;
  Comm* c = r->comm;
  progress(c);
  if (!r->complete) return c->error;
  if (r->notDoneAnswers > 0) {
    r->notDoneAnswers--;
    return ncclSuccess;
  }
  *done = 1;
  if (sizes != nullptr && !c->knobs.has(kNoSizes))
    for (int i = 0; i < r->n; i++) sizes[i] = int(r->entries[i].done);
  c->outstanding.erase(std::find(c->outstanding.begin(), c->outstanding.end(), r));
  retire(r);
  return ncclSuccess;
}

ncclResult_t closeSend(void* sendComm) { return closeComm(sendComm, CommKind::Send, "closeSend"); }
ncclResult_t closeRecv(void* recvComm) { return closeComm(recvComm, CommKind::Recv, "closeRecv"); }

}  // namespace strict
