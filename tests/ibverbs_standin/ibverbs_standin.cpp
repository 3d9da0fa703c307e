// A strict software stand-in for libibverbs (loaded by the IB net backend through TUTTI_IBVERBS_LIB):
// one RoCE-like device and port, PDs, MRs with key / bounds / access checks, CQs, RC QPs with the
// RESET -> INIT -> RTR -> RTS state machine, RDMA write (with or without immediate) and send/recv,
// carried between processes over TCP to the address that the GID encodes.
//
// Why strict: the backend has run only here, so what hardware refuses must be refused here too
// (missing modify_qp attributes, a GID index that does not exist, an MTU beyond the port's, a
// key without remote-write access, a PSN that does not match) and errors flush the queues.
//
// Limits, on purpose: one scatter/gather entry per work request, no SRQ, no atomics, RDMA read only
// between QPs of one context (the GDR flush's loopback), RNR waits without limit (rnr_retry 7). The port is Ethernet (RoCE: addresses come from GIDs)
// unless TUTTI_IBVERBS_STANDIN_LINK_LAYER=ib, which makes it InfiniBand: the LID is the context's
// TCP port and QPs without a GRH reach the LID at this process's stand-in address (one host).
//
// For tests, also: TUTTI_IBVERBS_STANDIN_DELAY_QP_MS=n holds every operation that completes a
// receive (write with immediate, send) arriving at a QP with an even number for n ms before it is
// placed, and what follows it on that QP behind it, so that completions of different QPs come out
// of order as they may on hardware (order within a QP is kept; plain writes that arrive with
// nothing held, such as clear-to-send entries, are not delayed); TUTTI_IBVERBS_STANDIN_RELAXED_ORDERING=0
// makes registrations asking for optional access flags fail, as in a library without them;
// TUTTI_IBVERBS_STANDIN_ACTIVE_SPEED=n gives the ports that active_speed code (verbs' encoding:
// 32 EDR, 64 HDR, 128 NDR; default 32) at 4x width; tutti_standin_counters() reports what was
// asked of the process's stand-in, and tutti_standin_device_bytes() the bytes posted for sending
// through one device.
//
// Completion channels have a real pollable descriptor (an eventfd) that becomes readable when a
// completion arrives on a CQ armed with ibv_req_notify_cq (solicited-only arming: the next
// solicited receive or any error completion), one event per arming, as verbs define it. Async
// events come on the context's async_fd; tutti_standin_port_down() (exported for tests)
// takes a device's port down: IBV_EVENT_PORT_ERR is raised and its links stop moving bytes (the
// peers' QPs exhaust their retries by the transport timer).
//
// Wire (one TCP connection per direction of a QP pair, opened at RTS by the sending QP):
// a Hello naming the destination QP, then Frames; the receiving side answers each OP with an ACK,
// and an op that waits for a receive to be posted with RNR NAKs now and then.
//
// The transport timer, as hardware runs it: a QP with sends outstanding that hears nothing from its
// peer (no ACK, no RNR NAK, no byte of its own accepted by the link) for (retry_cnt + 1) times
// 4.096 us * 2^timeout fails them with IBV_WC_RETRY_EXC_ERR; timeout 0 waits forever. That is how a
// cut link (no broken connection, only silence) ends a transfer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "standin_dmabuf.h"

#undef ibv_query_port
#undef ibv_reg_mr

