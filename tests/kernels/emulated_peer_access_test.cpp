// The emulated device without peer access (TUTTI_EMULATED_NO_PEER_ACCESS): the emulated driver
// answers cuDeviceCanAccessPeer for the listed pairs with no, so the backends do too; and a launch
// whose connection has its FIFO in the memory of a device its context cannot reach fails before it
// runs, naming both devices, where a GPU's kernel would fault on it.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/work.h"
#include "tests/common/env_support.h"

using namespace tutti;
using namespace tutti::kern;

namespace {

std::unique_ptr<ExecutorBackend> emulatedDevice(int device) {
  BackendOptions options;
  options.device = device;
  return makeExecutorBackend("emulated", options, "test");
}

// A launch with no operation and one connection end, whose FIFO is at `fifo`, run by one worker
// with one queue of no lanes: all that the driver's check of the memory a launch reaches looks at.
class OneConnectionLaunch final : public Launch {
 public:
  OneConnectionLaunch(ExecutorBackend& backend, void* fifo, int peer)
      : backend_(backend),
        arena_((sizeof(LaunchWork) + sizeof(ConnEnd) + sizeof(WorkerWork) + sizeof(QueueWork) + sizeof(QueueState)) /
               sizeof(uint64_t)) {
    LaunchWork& w = work();
    w.magic = kLaunchWorkMagic;
    w.bytes = uint32_t(arena_.size() * sizeof(uint64_t));
    w.nconns = 1;
    w.connsOffset = uint32_t(sizeof(LaunchWork));
    w.nworkers = 1;
    w.workersOffset = w.connsOffset + uint32_t(sizeof(ConnEnd));
    w.nqueues = 1;
    w.queuesOffset = w.workersOffset + uint32_t(sizeof(WorkerWork));
    w.queueStatesOffset = w.queuesOffset + uint32_t(sizeof(QueueWork));
    w.stateOffset = w.queueStatesOffset;
    w.workers()[0] = WorkerWork{0, 1};
    w.queues()[0] = QueueWork{0, 0};
    ConnEnd& end = w.conns()[0];
    end.fifo = static_cast<FifoHeader*>(fifo);
    end.peer = peer;
  }
  ExecutorBackend& backend() override { return backend_; }
  LaunchWork& work() override { return *reinterpret_cast<LaunchWork*>(arena_.data()); }
  size_t scratchBytes() const override { return 0; }
  ExecutionContext context(int) override {
    ExecutionContext c;
    c.rank = 0;
    return c;
  }
  std::span<const Copy> prologue() const override { return {}; }
  void failed(const Error& error) override { failures.push_back(error.message()); }

  std::vector<std::string> failures;

 private:
  ExecutorBackend& backend_;
  std::vector<uint64_t> arena_;  // 8-byte aligned, large enough for the header, one ConnEnd and one worker
};

}  // namespace

TEST_CASE("emulated peer access: the listed pairs have none both ways, the others and a device with itself have it",
          "[kernels][emulated][peer-access]") {
  tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", "0:1,3:2");
  auto device0 = emulatedDevice(0);
  CHECK(!device0->canAccessPeer(0, 1));
  CHECK(!device0->canAccessPeer(1, 0));
  CHECK(!device0->canAccessPeer(2, 3));
  CHECK(device0->canAccessPeer(0, 2));
  CHECK(device0->canAccessPeer(1, 1));
  tutti_test::ScopedEnv none("TUTTI_EMULATED_NO_PEER_ACCESS", "");
  CHECK(emulatedDevice(0)->canAccessPeer(0, 1));
}

TEST_CASE(
    "emulated peer access: a launch that reaches a device without peer access fails naming both devices, and runs "
    "nothing",
    "[kernels][emulated][peer-access]") {
  tutti_test::ScopedEnv memory("TUTTI_EMULATED_MEMORY", "device");
  tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", "0:1");
  auto device0 = emulatedDevice(0);
  auto device1 = emulatedDevice(1);
  void* fifo = device1->allocate(4096, "device 1's FIFO");
  OneConnectionLaunch launch(*device0, fifo, 1);
  Launch* launches[] = {&launch};
  bool done = false;
  std::string message;
  try {
    device0->submit(launches, nullptr, [&] { done = true; });
  } catch (const Error& e) {
    message = e.message();
  }
  CHECK(message.find("emulated device 0 cannot access emulated device 1's memory") != std::string::npos);
  CHECK(message.find("rank 1") != std::string::npos);
  REQUIRE(launch.failures.size() == 1);
  CHECK(launch.failures[0] == message);
  CHECK(done);  // the backend is done with the launch, failed or not
  device1->release(fifo);
}

TEST_CASE("emulated peer access: a malformed pair list is refused, naming the variable",
          "[kernels][emulated][peer-access]") {
  for (const char* bad : {"0", "0:0", "a:1", "0:1,", "0:1:2"}) {
    INFO(bad);
    tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", bad);
    CHECK_THROWS_WITH(emulatedDevice(0), Catch::Contains("TUTTI_EMULATED_NO_PEER_ACCESS"));
  }
}
