// Tests of the IB net backend through the software verbs stand-in (tests/ibverbs_standin): messages
// of many sizes, many in flight, the length check, a closed peer, device choice (NCCL_IB_HCA,
// NCCL_IB_DISABLE, a missing library), and misconfigurations that hardware refuses (a GID index that
// does not exist, memory without remote-write access, missing QP attributes, an MTU mismatch).
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/common/env_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/ib/ib_device.h"
#include "transports/net/ib/ib_hca_filter.h"
#include "transports/net/ib/ib_queue_pair.h"
#include "transports/net/ib/ib_verbs.h"
#include "transports/net/net.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;

// Every test runs the backend on the stand-in rather than on whatever libibverbs finds.
using Standin = tutti_test::IbStandinEnv;

using tutti_test::errorOf;

TEST_CASE("net/ib: opening the backend asks the verbs library for fork support before any registration", "[net][ib]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto forkInitialized = tutti_test::loadedStandinSymbol<int (*)()>("tutti_standin_fork_initialized");
  REQUIRE(forkInitialized != nullptr);
  // The stand-in, like rdma-core, refuses fork support once memory was registered without it, so
  // this also shows the call came before the first registration (that of the pair below).
  auto pair = tutti_test::connectNetPair(*backend);
  CHECK(forkInitialized() == 1);
}

TEST_CASE("net/ib: messages of many sizes arrive intact through the verbs stand-in", "[net][ib]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  REQUIRE(std::string(backend->name()) == "IB");
  REQUIRE(backend->deviceCount() == 1);
  CHECK(backend->properties(0).name == "standin_0:1");
  CHECK(backend->properties(0).speedMbps == 100000);  // 4x EDR, as the stand-in's port reports
  auto pair = tutti_test::connectNetPair(*backend);
  uint32_t seed = 1;
  for (size_t bytes : {size_t(0), size_t(1), size_t(7), size_t(4096), size_t(65537), size_t(3) << 20}) {
    std::vector<char> out = tutti_test::randomBytes(bytes, seed++);
    std::vector<char> in(bytes + 100, 0);
    CHECK(tutti_test::exchangeOverNet(pair, out, in) == bytes);
    CHECK(std::memcmp(in.data(), out.data(), bytes) == 0);
    CHECK(std::all_of(in.begin() + long(bytes), in.end(), [](char c) { return c == 0; }));  // nothing beyond
  }
  SECTION("with registrations made up front") {
    std::vector<char> out = tutti_test::randomBytes(10000, 99), in(10000);
    MemoryRegistration sr = pair.send->registerMemory(out.data(), out.size());
    MemoryRegistration rr = pair.recv->registerMemory(in.data(), in.size());
    CHECK(tutti_test::exchangeOverNet(pair, out, in, sr, rr) == out.size());
    CHECK(in == out);
    pair.send->deregisterMemory(sr);
    pair.recv->deregisterMemory(rr);
  }
}

TEST_CASE("net/ib: many messages in flight arrive in order, each intact", "[net][ib]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  constexpr int kMessages = 200;
  std::vector<std::vector<char>> out, in;
  for (int i = 0; i < kMessages; ++i) {
    out.push_back(tutti_test::randomBytes(size_t(i * 37 % 5000), uint32_t(i)));
    in.emplace_back(5000);
  }
  std::vector<NetRequest*> sends(kMessages, nullptr), recvs(kMessages, nullptr);
  std::vector<size_t> got(kMessages, SIZE_MAX);
  int posted = 0, received = 0, sendsPosted = 0, sent = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (received < kMessages || sent < kMessages) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("200 messages did not complete within 20 s");
    if (sendsPosted < kMessages) {
      if (NetRequest* s = pair.send->isend(out[size_t(sendsPosted)].data(), out[size_t(sendsPosted)].size(), 0, {}))
        sends[size_t(sendsPosted++)] = s;
    }
    if (posted < kMessages) {
      if (NetRequest* r = pair.recv->irecv(in[size_t(posted)].data(), 5000, 0, {})) recvs[size_t(posted++)] = r;
    }
    if (sent < sendsPosted && pair.send->test(sends[size_t(sent)], nullptr)) ++sent;
    if (received < posted && pair.recv->test(recvs[size_t(received)], &got[size_t(received)])) ++received;
  }
  for (int i = 0; i < kMessages; ++i) {
    REQUIRE(got[size_t(i)] == out[size_t(i)].size());
    CHECK(std::memcmp(in[size_t(i)].data(), out[size_t(i)].data(), got[size_t(i)]) == 0);
  }
}

TEST_CASE("net/ib: a message longer than the posted receive is a Remote error naming both sizes", "[net][ib]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  std::vector<char> out(5000, 'a'), in(100);
  NetRequest* s = pair.send->isend(out.data(), out.size(), 0, {});
  NetRequest* r = pair.recv->irecv(in.data(), in.size(), 0, {});
  REQUIRE(s);
  REQUIRE(r);
  std::optional<Error> error = tutti_test::firstErrorWithin([&] {
    pair.recv->test(r, nullptr);
    pair.send->test(s, nullptr);
  });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Remote);
  CHECK(std::string(error->what()).find("5000 bytes") != std::string::npos);
  CHECK(std::string(error->what()).find("(100 bytes)") != std::string::npos);
}