namespace {

constexpr int kGidCount = 2;  // index 0: link-local style, index 1: IPv4-mapped (RoCE v2 style)
constexpr uint32_t kHelloMagic = 0x53544e44;  // "STND"

struct Hello {
  uint32_t magic;
  uint32_t destQpn;
  uint32_t srcQpn;
  uint32_t pathMtu;
};

enum FrameType : uint32_t { kOp = 1, kAck = 2, kRnrNak = 3 };
constexpr uint32_t kFrameSolicited = 1;  // Frame::pad of an op the sender flagged IBV_SEND_SOLICITED

using Clock = std::chrono::steady_clock;
constexpr auto kRnrNakEvery = std::chrono::milliseconds(20);  // while an op waits for a receive
struct Frame {
  uint32_t type;
  uint32_t opcode;  // ibv_wr_opcode
  uint64_t seq;
  uint32_t psn;
  uint32_t imm;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t length;
  uint32_t status;  // ACK: ibv_wc_status
  uint32_t pad;     // OP: kFrameSolicited
};

struct StandinMr {
  ibv_mr mr;  // mr.addr: the address work requests name (the iova)
  int access;
  char* host;  // where the bytes are (standin_dmabuf.cpp: a mapping of the dmabuf)
};

// Where the bytes of `addr`, within the region, are.
char* hostOf(StandinMr* m, uint64_t addr) { return m->host + (addr - uint64_t(uintptr_t(m->mr.addr))); }

struct StandinChannel {
  ibv_comp_channel channel{};  // refcnt: the CQs attached (under the context's mutex)
  std::mutex mutex;
  std::deque<ibv_cq*> events;  // the eventfd is nonzero exactly while this is not empty
};

enum Arming { kDisarmed = 0, kArmedAll, kArmedSolicited };

struct StandinCq {
  ibv_cq cq{};
  std::mutex mutex;
  std::deque<ibv_wc> entries;
  bool overrun = false;
  Arming armed = kDisarmed;
  std::atomic<uint32_t> eventsReported{0}, eventsAcked{0};
};

struct OutItem {
  Frame frame;
  std::vector<char> inlineData;
  const char* payload = nullptr;
  size_t sent = 0;  // of sizeof(Frame) + length
};

struct Link {  // one TCP connection of a QP: outbound (ops out, acks in) or inbound (ops in, acks out)
  int fd = -1;
  std::deque<OutItem> out;
  Frame in{};
  size_t inGot = 0;
  bool inHeader = true;
  char* inTarget = nullptr;  // where the payload goes; nullptr: discarded
  std::vector<char> discard;
  size_t payloadGot = 0;
  uint32_t inStatus = IBV_WC_SUCCESS;
  bool inNeedsRecv = false;
  ibv_recv_wr inRecv{};
  uint32_t peerMtu = 0;
  Clock::time_point lastRnrNak{};  // inbound: when the last RNR NAK for the waiting op went out
  Clock::time_point holdUntil{};   // TUTTI_IBVERBS_STANDIN_DELAY_QP_MS: the held op's release
  bool holding = false;
};

struct PendingSend {
  uint64_t seq;
  uint64_t wrId;
  ibv_wc_opcode opcode;
  bool signaled;
  uint32_t length;
};

struct StandinQp {
  ibv_qp qp{};
  int access = 0;
  uint8_t port = 0;
  ibv_qp_attr attr{};  // what modify_qp set
  uint32_t sendPsn = 0, expectPsn = 0;
  uint64_t nextSeq = 1;
  Link outbound, inbound;
  std::deque<PendingSend> pending;
  Clock::time_point lastHeard{};  // the peer last showed life to the oldest pending send
  std::deque<ibv_recv_wr> recvs;
  std::deque<ibv_sge> recvSges;  // parallel to recvs (one each)
};

struct StandinContext;

struct StandinDevice {
  ibv_device device{};
  int index = 0;
};

struct StandinContext {
  ibv_context ctx{};
  int listenFd = -1;
  uint32_t ip = 0;  // network order
  uint16_t port = 0;
  int wake[2] = {-1, -1};
  std::mutex mutex;  // guards everything below and every QP's state
  std::map<uint32_t, StandinQp*> qps;
  std::map<uint32_t, StandinMr*> mrs;  // by key (lkey == rkey)
  std::vector<int> pendingAccepts;
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  std::atomic<bool> stop{false};
  std::thread progress;
  // Async events: async_fd (an eventfd) is nonzero exactly while `asyncEvents` is not empty.
  std::mutex asyncMutex;
  std::deque<ibv_async_event> asyncEvents;
  std::atomic<bool> portDown{false};
};

// The open contexts of this process, so that a test can take a device's port down in all of them
// (a port is the device's, not one context's).
struct OpenContexts {
  std::mutex mutex;
  std::vector<StandinContext*> list;
  uint64_t asyncReported = 0, asyncAcked = 0;  // port events name no context: counted per process
};
OpenContexts& openContexts() {
  static OpenContexts contexts;
  return contexts;
}

StandinContext* contextOf(ibv_context* c) { return reinterpret_cast<StandinContext*>(c); }
StandinQp* qpOf(ibv_qp* q) { return reinterpret_cast<StandinQp*>(q); }
StandinCq* cqOf(ibv_cq* c) { return reinterpret_cast<StandinCq*>(c); }

bool trace() { return std::getenv("TUTTI_IBVERBS_STANDIN_TRACE") != nullptr; }

bool infinibandLinkLayer() {
  const char* l = std::getenv("TUTTI_IBVERBS_STANDIN_LINK_LAYER");
  return l && std::strcmp(l, "ib") == 0;
}

int delayMs() {
  const char* d = std::getenv("TUTTI_IBVERBS_STANDIN_DELAY_QP_MS");
  return d ? std::atoi(d) : 0;
}

// What the process asked of the stand-in, for tests to read through tutti_standin_counters(): the
// backend owns the contexts, so these are the process's (atomic; only ever incremented).
struct Counters {
  std::atomic<uint64_t> plainWrites{0}, immWrites{0}, relaxedOrderingMrs{0}, heldOps{0};
  std::atomic<uint64_t> bytesByDevice[2] = {};  // posted for sending, by StandinDevice::index
};
Counters& counters() {
  static Counters c;
  return c;
}

void wakeUp(StandinContext* c) {
  char b = 1;
  (void)!write(c->wake[1], &b, 1);
}

void signalEventFd(int fd) {
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void clearEventFd(int fd) {
  uint64_t value;
  (void)!::read(fd, &value, sizeof value);
}

// A completion event for an armed CQ: one per arming, on the CQ's channel.
void raiseCqEvent(StandinCq* s) {
  auto* channel = reinterpret_cast<StandinChannel*>(s->cq.channel);
  std::lock_guard<std::mutex> lock(channel->mutex);
  if (channel->events.empty()) signalEventFd(channel->channel.fd);
  channel->events.push_back(&s->cq);
}

// `solicited`: a receive completion of a request the sender flagged IBV_SEND_SOLICITED.
void pushCompletion(ibv_cq* cq, const ibv_wc& wc, bool solicited = false) {
  StandinCq* s = cqOf(cq);
  std::lock_guard<std::mutex> lock(s->mutex);
  if (int(s->entries.size()) >= s->cq.cqe) s->overrun = true;
  else s->entries.push_back(wc);
  if (s->armed == kArmedAll || (s->armed == kArmedSolicited && (solicited || wc.status != IBV_WC_SUCCESS))) {
    s->armed = kDisarmed;
    raiseCqEvent(s);
  }
}

ibv_wc completion(ibv_qp* qp, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t bytes) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = opcode;
  wc.byte_len = bytes;
  wc.qp_num = qp->qp_num;
  return wc;
}

void closeLink(Link& l) {
  if (l.fd >= 0) ::close(l.fd);
  l.fd = -1;
  l.out.clear();
}

// The QP enters the error state: what is outstanding completes with `sendStatus` first (the
// failing request), then everything else flushes, as hardware does. Caller holds the mutex.
void failQp(StandinQp* q, ibv_wc_status firstStatus) {
  if (q->qp.state == IBV_QPS_ERR) return;
  if (trace()) fprintf(stderr, "standin: QP %u -> ERR (%s)\n", q->qp.qp_num, ibv_wc_status_str(firstStatus));
  q->qp.state = IBV_QPS_ERR;
  bool first = true;
  for (const PendingSend& p : q->pending) {
    pushCompletion(q->qp.send_cq, completion(&q->qp, p.wrId, first ? firstStatus : IBV_WC_WR_FLUSH_ERR, p.opcode, 0));
    first = false;
  }
  q->pending.clear();
  for (const ibv_recv_wr& r : q->recvs) pushCompletion(q->qp.recv_cq, completion(&q->qp, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0));
  q->recvs.clear();
  q->recvSges.clear();
  closeLink(q->outbound);
  closeLink(q->inbound);
}

StandinMr* findMr(StandinContext* c, uint32_t key, ibv_pd* pd, uint64_t addr, uint64_t length, int needAccess) {
  auto it = c->mrs.find(key);
  if (it == c->mrs.end()) return nullptr;
  StandinMr* m = it->second;
  uint64_t base = uint64_t(uintptr_t(m->mr.addr));
  if (m->mr.pd != pd || addr < base || addr + length > base + m->mr.length || length > m->mr.length) return nullptr;
  if ((m->access & needAccess) != needAccess) return nullptr;
  return m;
}

// ---- the progress thread: nonblocking I/O on every link ----

// Writes what the link's queue holds; false when the connection broke. *progressed: some bytes went.
bool flushOut(Link& l, bool* progressed = nullptr) {
  while (!l.out.empty()) {
    OutItem& item = l.out.front();
    size_t total = sizeof(Frame) + (item.frame.type == kOp ? item.frame.length : 0);
    while (item.sent < total) {
      const char* src;
      size_t n;
      if (item.sent < sizeof(Frame)) {
        src = reinterpret_cast<const char*>(&item.frame) + item.sent;
        n = sizeof(Frame) - item.sent;
      } else {
        size_t off = item.sent - sizeof(Frame);
        src = (item.inlineData.empty() ? item.payload : item.inlineData.data()) + off;
        n = total - item.sent;
      }
      ssize_t w = ::send(l.fd, src, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
        return false;
      }
      item.sent += size_t(w);
      if (progressed && w > 0) *progressed = true;
    }
    l.out.pop_front();
  }
  return true;
}

void sendAck(Link& l, uint64_t seq, uint32_t status, FrameType type = kAck) {
  OutItem a;
  a.frame = Frame{};
  a.frame.type = type;
  a.frame.seq = seq;
  a.frame.status = status;
  l.out.push_back(std::move(a));
}

// Decides where an arriving op's payload goes, checking what hardware checks. Caller holds mutex.
// Returns false when the op must wait for a receive to be posted (RNR).
bool startOp(StandinContext* c, StandinQp* q, Link& l) {
  Frame& f = l.in;
  l.inStatus = IBV_WC_SUCCESS;
  l.inTarget = nullptr;
  l.inNeedsRecv = false;
  if (q->qp.state != IBV_QPS_RTR && q->qp.state != IBV_QPS_RTS) l.inStatus = IBV_WC_REM_INV_REQ_ERR;
  else if (l.peerMtu != q->attr.path_mtu) l.inStatus = IBV_WC_REM_INV_REQ_ERR;  // MTU mismatch: packets dropped
  else if (f.psn != q->expectPsn) l.inStatus = IBV_WC_RETRY_EXC_ERR;            // sequence error
  if (l.inStatus == IBV_WC_SUCCESS && (f.opcode == IBV_WR_SEND || f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
    if (q->recvs.empty()) return false;  // receiver not ready: retry later
    l.inNeedsRecv = true;
    l.inRecv = q->recvs.front();
    if (f.opcode == IBV_WR_SEND) {
      ibv_sge sge = q->recvSges.front();
      if (l.inRecv.num_sge == 0 || f.length > sge.length) l.inStatus = IBV_WC_REM_INV_REQ_ERR;
      else l.inTarget = reinterpret_cast<char*>(uintptr_t(sge.addr));
    }
  }
  if (l.inStatus == IBV_WC_SUCCESS && (f.opcode == IBV_WR_RDMA_WRITE || f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
    StandinMr* m = f.length > 0 ? findMr(c, f.rkey, q->qp.pd, f.raddr, f.length, IBV_ACCESS_REMOTE_WRITE) : nullptr;
    if (!(q->access & IBV_ACCESS_REMOTE_WRITE) || (f.length > 0 && !m))
      l.inStatus = IBV_WC_REM_ACCESS_ERR;
    else
      l.inTarget = m ? hostOf(m, f.raddr) : nullptr;
  }
  if (l.inStatus != IBV_WC_SUCCESS) l.discard.resize(f.length);
  l.payloadGot = 0;
  return true;
}

void finishOp(StandinQp* q, Link& l) {
  Frame& f = l.in;
  if (l.inStatus != IBV_WC_SUCCESS) {
    sendAck(l, f.seq, l.inStatus);
    flushOut(l);
    ibv_wc_status local = l.inStatus == IBV_WC_REM_ACCESS_ERR ? IBV_WC_LOC_ACCESS_ERR : IBV_WC_LOC_QP_OP_ERR;
    if (l.inNeedsRecv) {
      pushCompletion(q->qp.recv_cq, completion(&q->qp, l.inRecv.wr_id, local, IBV_WC_RECV, 0));
      q->recvs.pop_front();
      q->recvSges.pop_front();
    }
    failQp(q, IBV_WC_WR_FLUSH_ERR);
    return;
  }
  q->expectPsn = (q->expectPsn + 1) & 0xffffff;
  if (l.inNeedsRecv) {
    ibv_wc wc = completion(&q->qp, l.inRecv.wr_id, IBV_WC_SUCCESS,
                           f.opcode == IBV_WR_SEND ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM, f.length);
    if (f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = f.imm;
    }
    q->recvs.pop_front();
    q->recvSges.pop_front();
    pushCompletion(q->qp.recv_cq, wc, (f.pad & kFrameSolicited) != 0);
  }
  sendAck(l, f.seq, IBV_WC_SUCCESS);
}

// True while the link's op header has arrived but the op is held (RNR or a delay).
bool waitingOp(const Link& l) { return l.inHeader && l.inGot == sizeof(Frame); }

// Reads what arrived on the inbound link. False: the connection ended.
bool readInbound(StandinContext* c, StandinQp* q) {
  Link& l = q->inbound;
  if (waitingOp(l)) {  // an op held or waiting for a receive: the rest waits behind it
    char b;
    return ::recv(l.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0;  // only the end of the connection ends it
  }
  for (;;) {
    if (l.inHeader) {
      ssize_t r = ::recv(l.fd, reinterpret_cast<char*>(&l.in) + l.inGot, sizeof(Frame) - l.inGot, MSG_DONTWAIT);
      if (r == 0) return false;
      if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      l.inGot += size_t(r);
      if (l.inGot < sizeof(Frame)) continue;
      if (l.in.type != kOp) return false;
      bool completes = l.in.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || l.in.opcode == IBV_WR_SEND;
      if (int ms = delayMs(); ms > 0 && completes && q->qp.qp_num % 2 == 0) {
        l.holding = true;
        l.holdUntil = Clock::now() + std::chrono::milliseconds(ms);
        counters().heldOps++;
        return true;  // retryWaiting() places it when the time comes
      }
      if (!startOp(c, q, l)) {
        l.inGot = sizeof(Frame);
        l.inHeader = true;
        return true;  // RNR: keep the header, retry when a receive is posted
      }
      l.inHeader = false;
    }
    if (l.inHeader) continue;
    if (l.payloadGot < l.in.length) {
      char* dst = (l.inStatus == IBV_WC_SUCCESS ? l.inTarget : l.discard.data()) + l.payloadGot;
      ssize_t r = ::recv(l.fd, dst, l.in.length - l.payloadGot, MSG_DONTWAIT);
      if (r == 0) return false;
      if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      l.payloadGot += size_t(r);
      if (l.payloadGot < l.in.length) continue;
    }
    finishOp(q, l);
    l.inHeader = true;
    l.inGot = 0;
    if (q->qp.state == IBV_QPS_ERR) return true;
  }
}

// RNR retry: an op whose header arrived before a receive was posted. While it waits, the sender
// hears an RNR NAK now and then, so that its transport timer does not take the wait for a cut link.
void retryWaiting(StandinContext* c, StandinQp* q) {
  Link& l = q->inbound;
  if (l.fd < 0 || !l.inHeader || l.inGot != sizeof(Frame)) return;
  if (l.holding) {
    if (Clock::now() < l.holdUntil) return;
    l.holding = false;
  }
  bool needsRecv = l.in.opcode == IBV_WR_SEND || l.in.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (needsRecv && q->recvs.empty()) {
    Clock::time_point now = Clock::now();
    if (now - l.lastRnrNak >= kRnrNakEvery) {
      l.lastRnrNak = now;
      sendAck(l, l.in.seq, IBV_WC_SUCCESS, kRnrNak);
    }
    return;
  }
  if (startOp(c, q, l)) {
    l.inHeader = false;
    if (l.in.length == 0) {
      finishOp(q, l);
      l.inHeader = true;
      l.inGot = 0;
    }
  }
}

// The sender's transport timer (see the top of this file). Caller holds the mutex.
void checkTransportTimer(StandinQp* q, Clock::time_point now) {
  if (q->pending.empty() || q->qp.state != IBV_QPS_RTS || q->attr.timeout == 0) return;
  auto attempt = std::chrono::nanoseconds(int64_t(4096) << q->attr.timeout);
  if (now - q->lastHeard > attempt * (q->attr.retry_cnt + 1)) failQp(q, IBV_WC_RETRY_EXC_ERR);
}

bool readAcks(StandinQp* q) {
  Link& l = q->outbound;
  for (;;) {
    ssize_t r = ::recv(l.fd, reinterpret_cast<char*>(&l.in) + l.inGot, sizeof(Frame) - l.inGot, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    l.inGot += size_t(r);
    if (l.inGot < sizeof(Frame)) continue;
    l.inGot = 0;
    q->lastHeard = Clock::now();
    if (l.in.type == kRnrNak && !q->pending.empty() && l.in.seq >= q->pending.front().seq) continue;
    if (l.in.type != kAck || q->pending.empty() || q->pending.front().seq != l.in.seq) return false;
    PendingSend p = q->pending.front();
    if (l.in.status != IBV_WC_SUCCESS) {
      failQp(q, ibv_wc_status(l.in.status));
      return true;
    }
    q->pending.pop_front();
    if (p.signaled) pushCompletion(q->qp.send_cq, completion(&q->qp, p.wrId, IBV_WC_SUCCESS, p.opcode, p.length));
  }
}

void attachAccepted(StandinContext* c, int fd) {
  Hello h{};
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::recv(fd, &h, sizeof h, MSG_WAITALL) != ssize_t(sizeof h) || h.magic != kHelloMagic) {
    ::close(fd);
    return;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  auto it = c->qps.find(h.destQpn);
  if (it == c->qps.end() || it->second->inbound.fd >= 0 || it->second->qp.state == IBV_QPS_RESET ||
      it->second->qp.state == IBV_QPS_ERR) {
    ::close(fd);  // no such QP: the sender's writes fail, as packets to a missing QP time out
    return;
  }
  it->second->inbound.fd = fd;
  it->second->inbound.peerMtu = h.pathMtu;
}

// One nonblocking turn of a QP's link: what arrived is read (when `read`), what is queued is
// written. Caller holds the mutex.
void serviceLink(StandinContext* c, StandinQp* q, int dir, bool read) {
  Link& l = dir == 0 ? q->outbound : q->inbound;
  if (l.fd < 0 || q->qp.state == IBV_QPS_ERR || c->portDown.load()) return;
  bool ok = true;
  if (read) ok = dir == 0 ? readAcks(q) : readInbound(c, q);
  bool progressed = false;
  if (ok && q->qp.state != IBV_QPS_ERR && l.fd >= 0) ok = flushOut(l, &progressed);
  if (progressed && dir == 0) q->lastHeard = Clock::now();
  // A broken connection is the peer gone: hardware would exhaust its retries.
  if (!ok && q->qp.state != IBV_QPS_ERR) failQp(q, IBV_WC_RETRY_EXC_ERR);
}

void progressLoop(StandinContext* c) {
  std::vector<pollfd> fds;
  std::vector<std::pair<StandinQp*, int>> owners;  // per fd after the first two: QP, 0 out / 1 in
  while (!c->stop.load()) {
    int timeoutMs = 100;
    {
      std::lock_guard<std::mutex> lock(c->mutex);
      fds.assign({{c->listenFd, POLLIN, 0}, {c->wake[0], POLLIN, 0}});
      owners.clear();
      Clock::time_point now = Clock::now();
      for (auto& [qpn, q] : c->qps) {
        if (c->portDown.load()) break;  // nothing moves through a port that is down
        retryWaiting(c, q);
        if (q->inbound.holding) timeoutMs = 1;
        checkTransportTimer(q, now);
        for (int dir = 0; dir < 2; ++dir) {
          Link& l = dir == 0 ? q->outbound : q->inbound;
          if (l.fd < 0) continue;
          // A held op's link is not read until the op is placed (else poll would spin on its data).
          short ev = dir == 1 && waitingOp(l) ? 0 : POLLIN;
          if (!l.out.empty()) ev |= POLLOUT;
          fds.push_back({l.fd, ev, 0});
          owners.emplace_back(q, dir);
        }
      }
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) <= 0) continue;
    std::lock_guard<std::mutex> lock(c->mutex);
    if (fds[1].revents & POLLIN) {
      char buf[256];
      while (::read(c->wake[0], buf, sizeof buf) > 0) {
      }
    }
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(c->listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) attachAccepted(c, fd);
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      auto [q, dir] = owners[i - 2];
      if (c->qps.count(q->qp.qp_num) == 0) continue;
      Link& l = dir == 0 ? q->outbound : q->inbound;
      if (l.fd != fds[i].fd) continue;
      serviceLink(c, q, dir, (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0);
    }
  }
}

// ---- verbs ----

int takeCompletions(StandinCq* s, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->overrun) return -1;
  int got = 0;
  while (got < n && !s->entries.empty()) {
    wc[got++] = s->entries.front();
    s->entries.pop_front();
  }
  return got;
}

// An empty CQ moves its QPs' links in the caller's thread before it answers, unless the progress
// thread is at them: a poller that spins then carries its own traffic, as it would find a NIC's
// work done, instead of waiting for the progress thread to be scheduled (each such hand-off cost
// tens of microseconds per message on a loaded host). The progress thread still carries traffic
// that nobody polls for, and so wakes completion channels.
int standinPollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  StandinCq* s = cqOf(cq);
  int got = takeCompletions(s, n, wc);
  if (got != 0) return got;
  StandinContext* c = contextOf(cq->context);
  {
    std::unique_lock<std::mutex> lock(c->mutex, std::try_to_lock);
    if (!lock.owns_lock() || c->portDown.load()) return 0;
    for (auto& [qpn, q] : c->qps) {
      if (q->qp.send_cq != cq && q->qp.recv_cq != cq) continue;
      retryWaiting(c, q);
      serviceLink(c, q, 0, true);
      serviceLink(c, q, 1, true);
    }
  }
  return takeCompletions(s, n, wc);
}

int standinReqNotify(ibv_cq* cq, int solicitedOnly) {
  StandinCq* s = cqOf(cq);
  if (!cq->channel) return EINVAL;  // no channel to deliver the event on
  std::lock_guard<std::mutex> lock(s->mutex);
  // Solicited-only does not weaken an arming for any completion that is already in place.
  if (s->armed != kArmedAll) s->armed = solicitedOnly ? kArmedSolicited : kArmedAll;
  return 0;
}

int standinPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  StandinContext* c = contextOf(qp->context);
  StandinQp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (; wr; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || wr->num_sge > 1 ||
        (wr->num_sge == 1 && !findMr(c, wr->sg_list[0].lkey, qp->pd, wr->sg_list[0].addr, wr->sg_list[0].length, IBV_ACCESS_LOCAL_WRITE))) {
      *bad = wr;
      return EINVAL;
    }
    if (qp->state == IBV_QPS_ERR) {
      pushCompletion(qp->recv_cq, completion(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0));
      continue;
    }
    q->recvs.push_back(*wr);
    q->recvSges.push_back(wr->num_sge == 1 ? wr->sg_list[0] : ibv_sge{});
  }
  wakeUp(c);
  return 0;
}

