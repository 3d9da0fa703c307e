// The stand-in's RC queue pairs: the state machine, posting, and the error state that flushes them.
#include "standin.h"

namespace tutti_standin {

void closeLink(Link& l) {
  if (l.fd >= 0) ::close(l.fd);
  l.fd = -1;
  detachSegment(l);
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
  for (const ibv_recv_wr& r : q->recvs)
    pushCompletion(q->qp.recv_cq, completion(&q->qp, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0));
  q->recvs.clear();
  q->recvSges.clear();
  closeLink(q->outbound);
  closeLink(q->inbound);
}

int standinPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  StandinContext* c = contextOf(qp->context);
  StandinQp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (; wr; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || wr->num_sge > 1 ||
        (wr->num_sge == 1 &&
         !findMr(c, wr->sg_list[0].lkey, qp->pd, wr->sg_list[0].addr, wr->sg_list[0].length, IBV_ACCESS_LOCAL_WRITE))) {
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
  // An op that waited for a receive (RNR) is placed by the progress thread; nothing else waits on one.
  if (waitingOp(q->inbound)) wakeUp(c);
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
  const bool here =
      ah.is_global ? ip == c->ip && ((ah.grh.dgid.raw[12] << 8) | ah.grh.dgid.raw[13]) == c->port : ah.dlid == c->port;
  auto target = c->qps.find(q->attr.dest_qp_num);
  if (!here || target == c->qps.end()) {
    if (trace())
      fprintf(stderr, "standin: QP %u: RDMA read refused: the destination QP %u is %s\n", q->qp.qp_num,
              q->attr.dest_qp_num, here ? "not in this context" : "in another context");
    return false;
  }
  const ibv_sge& sge = wr->sg_list[0];
  StandinMr* local = findMr(c, sge.lkey, q->qp.pd, sge.addr, sge.length, IBV_ACCESS_LOCAL_WRITE);
  StandinQp* responder = target->second;
  StandinMr* remote =
      findMr(c, wr->wr.rdma.rkey, responder->qp.pd, wr->wr.rdma.remote_addr, sge.length, IBV_ACCESS_REMOTE_READ);
  ibv_wc_status status = IBV_WC_SUCCESS;
  if (!local)
    status = IBV_WC_LOC_PROT_ERR;
  else if (!(responder->access & IBV_ACCESS_REMOTE_READ) || !remote)
    status = IBV_WC_REM_ACCESS_ERR;
  if (status != IBV_WC_SUCCESS) {
    q->pending.push_back({0, wr->wr_id, IBV_WC_RDMA_READ, true, 0});
    failQp(q, status);
    return true;
  }
  std::memcpy(hostOf(local, sge.addr), hostOf(remote, wr->wr.rdma.remote_addr), sge.length);
  standin_note_rdma_read();
  if (wr->send_flags & IBV_SEND_SIGNALED)
    pushCompletion(q->qp.send_cq, completion(&q->qp, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sge.length));
  return true;
}

int standinPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  StandinContext* c = contextOf(qp->context);
  StandinQp* q = qpOf(qp);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (; wr; wr = wr->next) {
    bool known = wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                 wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_RDMA_READ;
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
    StandinMr* source = wr->num_sge == 1 && !isInline
                            ? findMr(c, wr->sg_list[0].lkey, qp->pd, wr->sg_list[0].addr, length, 0)
                            : nullptr;
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
    if (wr->send_flags & IBV_SEND_SIGNALED) item.frame.pad |= kFrameSignaled;
    // Without data movement (the benchmark's mode), plain writes still carry their bytes: they are
    // the control path (the backend's clear-to-send entries), which the peer reads.
    bool noPayload = c->noData && wr->opcode != IBV_WR_RDMA_WRITE;
    if (noPayload) item.frame.pad |= kFrameNoData;
    (q->outbound.tx ? counters().shmOps : counters().tcpOps)++;
    item.frame.raddr = wr->wr.rdma.remote_addr;
    item.frame.rkey = wr->wr.rdma.rkey;
    item.frame.length = length;
    const char* src = source ? hostOf(source, wr->sg_list[0].addr)
                             : reinterpret_cast<const char*>(uintptr_t(length ? wr->sg_list[0].addr : 0));
    if (isInline && !noPayload)
      item.inlineData.assign(src, src + length);
    else
      item.payload = src;
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

}  // namespace tutti_standin

using namespace tutti_standin;

extern "C" {

STANDIN_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
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

STANDIN_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
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
STANDIN_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
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
    if (!has(IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num != 1 || attr->pkey_index != 0)
      return EINVAL;
    q->access = int(attr->qp_access_flags);
    q->port = attr->port_num;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!has(IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    // Ethernet (RoCE): the address vector must carry a GRH with a source GID that exists, and
    // the path MTU may not exceed the port's.
    // InfiniBand: a GRH, or a destination LID.
    if (attr->ah_attr.port_num != 1) return EINVAL;
    if (!attr->ah_attr.is_global && (!infinibandLinkLayer() || attr->ah_attr.dlid == 0 || attr->ah_attr.dlid >= 0xc000))
      return EINVAL;
    if (attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index >= kGidCount) return EINVAL;
    if (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096) return EINVAL;
    if (attr->ah_attr.is_global && attr->ah_attr.grh.dgid.raw[15] != attr->ah_attr.grh.sgid_index)
      return EINVAL;  // a GID of another type: unreachable
    q->attr.ah_attr = attr->ah_attr;
    q->attr.path_mtu = attr->path_mtu;
    q->attr.dest_qp_num = attr->dest_qp_num;
    q->expectPsn = attr->rq_psn & 0xffffff;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!has(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
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
    Hello h{};
    h.magic = kHelloMagic;
    h.destQpn = q->attr.dest_qp_num;
    h.srcQpn = qp->qp_num;
    h.pathMtu = uint32_t(q->attr.path_mtu);
    lock.unlock();
    // The shared-memory wire is offered with a segment made for it; the receiver decides.
    WireChoice choice = wireChoice();
    Link shm;
    // Only an address of this network namespace can be a peer in it: elsewhere the connection is
    // what it always was, a Hello and frames, with no answer to wait for.
    if (choice != kChooseTcp && (choice == kChooseShm || addressIsLocal(sa.sin_addr))) {
      fillHostIdentity(&h);
      if (createSegment(shm, h.shmName, sizeof h.shmName))
        h.wantShm = 1;
      else if (choice == kChooseShm)
        return errno ? errno : EIO;
    }
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    timeval tv{5, 0};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::send(fd, &h, sizeof h, MSG_NOSIGNAL) != ssize_t(sizeof h)) {
      int e = errno;
      if (fd >= 0) ::close(fd);
      if (h.wantShm) unlinkSegment(h.shmName);
      detachSegment(shm);
      return e ? e : EIO;  // the remote address is unreachable
    }
    // No answer: the receiver has no such QP and closed the connection; the writes fail later, as
    // packets to a missing QP time out.
    HelloReply reply{};
    bool answered = h.wantShm && ::recv(fd, &reply, sizeof reply, MSG_WAITALL) == ssize_t(sizeof reply) &&
                    reply.magic == kHelloMagic;
    if (h.wantShm) unlinkSegment(h.shmName);  // mapped by both ends now, or by none
    if (!answered || reply.wire != kWireShm) detachSegment(shm);
    if (answered && reply.wire != kWireShm && choice == kChooseShm) {
      ::close(fd);
      if (trace()) fprintf(stderr, "standin: QP %u: the receiver refused the shared-memory wire\n", qp->qp_num);
      return EPROTONOSUPPORT;  // TUTTI_IBVERBS_STANDIN_WIRE=shm and the ends cannot share memory
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    lock.lock();
    q->outbound.fd = fd;
    q->outbound.shmBase = shm.shmBase;
    q->outbound.shmBytes = shm.shmBytes;
    q->outbound.tx = shm.tx;
    q->outbound.rx = shm.rx;
    q->attr.timeout = attr->timeout;
    q->attr.retry_cnt = attr->retry_cnt;
  } else {
    return EINVAL;  // no such transition
  }
  qp->state = to;
  wakeUp(c);
  return 0;
}

}  // extern "C"