TEST_CASE("net/ib: a closed peer is a Remote error that says the connection closed", "[net][ib]") {
  Standin standin;
  auto backend = openNetBackend("IB", "");
  auto pair = tutti_test::connectNetPair(*backend);
  std::vector<char> out(10, 'x'), in(100);
  REQUIRE(tutti_test::exchangeOverNet(pair, out, in) == 10);  // the connection works first
  NetRequest* r = pair.recv->irecv(in.data(), in.size(), 0, {});
  pair.send.reset();
  std::optional<Error> error = tutti_test::firstErrorWithin([&] { pair.recv->test(r, nullptr); });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::Remote);
  CHECK(std::string(error->what()).find("closed") != std::string::npos);
  CHECK(std::string(error->what()).find("standin_0:1") != std::string::npos);
}

TEST_CASE("net/ib: NCCL_IB_HCA selects devices and ports by prefix, exactly, or by exclusion", "[net][ib]") {
  using ib::HcaFilter;
  CHECK(HcaFilter("").accepts("mlx5_0", 1));
  CHECK(HcaFilter("mlx5").accepts("mlx5_10", 2));
  CHECK_FALSE(HcaFilter("=mlx5_1").accepts("mlx5_10", 1));
  CHECK(HcaFilter("=mlx5_1").accepts("mlx5_1", 1));
  CHECK(HcaFilter("mlx5_0:1,mlx5_1").accepts("mlx5_0", 1));
  CHECK_FALSE(HcaFilter("mlx5_0:1,mlx5_1").accepts("mlx5_0", 2));
  CHECK(HcaFilter("mlx5_0:1,mlx5_1").accepts("mlx5_1", 2));
  CHECK_FALSE(HcaFilter("^mlx5_0").accepts("mlx5_0", 1));
  CHECK(HcaFilter("^mlx5_0:2").accepts("mlx5_0", 1));
  CHECK_FALSE(HcaFilter("^=mlx5_0").accepts("mlx5_0", 1));
  CHECK(HcaFilter("^=mlx5_0").accepts("mlx5_00", 1));
  CHECK_THROWS_AS(HcaFilter("mlx5_0:x"), Error);

  Standin standin;
  ScopedEnv two("TUTTI_IBVERBS_STANDIN_DEVICES", "2");
  {
    ScopedEnv hca("NCCL_IB_HCA", "");
    CHECK(openNetBackend("IB", "")->deviceCount() == 2);
  }
  {
    ScopedEnv hca("NCCL_IB_HCA", "^standin_0");
    auto backend = openNetBackend("IB", "");
    REQUIRE(backend->deviceCount() == 1);
    CHECK(backend->properties(0).name == "standin_1:1");
  }
  {
    ScopedEnv hca("NCCL_IB_HCA", "mlx5_0");
    std::string e = errorOf([] { openNetBackend("IB", ""); });
    CHECK(e.find("NCCL_IB_HCA=mlx5_0") != std::string::npos);
    CHECK(e.find("standin_0:1, standin_1:1") != std::string::npos);
  }
}

TEST_CASE("net/ib: without a verbs library or with NCCL_IB_DISABLE, IB is unusable and Socket is chosen", "[net][ib]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  {
    ScopedEnv library("TUTTI_IBVERBS_LIB", "libtutti-no-such-verbs.so");
    std::string e = errorOf([] { openNetBackend("IB", ""); });
    CHECK(e.find("cannot load libtutti-no-such-verbs.so") != std::string::npos);
    CHECK(std::string(openNetBackend("", "")->name()) == "Socket");
  }
  Standin standin;
  ScopedEnv disable("NCCL_IB_DISABLE", "1");
  CHECK(errorOf([] { openNetBackend("IB", ""); }).find("NCCL_IB_DISABLE") != std::string::npos);
}

TEST_CASE("net/ib: a GID index the port lacks fails naming the index", "[net][ib][misconfig]") {
  Standin standin;
  ScopedEnv gid("NCCL_IB_GID_INDEX", "5");
  std::string e = errorOf([] { openNetBackend("IB", ""); });
  CHECK(e.find("NCCL_IB_GID_INDEX=5 does not exist") != std::string::npos);
  CHECK(e.find("standin_0:1") != std::string::npos);
}

TEST_CASE("net/ib: NCCL_IB_QPS_PER_CONNECTION outside 1 to 128 is refused naming the value", "[net][ib]") {
  Standin standin;
  for (const char* value : {"0", "129", "-1"}) {
    ScopedEnv qps("NCCL_IB_QPS_PER_CONNECTION", value);
    CHECK(errorOf([] {
            openNetBackend("IB", "");
          }).find(std::string("NCCL_IB_QPS_PER_CONNECTION=") + value + " is not between 1 and 128") !=
          std::string::npos);
  }
}

