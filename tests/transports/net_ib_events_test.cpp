// Tests of completion channels and async events through the software verbs stand-in: a channel's
// descriptor wakes once per arming (solicited-only arming as verbs define it), events are counted
// and acknowledged, channels and CQs in use are not destroyed, the backend arms a queue before
// sleeping and takes its event before arming again; and a port taken down fails the IB
// backend's comms through it with an error naming the device, the port, the event and the peer.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/common/env_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/ib/ib_device.h"
#include "transports/net/ib/ib_queue_pair.h"
#include "transports/net/ib/ib_verbs.h"
#include "transports/net/net.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;

using Standin = tutti_test::IbStandinEnv;

bool readable(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeoutMs) == 1 && (p.revents & POLLIN);
}

// Two RC QPs of the stand-in wired to each other, the receiving one's CQ on a completion channel.
struct ChannelPair {
  std::shared_ptr<ib::IbVerbs> v = ib::loadIbVerbs();
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* sendCq = nullptr;
  ibv_cq* recvCq = nullptr;
  ibv_qp* a = nullptr;  // sends
  ibv_qp* b = nullptr;  // receives
  int cqContext = 0;

  ChannelPair() {
    int count = 0;
    ibv_device** list = v->getDeviceList(&count);
    REQUIRE(count >= 1);
    ctx = v->openDevice(list[0]);
    v->freeDeviceList(list);
    REQUIRE(ctx);
    pd = v->allocPd(ctx);
    channel = v->createCompChannel(ctx);
    REQUIRE(channel);
    sendCq = v->createCq(ctx, 16, nullptr, nullptr, 0);
    recvCq = v->createCq(ctx, 16, &cqContext, channel, 0);
    REQUIRE(recvCq);
    a = makeQp(sendCq);
    b = makeQp(recvCq);
    ibv_gid gid{};
    REQUIRE(v->queryGid(ctx, 1, 1, &gid) == 0);
    connect(a, b->qp_num, gid);
    connect(b, a->qp_num, gid);
  }
  ~ChannelPair() {
    v->destroyQp(a);
    v->destroyQp(b);
    v->destroyCq(sendCq);
    v->destroyCq(recvCq);
    v->destroyCompChannel(channel);
    v->deallocPd(pd);
    v->closeDevice(ctx);
  }
  ibv_qp* makeQp(ibv_cq* cq) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 8;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    ibv_qp* qp = v->createQp(pd, &init);
    REQUIRE(qp);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    REQUIRE(v->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    return qp;
  }
  void connect(ibv_qp* qp, uint32_t remote, const ibv_gid& gid) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = remote;
    attr.ah_attr.port_num = 1;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 1;
    REQUIRE(v->modifyQp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    REQUIRE(v->modifyQp(qp, &attr,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  }
  // A zero-length write with immediate from a to b, consuming a receive posted on b.
  void writeWithImm(uint32_t imm, bool solicited) {
    ibv_recv_wr rwr{};
    rwr.wr_id = imm;
    ibv_recv_wr* badRecv = nullptr;
    REQUIRE(ib::IbVerbs::postRecv(b, &rwr, &badRecv) == 0);
    ibv_send_wr wr{};
    wr.wr_id = imm;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED | (solicited ? IBV_SEND_SOLICITED : 0);
    wr.imm_data = imm;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ib::IbVerbs::postSend(a, &wr, &bad) == 0);
  }
  // Waits (bounded) for the receive completion of the write carrying `imm`.
  void awaitReceive(uint32_t imm) {
    ibv_wc wc{};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int n = 0;
    while (n == 0 && std::chrono::steady_clock::now() < deadline) n = ib::IbVerbs::pollCq(recvCq, 1, &wc);
    REQUIRE(n == 1);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.imm_data == imm);
  }
};

TEST_CASE("net/ib: a completion channel wakes once per arming, with the CQ and its context", "[net][ib][events]") {
  Standin standin;
  ChannelPair p;
  CHECK(p.recvCq->channel == p.channel);
  // Unarmed: a completion arrives but the descriptor stays quiet.
  p.writeWithImm(1, false);
  p.awaitReceive(1);
  CHECK_FALSE(readable(p.channel->fd, 0));
  // Armed: the next completion makes it readable, once.
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 0) == 0);
  CHECK_FALSE(readable(p.channel->fd, 0));  // arming alone raises nothing
  p.writeWithImm(2, false);
  REQUIRE(readable(p.channel->fd, 10000));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  CHECK(cq == p.recvCq);
  CHECK(context == &p.cqContext);
  CHECK_FALSE(readable(p.channel->fd, 0));  // the one event was taken
  p.awaitReceive(2);
  p.writeWithImm(3, false);  // the arming was used: no event for this one
  p.awaitReceive(3);
  CHECK_FALSE(readable(p.channel->fd, 0));
  // A CQ with an event not acknowledged, and a channel with a CQ on it, are not destroyed.
  CHECK(p.v->destroyCompChannel(p.channel) == EBUSY);
  ibv_qp* b = p.b;
  p.b = nullptr;
  REQUIRE(p.v->destroyQp(b) == 0);
  CHECK(p.v->destroyCq(p.recvCq) == EBUSY);
  p.v->ackCqEvents(p.recvCq, 1);
  CHECK(p.v->destroyCq(p.recvCq) == 0);
  p.recvCq = p.v->createCq(p.ctx, 4, nullptr, nullptr, 0);  // for the destructor
  p.b = p.makeQp(p.recvCq);
}

