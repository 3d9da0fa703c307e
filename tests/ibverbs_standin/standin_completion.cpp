// The stand-in's completion queues and completion channels: completions, arming and events.
#include "standin.h"

namespace tutti_standin {

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
void pushCompletion(ibv_cq* cq, const ibv_wc& wc, bool solicited) {
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
  s->lastPollNs.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
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
  wakeUp(contextOf(cq->context));  // its poller is going to sleep: the progress thread takes over
  return 0;
}

}  // namespace tutti_standin

using namespace tutti_standin;

extern "C" {

STANDIN_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int) {
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

STANDIN_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
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

STANDIN_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
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

STANDIN_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
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
STANDIN_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
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

STANDIN_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  StandinCq* s = cqOf(cq);
  uint32_t acked = s->eventsAcked.fetch_add(nevents) + nevents;
  if (acked > s->eventsReported.load()) {
    fprintf(stderr, "standin: ibv_ack_cq_events acknowledged %u events of CQ %p, %u were got\n", acked, static_cast<void*>(cq),
            s->eventsReported.load());
    abort();  // a real library's counts would be corrupt: make the bug loud
  }
}

}  // extern "C"
