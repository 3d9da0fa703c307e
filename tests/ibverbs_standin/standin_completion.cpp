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

namespace {

socklen_t channelAddress(uint64_t id, sockaddr_un* a) {
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;  // sun_path[0] == 0: an abstract name, gone with the socket
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "tutti-standin-channel-%016llx",
                   static_cast<unsigned long long>(id));
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + size_t(n));
}

// Takes every datagram queued on a channel's socket (one call for up to 16).
void clearChannel(int fd) {
  constexpr int kBatch = 16;
  char bytes[kBatch];
  iovec iov[kBatch];
  mmsghdr messages[kBatch];
  for (;;) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = iovec{&bytes[i], 1};
      messages[i] = mmsghdr{};
      messages[i].msg_hdr.msg_iov = &iov[i];
      messages[i].msg_hdr.msg_iovlen = 1;
    }
    if (::recvmmsg(fd, messages, kBatch, MSG_DONTWAIT, nullptr) < kBatch) return;
  }
}

}  // namespace

void pokeChannel(uint64_t id) {
  static const int sender = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a;
  socklen_t length = channelAddress(id, &a);
  char poke = 'p';
  // A full queue is a readable descriptor already; a channel gone has nobody to wake.
  (void)!::sendto(sender, &poke, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&a), length);
}

void quietChannel(ibv_comp_channel* channel) {
  if (!channel) return;
  StandinChannel* ch = channelOf(channel);
  std::lock_guard<std::mutex> lock(ch->mutex);
  if (ch->events.empty()) clearChannel(channel->fd);
}

// A completion event for an armed CQ: one per arming, on the CQ's channel.
void raiseCqEvent(StandinCq* s) {
  StandinChannel* channel = channelOf(s->cq.channel);
  std::lock_guard<std::mutex> lock(channel->mutex);
  if (channel->events.empty()) pokeChannel(channel->id);
  channel->events.push_back(&s->cq);
}

// `solicited`: a receive completion of a request the sender flagged IBV_SEND_SOLICITED. Caller
// holds the context's mutex.
void pushCompletion(ibv_cq* cq, const ibv_wc& wc, bool solicited) {
  StandinCq* s = cqOf(cq);
  bool raised = false;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    bool wakes = solicited || wc.status != IBV_WC_SUCCESS;
    if (int(s->entries.size()) >= s->cq.cqe)
      s->overrun = true;
    else {
      s->entries.push_back({wc, wakes});
      s->solicitedEntries += wakes ? 1 : 0;
    }
    if (s->armed == kArmedAll || (s->armed == kArmedSolicited && wakes)) {
      s->armed = kDisarmed;
      raiseCqEvent(s);
      raised = true;
    }
  }
  if (raised) dropChannelWakes(contextOf(cq->context), cq);
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
    wc[got++] = s->entries.front().wc;
    s->solicitedEntries -= s->entries.front().solicited ? 1 : 0;
    s->entries.pop_front();
  }
  return got;
}

// Services the QPs that `wanted` picks for a poller: see serviceForPoller. A ring that still
// holds bytes after its channel wake was set gets one more turn. Caller holds the context's mutex.
template <typename Wanted>
void serviceQps(StandinContext* c, Wanted&& wanted) {
  for (int turn = 0; turn < 2; ++turn) {
    bool pending = false;
    for (auto& [qpn, q] : c->qps)
      if (wanted(q)) pending = serviceForPoller(c, q) || pending;
    if (!pending) return;
  }
}

// An empty CQ moves its QPs' links in the caller's thread before it answers, unless the progress
// thread is at them: a poller that spins then carries its own traffic, as it would find a NIC's
// work done, instead of waiting for the progress thread to be scheduled (each such hand-off cost
// tens of microseconds per message on a loaded host). A poller that armed its CQ and sleeps on
// the channel is woken by the ring's writer (standin_wire_shm.cpp) and reads the ring here too.
// The progress thread still carries traffic that nobody polls for.
int standinPollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  StandinCq* s = cqOf(cq);
  int got = takeCompletions(s, n, wc);
  if (got != 0) return got;
  StandinContext* c = contextOf(cq->context);
  s->lastPollNs.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  {
    std::unique_lock<std::mutex> lock(c->mutex, std::try_to_lock);
    if (!lock.owns_lock()) {
      // The progress thread (or another poller) is at the links. A poller that is going to sleep
      // on its channel must not miss what came meanwhile: the progress thread takes another turn.
      if (s->armed.load() != kDisarmed) wakeUp(c);
      return 0;
    }
    if (c->portDown.load()) return 0;
    serviceQps(c, [cq](StandinQp* q) { return q->qp.send_cq == cq || q->qp.recv_cq == cq; });
  }
  return takeCompletions(s, n, wc);
}