// RDMA read, between QPs of one context only (a QP connected to itself, as the GDR flush's is):
// placed at once, with the checks hardware makes (the local key's write access, the responder QP's
// and the remote key's read access). False for a read to another context, which the wire does not
// carry. Caller holds the mutex.
bool postLoopbackRead(StandinContext* c, StandinQp* q, ibv_send_wr* wr) {
  const ibv_ah_attr& ah = q->attr.ah_attr;
  uint32_t ip = 0;
  std::memcpy(&ip, ah.grh.dgid.raw + 8, 4);
  const bool here = ah.is_global ? ip == c->ip && ((ah.grh.dgid.raw[12] << 8) | ah.grh.dgid.raw[13]) == c->port : ah.dlid == c->port;
  auto target = c->qps.find(q->attr.dest_qp_num);
  if (!here || target == c->qps.end()) {
    if (trace()) fprintf(stderr, "standin: QP %u: RDMA read refused: the destination QP %u is %s\n", q->qp.qp_num, q->attr.dest_qp_num,
                         here ? "not in this context" : "in another context");
    return false;
  }
  const ibv_sge& sge = wr->sg_list[0];
  StandinMr* local = findMr(c, sge.lkey, q->qp.pd, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE);
  StandinQp* responder = target->second;
  StandinMr* remote = findMr(c, wr->wr.rdma.rkey, responder->qp.pd, wr->wr.rdma.remote_addr, sge.length, IBV_ACCESS_REMOTE_READ);
  ibv_wc_status status = IBV_WC_SUCCESS;
  if (!local) status = IBV_WC_LOC_PROT_ERR;
  else if (!(responder->access & IBV_ACCESS_REMOTE_READ) || !remote) status = IBV_WC_REM_ACCESS_ERR;
  if (status != IBV_WC_SUCCESS) {
    q->pending.push_back({0, wr->wr_id, IBV_WC_RDMA_READ, true, 0});
    failQp(q, status);
    return true;
  }
  std::memcpy(hostOf(local, sge.addr), hostOf(remote, wr->wr.rdma.remote_addr), sge.length);
  standin_note_rdma_read();
  if (wr->send_flags & IBV_SEND_SIGNALED) pushCompletion(q->qp.send_cq, completion(&q->qp, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sge.length));
  return true;
}

int standinPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  StandinContext* c = contextOf(qp->context);
  StandinQp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (; wr; wr = wr->next) {
    bool known = wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr->opcode == IBV_WR_SEND ||
                 wr->opcode == IBV_WR_RDMA_READ;
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    if (!known || wr->num_sge > 1) {
      *bad = wr;
      return EINVAL;
    }
    if (wr->opcode == IBV_WR_RDMA_READ && qp->state == IBV_QPS_RTS && wr->num_sge == 1) {
      if (!postLoopbackRead(c, q, wr)) {
        *bad = wr;
        return EINVAL;
      }
      continue;
    }
    ibv_wc_opcode opcode = wr->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
    if (qp->state == IBV_QPS_ERR) {
      pushCompletion(qp->send_cq, completion(qp, wr->wr_id, IBV_WC_WR_FLUSH_ERR, opcode, 0));
      continue;
    }
    uint32_t length = wr->num_sge == 1 ? wr->sg_list[0].length : 0;
    bool isInline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    StandinMr* source = wr->num_sge == 1 && !isInline ? findMr(c, wr->sg_list[0].lkey, qp->pd, wr->sg_list[0].addr, length, 0) : nullptr;
    if (wr->num_sge == 1 && !isInline && !source) {
      q->pending.push_back({0, wr->wr_id, opcode, true, 0});
      failQp(q, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    if (wr->opcode == IBV_WR_RDMA_WRITE) counters().plainWrites++;
    if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) counters().immWrites++;
    counters().bytesByDevice[reinterpret_cast<StandinDevice*>(qp->context->device)->index] += length;
    OutItem item;
    item.frame = Frame{};
    item.frame.type = kOp;
    item.frame.opcode = wr->opcode;
    item.frame.seq = q->nextSeq++;
    item.frame.psn = q->sendPsn;
    q->sendPsn = (q->sendPsn + 1) & 0xffffff;
    item.frame.imm = wr->imm_data;
    item.frame.pad = (wr->send_flags & IBV_SEND_SOLICITED) ? kFrameSolicited : 0;
    item.frame.raddr = wr->wr.rdma.remote_addr;
    item.frame.rkey = wr->wr.rdma.rkey;
    item.frame.length = length;
    const char* src = source ? hostOf(source, wr->sg_list[0].addr) : reinterpret_cast<const char*>(uintptr_t(length ? wr->sg_list[0].addr : 0));
    if (isInline) item.inlineData.assign(src, src + length);
    else item.payload = src;
    if (q->pending.empty()) q->lastHeard = Clock::now();  // the timer starts with the first send outstanding
    q->pending.push_back({item.frame.seq, wr->wr_id, opcode, (wr->send_flags & IBV_SEND_SIGNALED) != 0, length});
    q->outbound.out.push_back(std::move(item));
  }
  // Written now, in the caller's thread, as far as the socket takes it; the progress thread is
  // woken only for what remains (it polls the link for acknowledgements anyway).
  serviceLink(c, q, 0, false);
  if (!q->outbound.out.empty() || q->qp.state == IBV_QPS_ERR) wakeUp(c);
  return 0;
}

