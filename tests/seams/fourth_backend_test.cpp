// The seams proved by use: a fourth executor backend and a fourth transport, both defined here in
// the test tree and known to the library only through its registries (kernels/backend.h,
// registerBackend; transports/registry.h, registerTransport), carry collectives whose results are
// checked against a float64 reference. Nothing above the seams names either of them.
//
//  * "loop-host": the host executor's memory and streams (HostMemoryBackend) with a run() of its
//    own: one fresh thread per worker of each launch, no pool.
//  * "loop": same-process pairs through FIFOs in the communicator's FIFO memory, handed from the
//    receiving rank thread to the sending one through a table of this file.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/backend.h"
#include "kernels/host/host_backend.h"
#include "kernels/host/host_executor.h"
#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "transports/fifo_setup.h"
#include "transports/registry.h"
#include "tutti/tutti.h"

namespace {

using tutti_test::check;
using tutti_test::checkNccl;

std::atomic<uint64_t> loopLaunches{0};     // launches the fourth backend ran
std::atomic<uint64_t> loopConnections{0};  // connections the fourth transport made (both ends)

// ---- the fourth backend ----

class LoopHostBackend final : public tutti::kern::host::HostMemoryBackend {
 public:
  using HostMemoryBackend::HostMemoryBackend;
  const char* name() const override { return "loop-host"; }
  void abort() override {}  // the host executor watches the communicator's abort flag

 protected:
  void run(std::span<tutti::kern::Launch* const> launches) override {
    RunScope scope(launches);
    std::mutex mutex;
    std::exception_ptr first;
    tutti::kern::Launch* firstLaunch = nullptr;
    std::vector<std::thread> threads;
    auto guarded = [&](tutti::kern::Launch* L, std::function<void()> body) {
      try {
        body();
      } catch (const tutti::Error& e) {
        L->failed(e);
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) {
          first = std::current_exception();
          firstLaunch = L;
        }
      }
    };
    for (tutti::kern::Launch* L : launches) {
      loopLaunches++;
      if (L->alone()) {
        threads.emplace_back([&, L] { guarded(L, [L] { L->runAlone(); }); });
        continue;
      }
      tutti::kern::LaunchWork& w = L->work();
      for (uint32_t worker = 0; worker < w.nworkers; worker++) {
        if (w.workers()[worker].nqueues == 0) continue;
        threads.emplace_back([&, L, worker] {
          guarded(L, [L, worker] {
            tutti::kern::host::runWorker(L->work(), L->work().ops(), worker, L->context(int(worker)));
          });
        });
      }
    }
    for (std::thread& t : threads) t.join();
    if (first) {
      try {
        std::rethrow_exception(first);
      } catch (const tutti::Error& e) {
        firstLaunch->raise(e);
      }
    }
  }
};

// ---- the fourth transport ----

struct LoopFifo {
  std::shared_ptr<tutti::kern::DeviceMemory> memory;
  void* base = nullptr;
  size_t bytes = 0;
  std::atomic<bool> attached{false};
  ~LoopFifo() { memory->release(base); }
};

std::mutex tableMutex;
std::map<uint64_t, std::shared_ptr<LoopFifo>> table;  // offered, not yet attached
uint64_t nextToken = 1;

class LoopConnection final : public tutti::transport::Connection {
 public:
  LoopConnection(std::shared_ptr<LoopFifo> fifo, tutti::kern::Bell* peerBells)
      : tutti::transport::Connection(static_cast<tutti::kern::FifoHeader*>(fifo->base),
                                     tutti::transport::WakeTarget::peerWorkers(peerBells), "loop"),
        fifo_(std::move(fifo)) {
    loopConnections++;
  }
  bool sharesAddressSpace() const override { return true; }

 private:
  std::shared_ptr<LoopFifo> fifo_;
};

class LoopTransport final : public tutti::transport::Transport {
 public:
  explicit LoopTransport(tutti::transport::TransportContext& context) : context_(context) {}
  std::string name() const override { return "loop"; }
  tutti::transport::TransportTraits traits() const override { return {.carriesLL = true, .mapsPeerBuffers = false}; }
  bool canConnect(const tutti::transport::PeerPair& pair, std::string* whyNot) const override {
    if (pair.locality == tutti::transport::Locality::SameProcess) return true;
    *whyNot = "the peer is not in this process";
    return false;
  }
  std::unique_ptr<tutti::transport::PendingReceive> offer(const tutti::transport::ConnectionRequest& request,
                                                          tutti::transport::ConnectionOffer* offer) override {
    const std::string what = tutti::transport::fifoWhat(request);
    const tutti::transport::FifoShape shape = tutti::transport::checkedFifoShape(context_, what);
    auto fifo = std::make_shared<LoopFifo>();
    fifo->memory = context_.fifoMemory();
    fifo->bytes = tutti::kern::fifoBytes(shape.nsteps, shape.slotBytes, shape.llBytes);
    fifo->base = fifo->memory->allocate(fifo->bytes, what);
    tutti::transport::writeFifoHeader(*fifo->memory, fifo->base, shape);
    uint64_t token;
    {
      std::lock_guard<std::mutex> lock(tableMutex);
      token = nextToken++;
      table[token] = fifo;
    }
    std::memset(offer, 0, sizeof *offer);
    std::memcpy(offer->bytes, &token, sizeof token);
    auto connection = std::make_unique<LoopConnection>(fifo, request.peerBells);
    return std::make_unique<tutti::transport::PendingMemoryReceive>(
        std::move(connection), [fifo] { return fifo->attached.load(std::memory_order_acquire); });
  }
  std::unique_ptr<tutti::transport::PendingSend> attach(const tutti::transport::ConnectionRequest& request,
                                                        const tutti::transport::ConnectionOffer& offer,
                                                        tutti::SteadyTime) override {
    uint64_t token;
    std::memcpy(&token, offer.bytes, sizeof token);
    std::shared_ptr<LoopFifo> fifo;
    {
      std::lock_guard<std::mutex> lock(tableMutex);
      auto it = table.find(token);
      if (it == table.end())
        throw tutti::Error(tutti::ErrorCode::Remote,
                           tutti::transport::fifoWhat(request) + ": loop FIFO " + std::to_string(token) + " is gone");
      fifo = it->second;
      table.erase(it);
    }
    auto connection = std::make_unique<LoopConnection>(fifo, request.peerBells);
    fifo->attached.store(true, std::memory_order_release);
    return tutti::transport::PendingSend::made(std::move(connection));
  }