// Arming with completions already in the queue raises the event at once (for a solicited-only
// arming, when one of them is solicited or failed), as an HCA that arms against the consumer
// index does: so every completion polled after the arming has its event, and a poller that counts
// the armings it saw used takes exactly the events that are there. Otherwise the rings that feed
// the CQ ask their writers to poke the channel.
int standinReqNotify(ibv_cq* cq, int solicitedOnly) {
  StandinCq* s = cqOf(cq);
  if (!cq->channel) return EINVAL;  // no channel to deliver the event on
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    // Solicited-only does not weaken an arming for any completion that is already in place.
    if (s->armed != kArmedAll) s->armed = solicitedOnly ? kArmedSolicited : kArmedAll;
    if (!s->entries.empty() && (s->armed == kArmedAll || s->solicitedEntries > 0)) {
      s->armed = kDisarmed;
      raiseCqEvent(s);
      return 0;
    }
  }
  StandinContext* c = contextOf(cq->context);
  std::lock_guard<std::mutex> lock(c->mutex);  // once per sleep, and the wakes are set on return
  for (auto& [qpn, q] : c->qps)
    for (int dir = 0; dir < 2; ++dir) {
      Link& l = dir == 0 ? q->outbound : q->inbound;
      if (l.rx && l.fd >= 0 && cqFedBy(q, dir) == cq)
        armChannelWake(l, channelOf(cq->channel)->id, s->armed.load() == kArmedSolicited);
    }
  return 0;  // bytes already in a ring are the caller's next poll's (a poll follows an arming)
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
    StandinChannel* channel = channelOf(cq->channel);
    std::lock_guard<std::mutex> events(channel->mutex);
    bool had = !channel->events.empty();
    for (auto it = channel->events.begin(); it != channel->events.end();)
      it = *it == cq ? channel->events.erase(it) : it + 1;
    if (had && channel->events.empty()) clearChannel(channel->channel.fd);
    --cq->channel->refcnt;
  }
  delete s;
  return 0;
}

STANDIN_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  auto* channel = new StandinChannel;
  channel->channel.context = context;
  channel->channel.fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int e = errno;
  std::random_device random;
  for (int attempt = 0; channel->channel.fd >= 0 && attempt < 8; ++attempt) {
    channel->id = (uint64_t(random()) << 32) | random();
    sockaddr_un a;
    socklen_t length = channelAddress(channel->id, &a);
    if (::bind(channel->channel.fd, reinterpret_cast<sockaddr*>(&a), length) == 0) return &channel->channel;
    e = errno;
    if (e != EADDRINUSE) break;
  }
  if (channel->channel.fd >= 0) ::close(channel->channel.fd);
  delete channel;
  errno = e;
  return nullptr;
}

STANDIN_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  {
    std::lock_guard<std::mutex> lock(contextOf(channel->context)->mutex);
    if (channel->refcnt != 0) return EBUSY;  // CQs still use it, as rdma-core refuses
  }
  ::close(channel->fd);
  delete channelOf(channel);
  return 0;
}

// Takes the channel's first event, if it has one.
bool takeEvent(StandinChannel* s, ibv_cq** cq, void** cqContext) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->events.empty()) return false;
  *cq = s->events.front();
  s->events.pop_front();
  if (s->events.empty()) clearChannel(s->channel.fd);
  *cqContext = (*cq)->cq_context;
  cqOf(*cq)->eventsReported.fetch_add(1);
  return true;
}

// Blocks until an event arrives unless the caller made the descriptor nonblocking (then -1 with
// EAGAIN), as rdma-core's read of the channel's descriptor does. A poke on the channel (the
// writer of a ring that feeds one of its CQs) has the rings read here, which raises its event.
STANDIN_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  StandinChannel* s = channelOf(channel);
  StandinContext* c = contextOf(channel->context);
  for (;;) {
    if (takeEvent(s, cq, cqContext)) return 0;
    quietChannel(channel);
    {
      std::lock_guard<std::mutex> lock(c->mutex);
      if (!c->portDown.load())
        serviceQps(c, [channel](StandinQp* q) {
          return q->qp.send_cq->channel == channel || q->qp.recv_cq->channel == channel;
        });
    }
    if (takeEvent(s, cq, cqContext)) return 0;
    char b;  // waits as the descriptor's mode says, and takes nothing
    if (::recv(channel->fd, &b, 1, MSG_PEEK) < 0 && errno != EINTR) return -1;  // EAGAIN when nonblocking
  }
}

STANDIN_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  StandinCq* s = cqOf(cq);
  uint32_t acked = s->eventsAcked.fetch_add(nevents) + nevents;
  if (acked > s->eventsReported.load()) {
    fprintf(stderr, "standin: ibv_ack_cq_events acknowledged %u events of CQ %p, %u were got\n", acked,
            static_cast<void*>(cq), s->eventsReported.load());
    abort();  // a real library's counts would be corrupt: make the bug loud
  }
}

}  // extern "C"
