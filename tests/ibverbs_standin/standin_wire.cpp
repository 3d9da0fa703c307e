// The stand-in's wire: the frames that carry a QP's operations and acknowledgements to its peer over
// TCP, the receiver's checks, the transport timer and the progress thread.
#include "standin.h"

namespace tutti_standin {

void wakeUp(StandinContext* c) {
  char b = 1;
  (void)!write(c->wake[1], &b, 1);
}

// ---- the progress thread: nonblocking I/O on every link ----

// What a frame completes at its reader, as kWakeOn* bits (see wakeReader).
uint32_t completesAtReader(const Frame& f) {
  if (f.type == kOp) {
    if (f.opcode != IBV_WR_SEND && f.opcode != IBV_WR_RDMA_WRITE_WITH_IMM) return 0;  // a receive's completion
    return kWakeOnCompletion | ((f.pad & kFrameSolicited) ? kWakeOnSolicited : 0u);
  }
  if (f.type == kAck && f.status != IBV_WC_SUCCESS) return kWakeOnChannel;  // the send fails: an error completion
  if (f.type == kAck && (f.pad & kFrameSignaled)) return kWakeOnCompletion;
  return 0;  // an unsignaled send's acknowledgement, an RNR NAK
}

// Writes what the link's queue holds; false when the connection broke. *progressed: some bytes went.
bool flushOut(Link& l, bool* progressed) {
  uint32_t completes = 0;
  bool wrote = false;
  struct WakeOnExit {  // the reader hears of what was written, however this returns
    Link& l;
    const bool& wrote;
    const uint32_t& completes;
    ~WakeOnExit() {
      if (wrote) wakeReader(l, completes);
    }
  } wakeOnExit{l, wrote, completes};
  while (!l.out.empty()) {
    OutItem& item = l.out.front();
    bool payload = item.frame.type == kOp && !(item.frame.pad & kFrameNoData);
    size_t total = sizeof(Frame) + (payload ? item.frame.length : 0);
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
      ssize_t w = linkSend(l, src, n);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
        return false;
      }
      item.sent += size_t(w);
      wrote = wrote || w > 0;
      if (progressed && w > 0) *progressed = true;
    }
    completes |= completesAtReader(item.frame);
    l.out.pop_front();
  }
  return true;
}

void sendAck(Link& l, uint64_t seq, uint32_t status, FrameType type = kAck, uint32_t pad = 0) {
  OutItem a;
  a.frame = Frame{};
  a.frame.type = type;
  a.frame.seq = seq;
  a.frame.status = status;
  a.frame.pad = pad;
  l.out.push_back(std::move(a));
}

