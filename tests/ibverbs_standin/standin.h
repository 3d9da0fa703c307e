// The stand-in's shared state: the objects behind the verbs handles and the functions its parts
// (device, memory, completion, QP, wire) call in each other. The overview is in standin_device.cpp.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

namespace __attribute__((visibility("hidden"))) tutti_standin {

  constexpr int kGidCount = 2;                  // index 0: link-local style, index 1: IPv4-mapped (RoCE v2 style)
  constexpr uint32_t kHelloMagic = 0x53544e44;  // "STND"

  // The first bytes a sending QP writes on its connection. The host fields let the receiver decide
  // whether the two ends may share memory (standin_wire_shm.cpp).
  struct Hello {
    uint32_t magic;
    uint32_t destQpn;
    uint32_t srcQpn;
    uint32_t pathMtu;
    uint32_t wantShm;  // 1: the sender made the segment `shmName` and asks for the shared-memory wire
    uint32_t reserved;
    uint64_t netns;  // the sender's network namespace (/proc/self/ns/net: device and inode)
    uint64_t netnsDev;
    char bootId[40];  // the sender's /proc/sys/kernel/random/boot_id
    char shmName[64];
  };

  // The receiver's answer to a Hello it accepted: the wire the connection carries from now on.
  enum Wire : uint32_t { kWireTcp = 1, kWireShm = 2 };
  struct HelloReply {
    uint32_t magic;
    uint32_t wire;
  };

  enum FrameType : uint32_t { kOp = 1, kAck = 2, kRnrNak = 3 };
  constexpr uint32_t kFrameSolicited = 1;  // Frame::pad of an op the sender flagged IBV_SEND_SOLICITED
  constexpr uint32_t kFrameNoData = 2;     // Frame::pad: TUTTI_IBVERBS_STANDIN_NO_DATA, no payload follows
  constexpr uint32_t kFrameSignaled = 4;   // Frame::pad of an op posted IBV_SEND_SIGNALED, and of its ACK

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
  inline char* hostOf(StandinMr * m, uint64_t addr) { return m->host + (addr - uint64_t(uintptr_t(m->mr.addr))); }

  // A completion channel's descriptor is a datagram socket bound to an abstract name (the
  // channel's id), so that the writer of a shared-memory ring in another process can wake a poller
  // asleep on it (standin_wire_shm.cpp). It is readable while `events` is not empty, and also
  // between such a wake-up (a "poke") and the reading of the ring it was for, which places the
  // completion that raises the event the poke announced.
  struct StandinChannel {
    ibv_comp_channel channel{};  // refcnt: the CQs attached (under the context's mutex)
    uint64_t id = 0;
    std::mutex mutex;
    std::deque<ibv_cq*> events;
  };
  inline StandinChannel* channelOf(ibv_comp_channel * c) { return reinterpret_cast<StandinChannel*>(c); }

  enum Arming { kDisarmed = 0, kArmedAll, kArmedSolicited };

  struct CqEntry {
    ibv_wc wc;
    bool solicited;  // a solicited receive or a failed request: what a solicited-only arming waits for
  };

  struct StandinCq {
    ibv_cq cq{};
    std::mutex mutex;
    std::deque<CqEntry> entries;
    size_t solicitedEntries = 0;  // of `entries`, those with `solicited`
    bool overrun = false;
    std::atomic<Arming> armed{kDisarmed};  // written under `mutex`; read without it by the wire
    std::atomic<uint32_t> eventsReported{0}, eventsAcked{0};
    // When a poll_cq last looked at this CQ (steady clock, ns): while a poller spins on a QP's CQ and
    // has not armed it to sleep, the progress thread asks its shared-memory peers for no doorbells.
    std::atomic<int64_t> lastPollNs{0};
  };

  struct OutItem {
    Frame frame;
    std::vector<char> inlineData;
    const char* payload = nullptr;
    size_t sent = 0;  // of sizeof(Frame) + length
  };

  struct ShmRing;

  struct Link {             // one connection of a QP: outbound (ops out, acks in) or inbound (ops in, acks out)
    int fd = -1;            // TCP; on the shared-memory wire it carries only doorbells and the end of the peer
    ShmRing* tx = nullptr;  // shared-memory wire: the ring this end writes, and the one it reads
    ShmRing* rx = nullptr;
    void* shmBase = nullptr;
    size_t shmBytes = 0;
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
    bool noData = false;  // TUTTI_IBVERBS_STANDIN_NO_DATA=1 when the context opened
  };

  // The open contexts of this process, so that a test can take a device's port down in all of them
  // (a port is the device's, not one context's).
  struct OpenContexts {
    std::mutex mutex;
    std::vector<StandinContext*> list;
    uint64_t asyncReported = 0, asyncAcked = 0;  // port events name no context: counted per process
  };
  OpenContexts& openContexts();

  inline StandinContext* contextOf(ibv_context * c) { return reinterpret_cast<StandinContext*>(c); }
  inline StandinQp* qpOf(ibv_qp * q) { return reinterpret_cast<StandinQp*>(q); }
  inline StandinCq* cqOf(ibv_cq * c) { return reinterpret_cast<StandinCq*>(c); }

  bool trace();
  bool infinibandLinkLayer();
  int delayMs();

  // What the process asked of the stand-in, for tests to read through tutti_standin_counters(): the
  // backend owns the contexts, so these are the process's (atomic; only ever incremented).
  struct Counters {
    std::atomic<uint64_t> plainWrites{0}, immWrites{0}, relaxedOrderingMrs{0}, heldOps{0};
    std::atomic<uint64_t> tcpOps{0}, shmOps{0};  // operations posted, by the wire that carried them
    // Shared-memory wire: a ring's reader woken through its completion channel, or its doorbell.
    std::atomic<uint64_t> channelPokes{0}, doorbells{0};
    std::atomic<uint64_t> bytesByDevice[2] = {};  // posted for sending, by StandinDevice::index
  };
  Counters& counters();