// Two QPs of the stand-in wired to each other by hand, for what the backend never does itself.
struct RawPair {
  std::shared_ptr<ib::IbVerbs> verbs = ib::loadIbVerbs();
  std::shared_ptr<ib::IbDevice> device;
  std::unique_ptr<ib::IbQueuePair> a, b;
  RawPair() {
    int count = 0;
    ibv_device** list = verbs->getDeviceList(&count);
    REQUIRE(count >= 1);
    device = std::make_shared<ib::IbDevice>(verbs, list[0], 1);
    verbs->freeDeviceList(list);
    device->chooseGid();
    a = std::make_unique<ib::IbQueuePair>(device, "peer-b", 4);
    b = std::make_unique<ib::IbQueuePair>(device, "peer-a", 4);
  }
};

TEST_CASE("net/ib: an RDMA write into memory without remote-write access is a clear error on the writer",
          "[net][ib][misconfig]") {
  Standin standin;
  RawPair p;
  p.a->connectTo(p.b->localInfo());
  p.b->connectTo(p.a->localInfo());
  std::vector<char> source(64, 's'), target(64, 't');
  ibv_mr* src = p.verbs->regMr(p.device->pd(), source.data(), source.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* dst =
      p.verbs->regMr(p.device->pd(), target.data(), target.size(), IBV_ACCESS_LOCAL_WRITE);  // no remote write
  REQUIRE(src);
  REQUIRE(dst);
  ibv_sge sge{uint64_t(uintptr_t(source.data())), 64, src->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = uint64_t(uintptr_t(target.data()));
  wr.wr.rdma.rkey = dst->rkey;
  p.a->postSend(&wr, "test write");
  std::string e;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ibv_wc wc[4];
  while (e.empty() && std::chrono::steady_clock::now() < deadline) e = errorOf([&] { p.a->poll(wc, 4, "test write"); });
  CHECK(e.find("remote access error") != std::string::npos);
  CHECK(e.find("peer-b") != std::string::npos);
  CHECK(e.find("standin_0:1") != std::string::npos);
  CHECK(target == std::vector<char>(64, 't'));  // nothing was written
  // The QP is in error now: what follows flushes.
  p.a->postSend(&wr, "test write");
  e.clear();
  while (e.empty() && std::chrono::steady_clock::now() < deadline) e = errorOf([&] { p.a->poll(wc, 4, "test write"); });
  CHECK(e.find("Flushed") != std::string::npos);
  p.a.reset();
  p.b.reset();
  p.verbs->deregMr(src);
  p.verbs->deregMr(dst);
}

TEST_CASE("net/ib: the stand-in refuses QP transitions that lack attributes or name a GID of another index",
          "[net][ib][misconfig]") {
  Standin standin;
  auto verbs = ib::loadIbVerbs();
  int count = 0;
  ibv_device** list = verbs->getDeviceList(&count);
  REQUIRE(count == 1);
  ibv_context* ctx = verbs->openDevice(list[0]);
  verbs->freeDeviceList(list);
  ibv_pd* pd = verbs->allocPd(ctx);
  ibv_cq* cq = verbs->createCq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = init.cap.max_recv_wr = 4;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = verbs->createQp(pd, &init);
  REQUIRE(qp);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;  // RESET -> RTR skips INIT
  CHECK(verbs->modifyQp(qp, &attr, IBV_QP_STATE) == EINVAL);
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = 1;
  CHECK(verbs->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PORT) == EINVAL);  // no access flags, no pkey
  CHECK(verbs->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) == 0);
  ibv_gid local{};
  REQUIRE(verbs->queryGid(ctx, 1, 1, &local) == 0);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = qp->qp_num;
  attr.ah_attr.port_num = 1;
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.dgid = local;  // index 1's GID
  attr.ah_attr.grh.sgid_index = 0;
  int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
            IBV_QP_MIN_RNR_TIMER;
  CHECK(verbs->modifyQp(qp, &attr, rtr & ~IBV_QP_RQ_PSN) == EINVAL);  // a required attribute missing
  CHECK(verbs->modifyQp(qp, &attr, rtr) == EINVAL);                   // GIDs of different indexes
  attr.ah_attr.grh.sgid_index = 7;
  CHECK(verbs->modifyQp(qp, &attr, rtr) == EINVAL);  // a GID index the port lacks
  attr.ah_attr.grh.sgid_index = 1;
  attr.ah_attr.is_global = 0;
  CHECK(verbs->modifyQp(qp, &attr, rtr) == EINVAL);  // RoCE needs a GRH
  attr.ah_attr.is_global = 1;
  CHECK(verbs->modifyQp(qp, &attr, rtr) == 0);
  CHECK(qp->state == IBV_QPS_RTR);
  CHECK(verbs->destroyQp(qp) == 0);
  CHECK(verbs->destroyCq(cq) == 0);
  CHECK(verbs->deallocPd(pd) == 0);
  CHECK(verbs->closeDevice(ctx) == 0);
}

}  // namespace
}  // namespace tutti::transport::net
