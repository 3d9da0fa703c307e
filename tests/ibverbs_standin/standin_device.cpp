// A strict software stand-in for libibverbs (loaded by the IB net backend through TUTTI_IBVERBS_LIB):
// one RoCE-like device and port, PDs, MRs with key / bounds / access checks, CQs, RC QPs with the
// RESET -> INIT -> RTR -> RTS state machine, RDMA write (with or without immediate) and send/recv,
// carried between processes through shared memory where they share a host and a network namespace,
// else over TCP to the address that the GID encodes (standin_wire_shm.cpp says how it decides).
//
// Why strict: the backend has run only here, so what hardware refuses must be refused here too
// (missing modify_qp attributes, a GID index that does not exist, an MTU beyond the port's, a
// key without remote-write access, a PSN that does not match) and errors flush the queues.
//
// Limits, on purpose: one scatter/gather entry per work request, no SRQ, no atomics, RDMA read
// only between QPs of one context (the GDR flush's loopback), RNR waits without limit (rnr_retry 7). The port is
// Ethernet (RoCE: addresses come from GIDs) unless TUTTI_IBVERBS_STANDIN_LINK_LAYER=ib, which makes it InfiniBand: the
// LID is the context's TCP port and QPs without a GRH reach the LID at this process's stand-in address (one host).
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
// Completion channels have a real pollable descriptor (a datagram socket) that becomes readable when a
// completion arrives on a CQ armed with ibv_req_notify_cq (solicited-only arming: the next
// solicited receive or any error completion), one event per arming, as verbs define it; an arming
// with such a completion already queued raises its event at once. On the shared-memory wire the
// writer of a frame that completes a request on an armed CQ wakes that channel itself, and the
// woken poller reads the frame (standin_wire_shm.cpp); tutti_standin_wakes() counts those wakes. Async
// events come on the context's async_fd; tutti_standin_port_down() (exported for tests)
// takes a device's port down: IBV_EVENT_PORT_ERR is raised and its links stop moving bytes (the
// peers' QPs exhaust their retries by the transport timer).
//
// Wire (one TCP connection per direction of a QP pair, opened at RTS by the sending QP):
// a Hello naming the destination QP, then Frames; the receiving side answers each OP with an ACK,
// and an op that waits for a receive to be posted with RNR NAKs now and then. On the
// shared-memory wire the same frames go through two rings beside that connection.
// TUTTI_IBVERBS_STANDIN_WIRE=tcp|shm picks the wire (default: shared memory where possible);
// tutti_standin_wire_ops() counts the operations each wire carried.
//
// For the per-message overhead benchmark only: TUTTI_IBVERBS_STANDIN_NO_DATA=1 (read when a
// device opens) moves no payload of a write with immediate or a send: each keeps its length, its
// checks, its acknowledgement and its completions, but the receiver's memory is left as it was.
// Plain writes still move their bytes: the stand-in cannot tell data from control there, and the
// backend's clear-to-send entries, which the peer reads, are plain writes.
//
// The transport timer, as hardware runs it: a QP with sends outstanding that hears nothing from its
// peer (no ACK, no RNR NAK, no byte of its own accepted by the link) for (retry_cnt + 1) times
// 4.096 us * 2^timeout fails them with IBV_WC_RETRY_EXC_ERR; timeout 0 waits forever. That is how a
// cut link (no broken connection, only silence) ends a transfer.
//
// Files: standin_device.cpp (this one: devices, contexts, ports, GIDs, async events, test switches),
// standin_memory.cpp (PDs, MRs), standin_completion.cpp (CQs, completion channels),
// standin_qp.cpp (QPs, posting), standin_wire.cpp (the frames between QPs, the progress thread),
// standin_wire_shm.cpp (the shared-memory wire), standin.h (shared state).
#include "standin.h"