  // Fork support, as rdma-core keeps it for the process (standin_device.cpp).
  extern std::atomic<bool> gForkInitialized;
  extern std::atomic<bool> gRegisteredBeforeForkInit;

  // standin_completion.cpp
  void signalEventFd(int fd);
  void clearEventFd(int fd);
  void pokeChannel(uint64_t id);  // makes the channel `id` (of any process in this network namespace) readable
  // Takes the pokes on `channel` unless an event waits there (then the event's taker does).
  void quietChannel(ibv_comp_channel * channel);
  void pushCompletion(ibv_cq * cq, const ibv_wc& wc, bool solicited = false);
  ibv_wc completion(ibv_qp * qp, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t bytes);

  // standin_memory.cpp: the MR `key` names, if it lies in `pd`, covers [addr, addr + length) and
  // grants `needAccess`; else nullptr. Caller holds the context's mutex.
  StandinMr* findMr(StandinContext * c, uint32_t key, ibv_pd * pd, uint64_t addr, uint64_t length, int needAccess);

  // standin_qp.cpp
  void closeLink(Link & l);
  void failQp(StandinQp * q, ibv_wc_status firstStatus);
  int standinPostRecv(ibv_qp * qp, ibv_recv_wr * wr, ibv_recv_wr * *bad);
  int standinPostSend(ibv_qp * qp, ibv_send_wr * wr, ibv_send_wr * *bad);
  // RDMA read between QPs of one context (the GDR flush's loopback); false for any other read.
  bool postLoopbackRead(StandinContext * c, StandinQp * q, ibv_send_wr * wr);

  // standin_completion.cpp
  int standinPollCq(ibv_cq * cq, int n, ibv_wc* wc);
  int standinReqNotify(ibv_cq * cq, int solicitedOnly);

  // standin_wire_shm.cpp: the shared-memory wire.
  enum WireChoice { kChooseAuto, kChooseTcp, kChooseShm };
  WireChoice wireChoice();  // TUTTI_IBVERBS_STANDIN_WIRE
  void fillHostIdentity(Hello * h);
  bool sameHost(const Hello& h);
  bool addressIsLocal(in_addr a);  // loopback, or an address of an interface in this network namespace  // the Hello's
                                   // sender shares this process's boot and network namespace
  bool createSegment(Link & l, char* name, size_t nameBytes);  // sender: a segment for `l`; false: errno
  bool attachSegment(Link & l, const char* name);              // receiver: the sender's segment
  void unlinkSegment(const char* name);
  void detachSegment(Link & l);
  // Byte-stream I/O on a link, whichever its wire: as send/recv with MSG_DONTWAIT (-1 with EAGAIN
  // when nothing moves; recv's 0, the end of the connection, only on TCP).
  ssize_t linkSend(Link & l, const void* data, size_t n);
  ssize_t linkRecv(Link & l, void* data, size_t n);
  // What the reader of a shared-memory ring asks its writer for (bits of the ring's `wake`).
  enum WakeBits : uint32_t {
    kWakeBell = 1,          // a doorbell byte on the TCP socket: the progress thread sleeps in poll
    kWakeOnCompletion = 2,  // a poke to the reader's completion channel for a frame that completes a
                            // request at the reader: its CQ is armed for any completion
    kWakeOnSolicited = 4,   // the same for a solicited or failed completion only (solicited-only arming)
  };
  constexpr uint32_t kWakeOnChannel = kWakeOnCompletion | kWakeOnSolicited;
  // The reader of `l`'s ring is going to sleep in poll: true if the ring already holds bytes.
  bool armDoorbell(Link & l);
  void disarmDoorbell(Link & l);
  // The reader's CQ for this ring is armed on channel `channel`: true if the ring already holds bytes.
  bool armChannelWake(Link & l, uint64_t channel, bool solicitedOnly);
  void disarmChannelWake(Link & l);
  // True once per poke the ring's writer sent (after the poke went).
  bool takePoke(Link & l);
  // The writer of `l`'s ring wrote frames: wakes the reader as it asked. `completes`: the
  // kWakeOn* bits of the frames written (what they complete at the reader).
  void wakeReader(Link & l, uint32_t completes);
  // Reads the doorbells that came on a shared-memory link's socket: false when the peer is gone.
  bool drainDoorbells(Link & l);

  // standin_wire.cpp
  void wakeUp(StandinContext * c);
  bool waitingOp(const Link& l);
  // The CQ that the frames read from a QP's link complete requests on: acknowledgements on the
  // outbound link (dir 0) complete sends, ops on the inbound link (dir 1) complete receives.
  inline ibv_cq* cqFedBy(StandinQp * q, int dir) { return dir == 0 ? q->qp.send_cq : q->qp.recv_cq; }
  // The pokes of q's rings taken, its links serviced, and the rings' channel wakes set from the
  // arming of the CQs they feed. True when a ring holds bytes after the arming.
  bool serviceForPoller(StandinContext * c, StandinQp * q);
  // The arming of `cq` was used: the rings that feed it ask for no more pokes. Caller holds mutex.
  void dropChannelWakes(StandinContext * c, ibv_cq * cq);
  bool flushOut(Link & l, bool* progressed = nullptr);
  void retryWaiting(StandinContext * c, StandinQp * q);
  void serviceLink(StandinContext * c, StandinQp * q, int dir, bool read);
  void progressLoop(StandinContext * c);

}  // namespace tutti_standin

#define STANDIN_EXPORT __attribute__((visibility("default")))