TEST_CASE("net/ib: solicited-only arming wakes on a solicited completion, not on others", "[net][ib][events]") {
  Standin standin;
  ChannelPair p;
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 1) == 0);
  p.writeWithImm(10, false);
  p.awaitReceive(10);
  CHECK_FALSE(readable(p.channel->fd, 0));  // not solicited: no event, still armed
  p.writeWithImm(11, true);
  REQUIRE(readable(p.channel->fd, 10000));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  CHECK(cq == p.recvCq);
  p.v->ackCqEvents(cq, 1);
  p.awaitReceive(11);
  // Without a channel there is nothing to notify.
  CHECK(ib::IbVerbs::reqNotifyCq(p.sendCq, 0) == EINVAL);
  // Nonblocking with nothing there: EAGAIN rather than a wait.
  int flags = fcntl(p.channel->fd, F_GETFL);
  REQUIRE(fcntl(p.channel->fd, F_SETFL, flags | O_NONBLOCK) == 0);
  errno = 0;
  CHECK(p.v->getCqEvent(p.channel, &cq, &context) == -1);
  CHECK(errno == EAGAIN);
}

// The stand-in's wake counters (tutti_standin_wakes): channel pokes and doorbells of this process.
uint64_t channelPokes() {
  void* library = dlopen(TUTTI_TEST_IBVERBS_STANDIN, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library);
  auto wakes = reinterpret_cast<void (*)(uint64_t*, uint64_t*)>(dlsym(library, "tutti_standin_wakes"));
  REQUIRE(wakes);
  uint64_t pokes = 0;
  wakes(&pokes, nullptr);
  dlclose(library);
  return pokes;
}

TEST_CASE(
    "net/ib: on the shared-memory wire the writer wakes an armed CQ's channel itself, once, for what the arming "
    "reports",
    "[net][ib][events]") {
  ScopedEnv wire("TUTTI_IBVERBS_STANDIN_WIRE", "shm");
  Standin standin;
  ChannelPair p;
  p.writeWithImm(1, false);  // unarmed: a completion, no event and no poke
  p.awaitReceive(1);
  uint64_t pokes = channelPokes();
  CHECK_FALSE(readable(p.channel->fd, 0));
  // Armed for any completion: the write's poke wakes the channel; the event is there to take
  // (the ring is read by whoever looks first: this thread's get_cq_event, or the progress thread).
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 0) == 0);
  p.writeWithImm(2, false);
  CHECK(channelPokes() == pokes + 1);
  REQUIRE(readable(p.channel->fd, 10000));
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  CHECK(cq == p.recvCq);
  p.v->ackCqEvents(cq, 1);
  CHECK_FALSE(readable(p.channel->fd, 0));
  p.awaitReceive(2);
  // The arming was used: the next write pokes nobody.
  p.writeWithImm(3, false);
  p.awaitReceive(3);
  CHECK(channelPokes() == pokes + 1);
  CHECK_FALSE(readable(p.channel->fd, 0));
  // Solicited-only: a write that is not solicited pokes nobody, a solicited one does.
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 1) == 0);
  p.writeWithImm(4, false);
  p.awaitReceive(4);
  CHECK(channelPokes() == pokes + 1);
  CHECK_FALSE(readable(p.channel->fd, 0));
  p.writeWithImm(5, true);
  CHECK(channelPokes() == pokes + 2);
  REQUIRE(readable(p.channel->fd, 10000));
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  CHECK(cq == p.recvCq);
  p.v->ackCqEvents(cq, 1);
  p.awaitReceive(5);
  CHECK_FALSE(readable(p.channel->fd, 0));
}