// The address this process's device answers on (its GIDs encode it): TUTTI_IBVERBS_STANDIN_ADDR,
// an IPv4 address or "if:<interface>" (that interface's first IPv4 address, for hosts in network
// namespaces that share one environment); unset, 127.0.0.1.
bool standinAddress(in_addr* out) {
  const char* wanted = std::getenv("TUTTI_IBVERBS_STANDIN_ADDR");
  std::string text = wanted && *wanted ? wanted : "127.0.0.1";
  if (text.rfind("if:", 0) != 0) return inet_pton(AF_INET, text.c_str(), out) == 1;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && text.compare(3, std::string::npos, i->ifa_name) == 0) {
      *out = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
      found = true;
    }
  freeifaddrs(list);
  return found;
}

// The devices live as long as the process: rdma-core keeps a device alive while a context opened
// on it exists, after the list that named it is freed.
StandinDevice* standinDevices() {
  static StandinDevice devices[2];
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 2; ++i) {
      devices[i].index = i;
      devices[i].device.node_type = IBV_NODE_CA;
      devices[i].device.transport_type = IBV_TRANSPORT_IB;
      snprintf(devices[i].device.name, sizeof devices[i].device.name, "standin_%d", i);
      snprintf(devices[i].device.dev_name, sizeof devices[i].device.dev_name, "uverbs%d", i);
    }
  });
  return devices;
}

}  // namespace