// Decides where an arriving op's payload goes, checking what hardware checks. Caller holds mutex.
// Returns false when the op must wait for a receive to be posted (RNR).
bool startOp(StandinContext* c, StandinQp* q, Link& l) {
  Frame& f = l.in;
  l.inStatus = IBV_WC_SUCCESS;
  l.inTarget = nullptr;
  l.inNeedsRecv = false;
  if (q->qp.state != IBV_QPS_RTR && q->qp.state != IBV_QPS_RTS)
    l.inStatus = IBV_WC_REM_INV_REQ_ERR;
  else if (l.peerMtu != q->attr.path_mtu)
    l.inStatus = IBV_WC_REM_INV_REQ_ERR;  // MTU mismatch: packets dropped
  else if (f.psn != q->expectPsn)
    l.inStatus = IBV_WC_RETRY_EXC_ERR;  // sequence error
  if (l.inStatus == IBV_WC_SUCCESS && (f.opcode == IBV_WR_SEND || f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
    if (q->recvs.empty()) return false;  // receiver not ready: retry later
    l.inNeedsRecv = true;
    l.inRecv = q->recvs.front();
    if (f.opcode == IBV_WR_SEND) {
      ibv_sge sge = q->recvSges.front();
      if (l.inRecv.num_sge == 0 || f.length > sge.length)
        l.inStatus = IBV_WC_REM_INV_REQ_ERR;
      else
        l.inTarget = reinterpret_cast<char*>(uintptr_t(sge.addr));
    }
  }
  if (l.inStatus == IBV_WC_SUCCESS && (f.opcode == IBV_WR_RDMA_WRITE || f.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
    StandinMr* m = f.length > 0 ? findMr(c, f.rkey, q->qp.pd, f.raddr, f.length, IBV_ACCESS_REMOTE_WRITE) : nullptr;
    if (!(q->access & IBV_ACCESS_REMOTE_WRITE) || (f.length > 0 && !m))
      l.inStatus = IBV_WC_REM_ACCESS_ERR;
    else
      l.inTarget = m ? hostOf(m, f.raddr) : nullptr;
  }
  bool payload = !(f.pad & kFrameNoData);
  if (l.inStatus != IBV_WC_SUCCESS && payload) l.discard.resize(f.length);
  l.payloadGot = payload ? 0 : f.length;
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
  sendAck(l, f.seq, IBV_WC_SUCCESS, kAck, f.pad & kFrameSignaled);
}

// True while the link's op header has arrived but the op is held (RNR or a delay).
bool waitingOp(const Link& l) { return l.inHeader && l.inGot == sizeof(Frame); }

// Reads what arrived on the inbound link. False: the connection ended.
bool readInbound(StandinContext* c, StandinQp* q) {
  Link& l = q->inbound;
  if (waitingOp(l)) {       // an op held or waiting for a receive: the rest waits behind it
    if (l.rx) return true;  // shared memory: the progress thread watches the socket for the end
    char b;
    return ::recv(l.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0;  // only the end of the connection ends it
  }
  for (;;) {
    if (l.inHeader) {
      ssize_t r = linkRecv(l, reinterpret_cast<char*>(&l.in) + l.inGot, sizeof(Frame) - l.inGot);
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
      ssize_t r = linkRecv(l, dst, l.in.length - l.payloadGot);
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
    if (l.payloadGot == l.in.length) {  // nothing (more) to read: no payload, or none on the wire
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
    ssize_t r = linkRecv(l, reinterpret_cast<char*>(&l.in) + l.inGot, sizeof(Frame) - l.inGot);
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
  Link& l = it->second->inbound;
  h.shmName[sizeof h.shmName - 1] = '\0';
  bool shm = h.wantShm == 1 && wireChoice() != kChooseTcp && sameHost(h) && attachSegment(l, h.shmName);
  if (!shm) detachSegment(l);  // a segment that was found but is not the stand-in's
  HelloReply reply{kHelloMagic, shm ? kWireShm : kWireTcp};
  if (h.wantShm == 1 &&
      ::send(fd, &reply, sizeof reply, MSG_NOSIGNAL) != ssize_t(sizeof reply)) {  // a fresh socket takes 8 bytes
    detachSegment(l);
    ::close(fd);
    return;
  }
  if (trace())
    fprintf(stderr, "standin: QP %u accepts QP %u on the %s wire\n", h.destQpn, h.srcQpn,
            shm ? "shared-memory" : "TCP");
  l.fd = fd;
  l.peerMtu = h.pathMtu;
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

constexpr int64_t kPollersActiveNs = 500 * 1000;

// Whether a poll_cq runs on one of the QP's CQs: polled within kPollersActiveNs. Armed or not:
// a poller that armed and sleeps is poked by the rings' writers for what completes there, and
// polls again within its slice. (Counting an armed CQ as unpolled put the progress thread on
// doorbells for every frame whenever the proxy had armed before a sleep, and then the workers'
// polls and the progress thread took turns at the context's lock: on a loaded host IB's 8-byte
// ping-pong fell from 5 us to 120-160 us per message in some runs.)
bool polledNow(ibv_cq* cq, int64_t nowNs) {
  StandinCq* s = cqOf(cq);
  int64_t since = nowNs - s->lastPollNs.load(std::memory_order_relaxed);
  return since >= 0 && since < kPollersActiveNs;
}

bool serviceForPoller(StandinContext* c, StandinQp* q) {
  // Pokes first: a poke taken is one whose frame the service below reads.
  for (int dir = 0; dir < 2; ++dir) {
    Link& l = dir == 0 ? q->outbound : q->inbound;
    if (l.rx && takePoke(l)) quietChannel(cqFedBy(q, dir)->channel);
  }
  retryWaiting(c, q);
  serviceLink(c, q, 0, true);
  serviceLink(c, q, 1, true);
  bool pending = false;
  for (int dir = 0; dir < 2; ++dir) {
    Link& l = dir == 0 ? q->outbound : q->inbound;
    if (!l.rx || l.fd < 0) continue;
    StandinCq* s = cqOf(cqFedBy(q, dir));
    Arming a = s->armed.load();
    if (a == kDisarmed || !s->cq.channel)
      disarmChannelWake(l);
    else
      pending = armChannelWake(l, channelOf(s->cq.channel)->id, a == kArmedSolicited) || pending;
  }
  return pending;
}

void dropChannelWakes(StandinContext* c, ibv_cq* cq) {
  for (auto& [qpn, q] : c->qps)
    for (int dir = 0; dir < 2; ++dir) {
      Link& l = dir == 0 ? q->outbound : q->inbound;
      if (l.rx && cqFedBy(q, dir) == cq) disarmChannelWake(l);
    }
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
      // A poll_cq that ran within the last stretch will run again and carry its QPs' shared-memory
      // traffic: the progress thread then looks at the rings each millisecond without asking for
      // doorbells. Once the pollers stop (or sleep on a completion channel), it asks for doorbells
      // and sleeps until one comes.
      int64_t nowNs = now.time_since_epoch().count();
      for (auto& [qpn, q] : c->qps) {
        if (c->portDown.load()) break;  // nothing moves through a port that is down
        bool shm = q->outbound.rx || q->inbound.rx;
        // Shared memory: the rings now (with the channel wakes of the CQs that are armed), the
        // socket for doorbells and the peer's end.
        if (shm && serviceForPoller(c, q))
          timeoutMs = 0;  // bytes came in between: another turn at once
        else
          retryWaiting(c, q);
        if (q->inbound.holding) timeoutMs = 1;
        checkTransportTimer(q, now);
        bool pollersActive = shm && (polledNow(q->qp.send_cq, nowNs) ||
                                     (q->qp.recv_cq != q->qp.send_cq && polledNow(q->qp.recv_cq, nowNs)));
        for (int dir = 0; dir < 2; ++dir) {
          Link& l = dir == 0 ? q->outbound : q->inbound;
          if (l.fd < 0) continue;
          short ev;
          if (l.rx) {
            if (q->qp.state == IBV_QPS_ERR || l.fd < 0) continue;
            if (pollersActive) {  // pollers carry the traffic (a full ring rings its bell when emptied)
              disarmDoorbell(l);
              timeoutMs = std::min(timeoutMs, 1);
            } else if (armDoorbell(l)) {
              timeoutMs = 0;  // bytes came in between: another turn at once
            }
            ev = POLLIN;
          } else {
            // A held op's link is not read until the op is placed (else poll would spin on its data).
            ev = dir == 1 && waitingOp(l) ? 0 : POLLIN;
            if (!l.out.empty()) ev |= POLLOUT;
          }
          fds.push_back({l.fd, ev, 0});
          owners.emplace_back(q, dir);
        }
      }
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) <= 0) continue;
    std::lock_guard<std::mutex> lock(c->mutex);
    if (fds[1].revents & POLLIN) {
      char buf[256];
      while (::read(c->wake[0], buf, sizeof buf) == ssize_t(sizeof buf)) {  // a short read took them all
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
      if (l.rx && fds[i].revents != 0 && !drainDoorbells(l)) {
        // The peer is gone; what it wrote before it closed (an error's acknowledgement, say) is
        // read first, on both of the QP's links, as TCP delivers a stream's bytes before its end.
        serviceLink(c, q, 0, true);
        serviceLink(c, q, 1, true);
        if (q->qp.state != IBV_QPS_ERR && !c->portDown.load()) failQp(q, IBV_WC_RETRY_EXC_ERR);
        continue;
      }
      serviceLink(c, q, dir, (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0);
    }
  }
}

}  // namespace tutti_standin