// An arming with completions already queued raises its event at once: a poller that arms, polls
// again and finds one takes its event, so an event is never owed that does not come.
TEST_CASE("net/ib: arming a CQ that holds a completion raises the event at once", "[net][ib][events]") {
  Standin standin;
  ChannelPair p;
  // b in the error state: a receive posted now completes (flushed) at once, in this thread.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  REQUIRE(p.v->modifyQp(p.b, &attr, IBV_QP_STATE) == 0);
  ibv_recv_wr rwr{};
  rwr.wr_id = 30;
  ibv_recv_wr* bad = nullptr;
  REQUIRE(ib::IbVerbs::postRecv(p.b, &rwr, &bad) == 0);
  CHECK_FALSE(readable(p.channel->fd, 0));  // not armed: no event
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 0) == 0);
  REQUIRE(readable(p.channel->fd, 0));  // the arming found the completion queued
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  CHECK(cq == p.recvCq);
  p.v->ackCqEvents(cq, 1);
  CHECK_FALSE(readable(p.channel->fd, 0));
  ibv_wc wc{};
  REQUIRE(ib::IbVerbs::pollCq(p.recvCq, 1, &wc) == 1);
  CHECK(wc.wr_id == 30);
  CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
  // Nothing queued: the arming raises nothing; a failed completion then wakes even a
  // solicited-only arming.
  REQUIRE(ib::IbVerbs::reqNotifyCq(p.recvCq, 1) == 0);
  CHECK_FALSE(readable(p.channel->fd, 0));
  rwr.wr_id = 31;
  REQUIRE(ib::IbVerbs::postRecv(p.b, &rwr, &bad) == 0);
  REQUIRE(readable(p.channel->fd, 0));
  REQUIRE(p.v->getCqEvent(p.channel, &cq, &context) == 0);
  p.v->ackCqEvents(cq, 1);
  REQUIRE(ib::IbVerbs::pollCq(p.recvCq, 1, &wc) == 1);
  CHECK(wc.wr_id == 31);
}

TEST_CASE("net/ib: the backend arms a queue before sleeping, takes its event, and arms it again", "[net][ib][events]") {
  Standin standin;
  auto verbs = ib::loadIbVerbs();
  int count = 0;
  ibv_device** list = verbs->getDeviceList(&count);
  REQUIRE(count >= 1);
  auto device = std::make_shared<ib::IbDevice>(verbs, list[0], 1);
  verbs->freeDeviceList(list);
  device->chooseGid();
  ib::IbQueuePair a(device, "peer-b", 4), b(device, "peer-a", 4);
  a.connectTo(b.localInfo());
  b.connectTo(a.localInfo());
  ibv_wc wc[4];
  CHECK(b.armForSleep());        // armed now: the caller must poll once more
  CHECK_FALSE(b.armForSleep());  // still armed, nothing to take
  CHECK(b.poll(wc, 4, "test") == 0);
  CHECK_FALSE(readable(b.descriptor(), 0));
  for (uint32_t imm : {7u, 8u}) {
    ibv_recv_wr rwr{};
    rwr.wr_id = imm;
    b.postRecv(&rwr, "test");
    ibv_send_wr wr{};
    wr.wr_id = imm;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = imm;
    a.postSend(&wr, "test");  // unsignaled: a's queue stays empty
    // The armed queue wakes its descriptor for the completion; then the poll sees the arming used.
    REQUIRE(readable(b.descriptor(), 10000));
    int n = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (n == 0 && std::chrono::steady_clock::now() < deadline) n = b.poll(wc, 4, "test");
    REQUIRE(n == 1);
    CHECK(wc[0].imm_data == imm);
    CHECK(b.armForSleep());  // takes the event (the descriptor goes quiet) and arms again
    CHECK_FALSE(readable(b.descriptor(), 0));
    CHECK_FALSE(b.armForSleep());
  }
}

// The stand-in's test-only switch that takes a device's port down in this process.
int takePortDown(const char* device) {
  auto portDown = tutti_test::loadedStandinSymbol<int (*)(const char*, int)>("tutti_standin_port_down");
  REQUIRE(portDown);
  int reached = portDown(device, 1);
  return reached;
}

TEST_CASE("net/ib: a port going down fails the comms through it, naming the device, port, event and peer",
          "[net][ib][events][faults]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  std::vector<char> out(100, 'x'), in(100);
  REQUIRE(tutti_test::exchangeOverNet(pair, out, in) == 100);  // the connection works first
  NetRequest* r = pair.recv->irecv(in.data(), in.size(), 0, {});
  REQUIRE(r);
  REQUIRE(takePortDown("standin_0") >= 1);
  std::optional<Error> sendError;
  std::optional<Error> recvError = tutti_test::firstErrorWithin([&] { pair.recv->test(r, nullptr); });
  REQUIRE(recvError);
  std::string message = recvError->what();
  INFO(message);
  CHECK(recvError->code() == ErrorCode::System);
  CHECK(message.find("irecv") != std::string::npos);
  CHECK(message.find("standin_0:1") != std::string::npos);
  CHECK(message.find("port 1 went down") != std::string::npos);
  CHECK(message.find("IBV_EVENT_PORT_ERR") != std::string::npos);
  CHECK(message.find("port error") != std::string::npos);  // ibv_event_type_str's words
  CHECK(message.find("127.0.0.1:") != std::string::npos);  // the peer
  // The sending side is on the same (stand-in) device: its next operation fails the same way.
  try {
    NetRequest* s = pair.send->isend(out.data(), out.size(), 0, {});
    if (s) pair.send->test(s, nullptr);
  } catch (const Error& e) {
    sendError = e;
  }
  REQUIRE(sendError);
  CHECK(std::string(sendError->what()).find("isend") != std::string::npos);
  CHECK(std::string(sendError->what()).find("IBV_EVENT_PORT_ERR") != std::string::npos);
}

}  // namespace
}  // namespace tutti::transport::net