extern "C" {

// Fork support, as rdma-core keeps it for the process: ibv_fork_init succeeds (again and again)
// until a memory region has been registered without it, and fails with EINVAL after that.
std::atomic<bool> gForkInitialized{false};
std::atomic<bool> gRegisteredBeforeForkInit{false};

__attribute__((visibility("default"))) int ibv_fork_init() {
  if (gForkInitialized.load()) return 0;
  if (gRegisteredBeforeForkInit.load()) return EINVAL;
  gForkInitialized = true;
  return 0;
}

// For tests: whether ibv_fork_init has been called in this process.
extern "C" __attribute__((visibility("default"))) int tutti_standin_fork_initialized() { return gForkInitialized.load() ? 1 : 0; }

__attribute__((visibility("default"))) ibv_device** ibv_get_device_list(int* num) {
  const char* n = std::getenv("TUTTI_IBVERBS_STANDIN_DEVICES");
  int count = n ? std::atoi(n) : 1;
  if (count < 0 || count > 2) count = 1;
  auto** list = new ibv_device*[size_t(count) + 1];
  for (int i = 0; i < count; ++i) list[i] = &standinDevices()[i].device;
  list[count] = nullptr;
  if (num) *num = count;
  return list;
}

__attribute__((visibility("default"))) void ibv_free_device_list(ibv_device** list) { delete[] list; }

__attribute__((visibility("default"))) const char* ibv_get_device_name(ibv_device* device) { return device->name; }

__attribute__((visibility("default"))) ibv_context* ibv_open_device(ibv_device* device) {
  auto* c = new StandinContext;
  in_addr a{};
  if (!standinAddress(&a)) {
    delete c;
    errno = EINVAL;
    return nullptr;
  }
  c->ip = a.s_addr;
  c->listenFd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = a;
  socklen_t len = sizeof sa;
  int bound = -1;
  if (c->listenFd >= 0 && infinibandLinkLayer()) {
    // The port doubles as the LID, which must be a unicast LID (1 to 0xbfff): try ports there.
    std::random_device random;
    for (int attempt = 0; attempt < 200 && bound != 0; ++attempt) {
      sa.sin_port = htons(uint16_t(1024 + random() % (0xbfff - 1024)));
      bound = ::bind(c->listenFd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    }
  } else if (c->listenFd >= 0) {
    bound = ::bind(c->listenFd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
  if (c->listenFd < 0 || bound != 0 || ::listen(c->listenFd, 128) != 0 || getsockname(c->listenFd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
      pipe2(c->wake, O_CLOEXEC | O_NONBLOCK) != 0 || (c->ctx.async_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
    int e = errno;
    if (c->listenFd >= 0) ::close(c->listenFd);
    if (c->wake[0] >= 0) ::close(c->wake[0]), ::close(c->wake[1]);
    delete c;
    errno = e;
    return nullptr;
  }
  c->port = ntohs(sa.sin_port);
  c->ctx.device = device;
  c->ctx.ops.poll_cq = standinPollCq;
  c->ctx.ops.req_notify_cq = standinReqNotify;
  c->ctx.ops.post_send = standinPostSend;
  c->ctx.ops.post_recv = standinPostRecv;
  c->ctx.cmd_fd = -1;
  c->ctx.num_comp_vectors = 1;
  c->progress = std::thread(progressLoop, c);
  {
    std::lock_guard<std::mutex> lock(openContexts().mutex);
    openContexts().list.push_back(c);
  }
  return &c->ctx;
}

__attribute__((visibility("default"))) int ibv_close_device(ibv_context* context) {
  StandinContext* c = contextOf(context);
  {
    std::lock_guard<std::mutex> lock(openContexts().mutex);
    auto& list = openContexts().list;
    for (auto it = list.begin(); it != list.end(); ++it)
      if (*it == c) {
        list.erase(it);
        break;
      }
  }
  c->stop = true;
  wakeUp(c);
  c->progress.join();
  ::close(c->ctx.async_fd);
  ::close(c->listenFd);
  ::close(c->wake[0]);
  ::close(c->wake[1]);
  delete c;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  *attr = ibv_device_attr{};
  attr->phys_port_cnt = 1;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 4096;
  attr->max_cqe = 1 << 16;
  attr->max_mr_size = ~0ull;
  attr->max_sge = 1;
  return 0;
}

__attribute__((visibility("default"))) int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* compat) {
  // The exported symbol takes the older layout, a prefix of ibv_port_attr that the caller zeroed:
  // only fields within that prefix are written.
  ibv_port_attr* attr = reinterpret_cast<ibv_port_attr*>(compat);
  if (port != 1) return EINVAL;
  attr->state = contextOf(context)->portDown.load() ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = kGidCount;
  attr->pkey_tbl_len = 1;
  attr->lid = 0;  // Ethernet ports have no LID
  attr->active_width = 2;   // 4x
  attr->active_speed = 32;  // EDR: 25 Gb/s per lane
  if (const char* speed = std::getenv("TUTTI_IBVERBS_STANDIN_ACTIVE_SPEED")) attr->active_speed = uint8_t(std::atoi(speed));
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  if (infinibandLinkLayer()) {
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    attr->lid = contextOf(context)->port;  // a unicast LID (below 0xc000, see ibv_open_device)
  }
  return 0;
}

// GID layout (the stand-in's own): bytes 0-7 the prefix of the GID type, 8-11 the IPv4 address,
// 12-13 the context's TCP port, 15 the GID index.
__attribute__((visibility("default"))) int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  StandinContext* c = contextOf(context);
  if (port != 1 || index < 0 || index >= kGidCount) return EINVAL;
  *gid = ibv_gid{};
  if (index == 0) {
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
  }
  memcpy(gid->raw + 8, &c->ip, 4);
  gid->raw[12] = uint8_t(c->port >> 8);
  gid->raw[13] = uint8_t(c->port);
  gid->raw[15] = uint8_t(index);
  return 0;
}

__attribute__((visibility("default"))) ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = new ibv_pd{};
  pd->context = context;
  return pd;
}

__attribute__((visibility("default"))) int ibv_dealloc_pd(ibv_pd* pd) {
  StandinContext* c = contextOf(pd->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (auto& [k, m] : c->mrs)
    if (m->mr.pd == pd) return EBUSY;
  for (auto& [n, q] : c->qps)
    if (q->qp.pd == pd) return EBUSY;
  delete pd;
  return 0;
}

// The bytes at `addr`, named by work requests as `iova` (ibv_reg_mr_iova2, ibv_reg_dmabuf_mr).
ibv_mr* standin_register_region(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  // Remote write needs local write, as the verbs specification requires.
  if (!pd || (!addr && length) || ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return nullptr;
  }
  // Optional access flags (relaxed ordering): honoured and counted, or, as a library without
  // them would, refused.
  if (access & IBV_ACCESS_OPTIONAL_RANGE) {
    const char* ro = std::getenv("TUTTI_IBVERBS_STANDIN_RELAXED_ORDERING");
    if (ro && std::strcmp(ro, "0") == 0) {
      errno = EINVAL;
      return nullptr;
    }
    if (access & IBV_ACCESS_RELAXED_ORDERING) counters().relaxedOrderingMrs++;
  }
  StandinContext* c = contextOf(pd->context);
  if (!gForkInitialized.load()) gRegisteredBeforeForkInit = true;
  auto* m = new StandinMr{};
  std::lock_guard<std::mutex> lock(c->mutex);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = reinterpret_cast<void*>(uintptr_t(iova));
  m->host = static_cast<char*>(addr);
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = c->nextKey++;
  m->access = access;
  c->mrs[m->mr.lkey] = m;
  return &m->mr;
}

__attribute__((visibility("default"))) ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return standin_register_region(pd, addr, length, uint64_t(uintptr_t(addr)), access);
}

// Newer headers route ibv_reg_mr through this one.
__attribute__((visibility("default"))) ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  return standin_register_region(pd, addr, length, iova, int(access));
}

__attribute__((visibility("default"))) int ibv_dereg_mr(ibv_mr* mr) {
  StandinContext* c = contextOf(mr->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  c->mrs.erase(mr->lkey);
  standin_forget_dmabuf_mapping(mr);
  delete reinterpret_cast<StandinMr*>(mr);
  return 0;
}

__attribute__((visibility("default"))) ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int) {
  if (cqe <= 0 || (channel && channel->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* s = new StandinCq;
  s->cq.context = context;
  s->cq.cq_context = cqContext;
  s->cq.cqe = cqe;
  s->cq.channel = channel;
  if (channel) {
    std::lock_guard<std::mutex> lock(contextOf(context)->mutex);
    ++channel->refcnt;
  }
  return &s->cq;
}

__attribute__((visibility("default"))) int ibv_destroy_cq(ibv_cq* cq) {
  StandinContext* c = contextOf(cq->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (auto& [n, q] : c->qps)
    if (q->qp.send_cq == cq || q->qp.recv_cq == cq) return EBUSY;
  StandinCq* s = cqOf(cq);
  // rdma-core waits (without limit) until every completion event got is acknowledged; here that
  // wait would hang a test, so the mistake is refused instead.
  if (s->eventsReported.load() != s->eventsAcked.load()) return EBUSY;
  if (cq->channel) {
    auto* channel = reinterpret_cast<StandinChannel*>(cq->channel);
    std::lock_guard<std::mutex> events(channel->mutex);
    bool had = !channel->events.empty();
    for (auto it = channel->events.begin(); it != channel->events.end();)
      it = *it == cq ? channel->events.erase(it) : it + 1;
    if (had && channel->events.empty()) clearEventFd(channel->channel.fd);
    --cq->channel->refcnt;
  }
  delete s;
  return 0;
}

__attribute__((visibility("default"))) ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (!pd || !init || init->qp_type != IBV_QPT_RC || !init->send_cq || !init->recv_cq || init->srq ||
      init->cap.max_send_sge > 1 || init->cap.max_recv_sge > 1) {
    errno = EINVAL;
    return nullptr;
  }
  StandinContext* c = contextOf(pd->context);
  auto* q = new StandinQp;
  std::lock_guard<std::mutex> lock(c->mutex);
  q->qp.context = pd->context;
  q->qp.qp_context = init->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_num = c->nextQpn++;
  c->qps[q->qp.qp_num] = q;
  return &q->qp;
}

__attribute__((visibility("default"))) int ibv_destroy_qp(ibv_qp* qp) {
  StandinContext* c = contextOf(qp->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  StandinQp* q = qpOf(qp);
  closeLink(q->outbound);
  closeLink(q->inbound);
  c->qps.erase(qp->qp_num);
  delete q;
  return 0;
}

// The transitions of an RC QP with the attributes each one requires (IB specification, table
// "QP state transition properties"); anything missing or out of range is EINVAL, as from a driver.
__attribute__((visibility("default"))) int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  StandinContext* c = contextOf(qp->context);
  StandinQp* q = qpOf(qp);
  auto has = [&](int bits) { return (mask & bits) == bits; };
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  std::unique_lock<std::mutex> lock(c->mutex);
  ibv_qp_state from = qp->state, to = attr->qp_state;
  if (to == IBV_QPS_ERR) {
    failQp(q, IBV_WC_WR_FLUSH_ERR);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    closeLink(q->outbound);
    closeLink(q->inbound);
    q->pending.clear();
    q->recvs.clear();
    q->recvSges.clear();
    qp->state = IBV_QPS_RESET;
    return 0;
  }
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num != 1 || attr->pkey_index != 0) return EINVAL;
    q->access = int(attr->qp_access_flags);
    q->port = attr->port_num;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) return EINVAL;
    // Ethernet (RoCE): the address vector must carry a GRH with a source GID that exists, and
    // the path MTU may not exceed the port's.
    // InfiniBand: a GRH, or a destination LID.
    if (attr->ah_attr.port_num != 1) return EINVAL;
    if (!attr->ah_attr.is_global && (!infinibandLinkLayer() || attr->ah_attr.dlid == 0 || attr->ah_attr.dlid >= 0xc000)) return EINVAL;
    if (attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index >= kGidCount) return EINVAL;
    if (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096) return EINVAL;
    if (attr->ah_attr.is_global && attr->ah_attr.grh.dgid.raw[15] != attr->ah_attr.grh.sgid_index) return EINVAL;  // a GID of another type: unreachable
    q->attr.ah_attr = attr->ah_attr;
    q->attr.path_mtu = attr->path_mtu;
    q->attr.dest_qp_num = attr->dest_qp_num;
    q->expectPsn = attr->rq_psn & 0xffffff;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!has(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) return EINVAL;
    if (attr->retry_cnt > 7 || attr->rnr_retry > 7 || attr->timeout > 31) return EINVAL;
    q->sendPsn = attr->sq_psn & 0xffffff;
    // Connect the outbound direction to the context that the destination GID names.
    const uint8_t* g = q->attr.ah_attr.grh.dgid.raw;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    if (q->attr.ah_attr.is_global) {
      memcpy(&sa.sin_addr, g + 8, 4);
      sa.sin_port = htons(uint16_t((g[12] << 8) | g[13]));
    } else {  // a LID: the context listening on that port at this process's stand-in address
      memcpy(&sa.sin_addr, &c->ip, 4);
      sa.sin_port = htons(q->attr.ah_attr.dlid);
    }
    Hello h{kHelloMagic, q->attr.dest_qp_num, qp->qp_num, uint32_t(q->attr.path_mtu)};
    lock.unlock();
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    timeval tv{5, 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::send(fd, &h, sizeof h, MSG_NOSIGNAL) != ssize_t(sizeof h)) {
      int e = errno;
      if (fd >= 0) ::close(fd);
      return e ? e : EIO;  // the remote address is unreachable
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    lock.lock();
    q->outbound.fd = fd;
    q->attr.timeout = attr->timeout;
    q->attr.retry_cnt = attr->retry_cnt;
  } else {
    return EINVAL;  // no such transition
  }
  qp->state = to;
  wakeUp(c);
  return 0;
}

__attribute__((visibility("default"))) ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  auto* channel = new StandinChannel;
  channel->channel.context = context;
  channel->channel.fd = eventfd(0, EFD_CLOEXEC);
  if (channel->channel.fd < 0) {
    int e = errno;
    delete channel;
    errno = e;
    return nullptr;
  }
  return &channel->channel;
}

__attribute__((visibility("default"))) int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  {
    std::lock_guard<std::mutex> lock(contextOf(channel->context)->mutex);
    if (channel->refcnt != 0) return EBUSY;  // CQs still use it, as rdma-core refuses
  }
  ::close(channel->fd);
  delete reinterpret_cast<StandinChannel*>(channel);
  return 0;
}