namespace tutti_standin {

OpenContexts& openContexts() {
  static OpenContexts contexts;
  return contexts;
}

bool trace() { return std::getenv("TUTTI_IBVERBS_STANDIN_TRACE") != nullptr; }

bool infinibandLinkLayer() {
  const char* l = std::getenv("TUTTI_IBVERBS_STANDIN_LINK_LAYER");
  return l && std::strcmp(l, "ib") == 0;
}

int delayMs() {
  const char* d = std::getenv("TUTTI_IBVERBS_STANDIN_DELAY_QP_MS");
  return d ? std::atoi(d) : 0;
}

Counters& counters() {
  static Counters c;
  return c;
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

std::atomic<bool> gForkInitialized{false};
std::atomic<bool> gRegisteredBeforeForkInit{false};

}  // namespace tutti_standin

using namespace tutti_standin;

extern "C" {

// Fork support, as rdma-core keeps it for the process: ibv_fork_init succeeds (again and again)
// until a memory region has been registered without it, and fails with EINVAL after that.
STANDIN_EXPORT int ibv_fork_init() {
  if (gForkInitialized.load()) return 0;
  if (gRegisteredBeforeForkInit.load()) return EINVAL;
  gForkInitialized = true;
  return 0;
}

// For tests: whether ibv_fork_init has been called in this process.
STANDIN_EXPORT int tutti_standin_fork_initialized() { return gForkInitialized.load() ? 1 : 0; }

STANDIN_EXPORT ibv_device** ibv_get_device_list(int* num) {
  const char* n = std::getenv("TUTTI_IBVERBS_STANDIN_DEVICES");
  int count = n ? std::atoi(n) : 1;
  if (count < 0 || count > 2) count = 1;
  auto** list = new ibv_device*[size_t(count) + 1];
  for (int i = 0; i < count; ++i) list[i] = &standinDevices()[i].device;
  list[count] = nullptr;
  if (num) *num = count;
  return list;
}

STANDIN_EXPORT void ibv_free_device_list(ibv_device** list) { delete[] list; }

STANDIN_EXPORT const char* ibv_get_device_name(ibv_device* device) { return device->name; }

STANDIN_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
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
  if (c->listenFd < 0 || bound != 0 || ::listen(c->listenFd, 128) != 0 ||
      getsockname(c->listenFd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 ||
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
  const char* noData = std::getenv("TUTTI_IBVERBS_STANDIN_NO_DATA");
  c->noData = noData && std::strcmp(noData, "1") == 0;
  c->ctx.ops.poll_cq = standinPollCq;
  c->ctx.ops.req_notify_cq = standinReqNotify;
  c->ctx.ops.post_send = standinPostSend;
  c->ctx.ops.post_recv = standinPostRecv;
  c->ctx.cmd_fd = -1;
  c->ctx.num_comp_vectors = 1;
  c->progress = std::thread([c] { progressLoop(c); });
  {
    std::lock_guard<std::mutex> lock(openContexts().mutex);
    openContexts().list.push_back(c);
  }
  return &c->ctx;
}

STANDIN_EXPORT int ibv_close_device(ibv_context* context) {
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

STANDIN_EXPORT int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  *attr = ibv_device_attr{};
  attr->phys_port_cnt = 1;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 4096;
  attr->max_cqe = 1 << 16;
  attr->max_mr_size = ~0ull;
  attr->max_sge = 1;
  return 0;
}

STANDIN_EXPORT int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* compat) {
  // The exported symbol takes the older layout, a prefix of ibv_port_attr that the caller zeroed:
  // only fields within that prefix are written.
  ibv_port_attr* attr = reinterpret_cast<ibv_port_attr*>(compat);
  if (port != 1) return EINVAL;
  attr->state = contextOf(context)->portDown.load() ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = kGidCount;
  attr->pkey_tbl_len = 1;
  attr->lid = 0;            // Ethernet ports have no LID
  attr->active_width = 2;   // 4x
  attr->active_speed = 32;  // EDR: 25 Gb/s per lane
  if (const char* speed = std::getenv("TUTTI_IBVERBS_STANDIN_ACTIVE_SPEED"))
    attr->active_speed = uint8_t(std::atoi(speed));
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
  if (infinibandLinkLayer()) {
    attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
    attr->lid = contextOf(context)->port;  // a unicast LID (below 0xc000, see ibv_open_device)
  }
  return 0;
}

// GID layout (the stand-in's own): bytes 0-7 the prefix of the GID type, 8-11 the IPv4 address,
// 12-13 the context's TCP port, 15 the GID index.
STANDIN_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
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

// As ibv_get_cq_event: blocks unless async_fd was made nonblocking.
STANDIN_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
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
STANDIN_EXPORT void ibv_ack_async_event(ibv_async_event*) {
  std::lock_guard<std::mutex> lock(openContexts().mutex);
  if (++openContexts().asyncAcked > openContexts().asyncReported) {
    fprintf(stderr, "standin: ibv_ack_async_event of an event nobody got\n");
    abort();
  }
}

STANDIN_EXPORT const char* ibv_event_type_str(ibv_event_type event) {
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
STANDIN_EXPORT int tutti_standin_port_down(const char* device, int port) {
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

STANDIN_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
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

// For tests: what this process asked of the stand-in (see the top of the file). Any pointer may be null.
STANDIN_EXPORT void tutti_standin_counters(uint64_t* plainWrites, uint64_t* immWrites, uint64_t* relaxedOrderingMrs,
                                           uint64_t* heldOps) {
  if (plainWrites) *plainWrites = counters().plainWrites.load();
  if (immWrites) *immWrites = counters().immWrites.load();
  if (relaxedOrderingMrs) *relaxedOrderingMrs = counters().relaxedOrderingMrs.load();
  if (heldOps) *heldOps = counters().heldOps.load();
}

// For tests: the operations this process posted, by the wire that carried them (TCP or shared
// memory), so that a test can tell a wire that fell back to TCP from the one it asked for.
STANDIN_EXPORT void tutti_standin_wire_ops(uint64_t* tcpOps, uint64_t* shmOps) {
  if (tcpOps) *tcpOps = counters().tcpOps.load();
  if (shmOps) *shmOps = counters().shmOps.load();
}

// For tests: how the readers of this process's shared-memory rings were woken for what was
// written: pokes of their completion channels, and doorbells to their progress threads.
STANDIN_EXPORT void tutti_standin_wakes(uint64_t* channelPokes, uint64_t* doorbells) {
  if (channelPokes) *channelPokes = counters().channelPokes.load();
  if (doorbells) *doorbells = counters().doorbells.load();
}

}  // extern "C"

// For tests: the bytes this process posted for sending (RDMA writes and sends) through the device
// named `device` ("standin_1"); 0 for a name the stand-in does not have.
extern "C" STANDIN_EXPORT uint64_t tutti_standin_device_bytes(const char* device) {
  for (int i = 0; i < 2; ++i)
    if (std::strcmp(standinDevices()[i].device.name, device) == 0) return counters().bytesByDevice[i].load();
  return 0;
}