 private:
  tutti::transport::TransportContext& context_;
};

void registerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    tutti::kern::BackendRegistration loop;
    loop.name = "loop-host";
    loop.make = [](const tutti::kern::BackendOptions& options, const std::string&) {
      return std::make_unique<LoopHostBackend>(options);
    };
    loop.traits.bells = true;  // the host executor sleeps on bells
    loop.traits.readsDeviceScalars = false;
    tutti::kern::registerBackend(std::move(loop));
    tutti::transport::registerTransport(
        [](tutti::transport::TransportContext& context) { return std::make_unique<LoopTransport>(context); });
  });
}

}  // namespace

TEST_CASE(
    "a backend and a transport registered from outside the library carry all-reduce and send/recv, checked against "
    "float64") {
  registerOnce();
  tutti_test::ScopedEnv device("TUTTI_DEVICE", "loop-host");
  const uint64_t launchesBefore = loopLaunches.load(), connectionsBefore = loopConnections.load();
  constexpr int kRanks = 3;
  constexpr size_t kCount = 100003;  // not a multiple of anything the plans cut by
  const std::string failures = tutti_test::runThreads(kRanks, [&](int rank, int nranks, ncclComm_t comm) {
    const char* backend = nullptr;
    checkNccl(tuttiCommDeviceBackend(comm, &backend), "tuttiCommDeviceBackend");
    check(std::string(backend) == "loop-host",
          "the communicator runs on the registered backend, not " + std::string(backend));
    char names[256];
    int nodes = 0;
    checkNccl(tuttiCommTransports(comm, names, sizeof names, &nodes), "tuttiCommTransports");
    check(std::string(names) == "loop",
          "every pair connects through the registered transport, not \"" + std::string(names) + "\"");

    std::vector<double> send(kCount), recv(kCount, -1.0);
    for (size_t i = 0; i < kCount; i++) send[i] = double((i * 7 + size_t(rank) * 13) % 101) - 50.0 + 0.25 * rank;
    checkNccl(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat64, ncclSum, comm, nullptr), "ncclAllReduce");
    for (size_t i = 0; i < kCount; i++) {
      double expected = 0;  // each rank's value recomputed, summed in float64
      for (int r = 0; r < nranks; r++) expected += double((i * 7 + size_t(r) * 13) % 101) - 50.0 + 0.25 * r;
      if (recv[i] != expected)
        check(false, "all-reduce element " + std::to_string(i) + ": " + std::to_string(recv[i]) + ", expected " +
                         std::to_string(expected));
    }

    // A ring shift by send/recv: each rank gets its left neighbour's buffer.
    std::vector<float> out(kCount), in(kCount, -1.0f);
    for (size_t i = 0; i < kCount; i++) out[i] = float(rank * 1000) + float(i % 977);
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    checkNccl(ncclSend(out.data(), kCount, ncclFloat32, right, comm, nullptr), "ncclSend");
    checkNccl(ncclRecv(in.data(), kCount, ncclFloat32, left, comm, nullptr), "ncclRecv");
    checkNccl(ncclGroupEnd(), "ncclGroupEnd");
    for (size_t i = 0; i < kCount; i++)
      if (double(in[i]) != double(left * 1000) + double(i % 977))
        check(false, "recv element " + std::to_string(i) + " from rank " + std::to_string(left) + ": " +
                         std::to_string(in[i]));
  });
  INFO(failures);
  CHECK(failures.empty());
  CHECK(loopLaunches.load() > launchesBefore);
  // Every pair's FIFOs in both directions, at both ends: at least one connection per rank.
  CHECK(loopConnections.load() - connectionsBefore >= uint64_t(kRanks));
}

TEST_CASE("TUTTI_DEVICE naming a backend nobody registered fails init with the names the registry knows") {
  tutti_test::ScopedEnv device("TUTTI_DEVICE", "no-such-backend");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 1, id, 0) == ncclInvalidUsage);
  const std::string error = ncclGetLastError(nullptr);
  INFO(error);
  CHECK(error.find("no-such-backend") != std::string::npos);
  CHECK(error.find("host") != std::string::npos);
}