// Blocks until an event arrives unless the caller made the descriptor nonblocking (then -1 with
// EAGAIN), as rdma-core's read of the channel's descriptor does.
__attribute__((visibility("default"))) int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  auto* s = reinterpret_cast<StandinChannel*>(channel);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      if (!s->events.empty()) {
        *cq = s->events.front();
        s->events.pop_front();
        if (s->events.empty()) clearEventFd(channel->fd);
        *cqContext = (*cq)->cq_context;
        cqOf(*cq)->eventsReported.fetch_add(1);
        return 0;
      }
    }
    if (fcntl(channel->fd, F_GETFL) & O_NONBLOCK) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{channel->fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

__attribute__((visibility("default"))) void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  StandinCq* s = cqOf(cq);
  uint32_t acked = s->eventsAcked.fetch_add(nevents) + nevents;
  if (acked > s->eventsReported.load()) {
    fprintf(stderr, "standin: ibv_ack_cq_events acknowledged %u events of CQ %p, %u were got\n", acked, static_cast<void*>(cq),
            s->eventsReported.load());
    abort();  // a real library's counts would be corrupt: make the bug loud
  }
}

// As ibv_get_cq_event: blocks unless async_fd was made nonblocking.
__attribute__((visibility("default"))) int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  StandinContext* c = contextOf(context);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(c->asyncMutex);
      if (!c->asyncEvents.empty()) {
        *event = c->asyncEvents.front();
        c->asyncEvents.pop_front();
        if (c->asyncEvents.empty()) clearEventFd(context->async_fd);
        std::lock_guard<std::mutex> count(openContexts().mutex);
        ++openContexts().asyncReported;
        return 0;
      }
    }
    if (fcntl(context->async_fd, F_GETFL) & O_NONBLOCK) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{context->async_fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

// The stand-in raises port events only, which name no object: acknowledgements are counted per
// process (rdma-core counts CQ, QP and SRQ events per object; port events need no count).
__attribute__((visibility("default"))) void ibv_ack_async_event(ibv_async_event*) {
  std::lock_guard<std::mutex> lock(openContexts().mutex);
  if (++openContexts().asyncAcked > openContexts().asyncReported) {
    fprintf(stderr, "standin: ibv_ack_async_event of an event nobody got\n");
    abort();
  }
}

__attribute__((visibility("default"))) const char* ibv_event_type_str(ibv_event_type event) {
  switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    default: return "unknown";
  }
}

// Test-only: takes port `port` of the device named `device` down in every context of this process
// that has it open (IBV_EVENT_PORT_ERR on each). Returns how many contexts it reached.
__attribute__((visibility("default"))) int tutti_standin_port_down(const char* device, int port) {
  if (port != 1) return 0;
  std::lock_guard<std::mutex> lock(openContexts().mutex);
  int reached = 0;
  for (StandinContext* c : openContexts().list) {
    if (std::strcmp(c->ctx.device->name, device) != 0 || c->portDown.exchange(true)) continue;
    ibv_async_event event{};
    event.element.port_num = port;
    event.event_type = IBV_EVENT_PORT_ERR;
    {
      std::lock_guard<std::mutex> events(c->asyncMutex);
      if (c->asyncEvents.empty()) signalEventFd(c->ctx.async_fd);
      c->asyncEvents.push_back(event);
    }
    wakeUp(c);
    ++reached;
  }
  return reached;
}

__attribute__((visibility("default"))) const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    default: return "unknown";
  }
}

}  // extern "C"

// For tests: what this process asked of the stand-in (see the top of the file). Any pointer may be null.
extern "C" __attribute__((visibility("default"))) void tutti_standin_counters(uint64_t* plainWrites, uint64_t* immWrites,
                                                                              uint64_t* relaxedOrderingMrs, uint64_t* heldOps) {
  if (plainWrites) *plainWrites = counters().plainWrites.load();
  if (immWrites) *immWrites = counters().immWrites.load();
  if (relaxedOrderingMrs) *relaxedOrderingMrs = counters().relaxedOrderingMrs.load();
  if (heldOps) *heldOps = counters().heldOps.load();
}

// For tests: the bytes this process posted for sending (RDMA writes and sends) through the device
// named `device` ("standin_1"); 0 for a name the stand-in does not have.
extern "C" __attribute__((visibility("default"))) uint64_t tutti_standin_device_bytes(const char* device) {
  for (int i = 0; i < 2; ++i)
    if (std::strcmp(standinDevices()[i].device.name, device) == 0) return counters().bytesByDevice[i].load();
  return 0;
}
