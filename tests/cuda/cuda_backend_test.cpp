// The cuda backend's own host code, run over the emulated CUDA driver that the build makes
// (TUTTI_CUDA_LIBRARY names it for this whole binary, which loads it as it would NVIDIA's
// libcuda.so.1): what only the cuda backend does on the host, which no GPU has checked yet. A
// group's launches each carry their own communicator's abort word and fault record; grouped calls
// reuse the device memory of their launches; a network hop from a kernel leaves without waiting
// for the proxy's timer, and the flight recorder follows the kernels; a group of more
// communicators than the kernel's parameters hold runs as one kernel.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "kernels/backend.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/diagnostics/flight_recorder.h"
#include "runtime/launch/launch_cache.h"
#include "tests/common/cuda_driver_support.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "transports/transport.h"
#include "tutti/tutti.h"

using tutti_test::CudaDriver;
using tutti_test::ScopedEnv;

namespace {

// A rank's float32 buffers of `count` elements in device memory, its input i * (rank + 1) + 0.25.
struct RankBuffers {
  const CudaDriver& d = CudaDriver::get();
  size_t count;
  int rank;
  CudaDriver::Ptr send = 0, recv = 0;
  RankBuffers(size_t n, int r) : count(n), rank(r) {
    d.useDevice(0);
    REQUIRE(d.cuMemAlloc(&send, n * sizeof(float)) == 0);
    REQUIRE(d.cuMemAlloc(&recv, n * sizeof(float)) == 0);
    std::vector<float> in(n);
    for (size_t i = 0; i < n; i++) in[i] = float(i % 97) * float(r + 1) + 0.25f;
    REQUIRE(d.cuMemcpyHtoD(send, in.data(), n * sizeof(float)) == 0);
  }
  ~RankBuffers() {
    d.cuMemFree(send);
    d.cuMemFree(recv);
  }
  void* in() const { return reinterpret_cast<void*>(send); }
  void* out() const { return reinterpret_cast<void*>(recv); }
  // Elements of the all-reduced sum over `nranks` ranks that differ from the float64 reference.
  size_t wrongSum(int nranks) const {
    std::vector<float> out(count);
    REQUIRE(d.cuMemcpyDtoH(out.data(), recv, count * sizeof(float)) == 0);
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
      double expected = 0;
      for (int r = 0; r < nranks; r++) expected += double(float(i % 97) * float(r + 1) + 0.25f);
      if (std::fabs(double(out[i]) - expected) > 1e-5 * std::fabs(expected) + 1e-6) wrong++;
    }
    return wrong;
  }
};

// A stream of device 0, on which every rank of these tests (all on device 0) runs.
struct Stream {
  const CudaDriver& d = CudaDriver::get();
  void* s = nullptr;
  Stream() {
    d.useDevice(0);
    REQUIRE(d.cuStreamCreate(&s, 1) == 0);
  }
  ~Stream() { d.cuStreamDestroy(s); }
  cudaStream_t handle() const { return static_cast<cudaStream_t>(s); }
};

// Every rank of `comms` all-reduces its buffers in one group on `stream`.
void allReduceGroup(std::vector<ncclComm_t>& comms, std::vector<RankBuffers*>& buffers, const Stream& stream) {
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (size_t r = 0; r < comms.size(); r++)
    REQUIRE(ncclAllReduce(buffers[r]->in(), buffers[r]->out(), buffers[r]->count, ncclFloat32, ncclSum, comms[r],
                          stream.handle()) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
}

std::vector<ncclComm_t> initAllOnDevice0(int n) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  std::vector<int> devices(size_t(n), 0);
  REQUIRE(ncclCommInitAll(comms.data(), n, devices.data()) == ncclSuccess);
  return comms;
}

std::string backendOf(ncclComm_t comm) { return comm->executor.backend->name(); }

}  // namespace

TEST_CASE("cuda backend: the emulated driver is loaded as the CUDA driver, and its communicators run the cuda backend",
          "[cuda]") {
  std::vector<ncclComm_t> comms = initAllOnDevice0(2);
  CHECK(backendOf(comms[0]) == "cuda");
  Stream stream;
  RankBuffers a(1000, 0), b(1000, 1);
  std::vector<RankBuffers*> buffers{&a, &b};
  allReduceGroup(comms, buffers, stream);
  REQUIRE(CudaDriver::get().cuStreamSynchronize(stream.s) == 0);
  CHECK(a.wrongSum(2) == 0);
  CHECK(b.wrongSum(2) == 0);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

// Defect: the group's kernel took the first communicator's abort word and fault record for every
// launch, so aborting B left B's blocks waiting until their timeout, and wrote B's fault into A's.
TEST_CASE(
    "cuda backend: a group over two communicators where one is aborted stops only that one's blocks, and only its "
    "error is set",
    "[cuda][abort]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  std::vector<ncclComm_t> a = initAllOnDevice0(2), b = initAllOnDevice0(2);
  Stream stream;
  const size_t count = 4096;
  RankBuffers a0(count, 0), a1(count, 1), b0(count, 0), b1(count, 1);
  std::vector<RankBuffers*> aBuffers{&a0, &a1}, bBuffers{&b0, &b1};
  // Both communicators connected, both ranks of each calling.
  allReduceGroup(a, aBuffers, stream);
  allReduceGroup(b, bBuffers, stream);
  REQUIRE(CudaDriver::get().cuStreamSynchronize(stream.s) == 0);
  // One kernel for A's two ranks and B's rank 0, whose peer never calls: B's blocks wait.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(a0.in(), a0.out(), count, ncclFloat32, ncclSum, a[0], stream.handle()) == ncclSuccess);
  REQUIRE(ncclAllReduce(a1.in(), a1.out(), count, ncclFloat32, ncclSum, a[1], stream.handle()) == ncclSuccess);
  REQUIRE(ncclAllReduce(b0.in(), b0.out(), count, ncclFloat32, ncclSum, b[0], stream.handle()) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto aborted = std::chrono::steady_clock::now();
  CHECK(ncclCommAbort(b[0]) == ncclSuccess);
  // B's blocks watch B's abort word: the kernel ends within moments, not at the 60 s timeout.
  CHECK(CudaDriver::get().waitFor(stream.s, 20));
  INFO("the kernel ended " << std::chrono::duration<double>(std::chrono::steady_clock::now() - aborted).count()
                           << " s after the abort");
  CHECK(a0.wrongSum(2) == 0);
  CHECK(a1.wrongSum(2) == 0);
  for (ncclComm_t c : a) {
    ncclResult_t async = ncclInternalError;
    CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
    CHECK(async == ncclSuccess);  // B's abort is B's alone
    CHECK(c->executor.backend->fault().fault == 0);
  }
  CHECK(ncclCommAbort(b[1]) == ncclSuccess);
  for (ncclComm_t c : a) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

// Defect: every grouped call allocated a device copy of its launch's work arena that was freed
// only with the communicator: send/recv, always grouped, grew device memory without bound.
TEST_CASE("cuda backend: 10,000 grouped send/recv calls leave device memory flat", "[cuda][memory]") {
  ScopedEnv threads("TUTTI_EMULATED_THREADS",
                    "1");  // the emulated blocks' host threads: the fewest, for 10,000 launches
  std::vector<ncclComm_t> comms = initAllOnDevice0(2);
  Stream stream;
  const size_t count = 256;
  RankBuffers r0(count, 0), r1(count, 1);
  const CudaDriver& d = CudaDriver::get();
  auto exchange = [&] {
    REQUIRE(ncclGroupStart() == ncclSuccess);
    REQUIRE(ncclSend(r0.in(), count, ncclFloat32, 1, comms[0], stream.handle()) == ncclSuccess);
    REQUIRE(ncclRecv(r1.out(), count, ncclFloat32, 0, comms[1], stream.handle()) == ncclSuccess);
    REQUIRE(ncclSend(r1.in(), count, ncclFloat32, 0, comms[1], stream.handle()) == ncclSuccess);
    REQUIRE(ncclRecv(r0.out(), count, ncclFloat32, 1, comms[0], stream.handle()) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
  };
  // At most kInFlight calls are queued on the stream at once, however loaded the machine (the
  // host can queue faster than the emulated blocks run).
  constexpr int kInFlight = 50;
  for (int i = 0; i < 100; i++) exchange();  // warm: connections, plans, the pool's first buffers
  REQUIRE(d.cuStreamSynchronize(stream.s) == 0);
  const size_t before = d.usedBytes();
  for (int i = 0; i < 10000; i++) {
    exchange();
    if (i % kInFlight == kInFlight - 1) REQUIRE(d.cuStreamSynchronize(stream.s) == 0);
  }
  REQUIRE(d.cuStreamSynchronize(stream.s) == 0);
  const size_t after = d.usedBytes();
  INFO("device memory in use: " << before << " bytes after the warm-up, " << after
                                << " after 10,000 more grouped calls");
  // More buffers may be held than after the warm-up where more calls were in flight at once or
  // more finished launches wait in the launch cache for reuse (each keeps its device arena): per
  // communicator at most kInFlight launches in flight and LaunchCache::kMaxIdle idle, each arena
  // well under 16 KiB, about 4 MB in all. A buffer per call, the defect, would be 10,000 x 2
  // launches of at least 4 KiB: 80 MB.
  const size_t bound = 2 * (size_t(kInFlight) + tutti::LaunchCache::kMaxIdle) * 16 * 1024;
  CHECK(after <= before + bound);
  // The last exchange's results: each rank received the other's input.
  std::vector<float> got(count);
  REQUIRE(d.cuMemcpyDtoH(got.data(), r1.recv, count * sizeof(float)) == 0);
  for (size_t i = 0; i < count; i++) CHECK(got[i] == float(i % 97) * 1.0f + 0.25f);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

// Defect: a launch never told the network proxy, which went on sleeping out its timer while a
// kernel waited on the network, and the flight recorder showed every operation queued forever.
TEST_CASE(
    "cuda backend: a network operation from a kernel holds the proxy awake, and the flight recorder follows the kernel",
    "[cuda][net]") {
  ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
  ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  std::vector<ncclComm_t> comms = initAllOnDevice0(2);
  Stream stream;
  const size_t count = 20000;
  RankBuffers r0(count, 0), r1(count, 1);
  std::vector<RankBuffers*> buffers{&r0, &r1};
  allReduceGroup(comms, buffers, stream);
  REQUIRE(CudaDriver::get().cuStreamSynchronize(stream.s) == 0);
  char transports[64] = {};
  int nodes = 0;
  REQUIRE(tuttiCommTransports(comms[0], transports, sizeof transports, &nodes) == ncclSuccess);
  REQUIRE(std::string(transports).rfind("net", 0) == 0);
  const int kCalls = 20;
  std::vector<tutti::transport::TransportProxy::HoldStats> before;
  for (ncclComm_t c : comms) before.push_back(c->links.proxy()->holdStats());
  for (int i = 0; i < kCalls; i++) {
    allReduceGroup(comms, buffers, stream);
    REQUIRE(CudaDriver::get().cuStreamSynchronize(stream.s) == 0);
  }
  CHECK(r0.wrongSum(2) == 0);
  CHECK(r1.wrongSum(2) == 0);
  for (size_t r = 0; r < comms.size(); r++) {
    const tutti::transport::TransportProxy::HoldStats after = comms[r]->links.proxy()->holdStats();
    INFO("rank " << r << ": the proxy was held " << after.holds - before[r].holds << " times and slept "
                 << after.sleepsWhileHeld - before[r].sleepsWhileHeld << " times while held");
    CHECK(after.holds - before[r].holds >= uint64_t(kCalls));
    CHECK(after.sleepsWhileHeld == before[r].sleepsWhileHeld);
  }
  // Every operation's record ends once its kernel has: none stays queued or running.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  size_t unfinished = 0;
  do {
    unfinished = 0;
    for (ncclComm_t c : comms)
      for (const tutti::FlightEntry& e : c->executor.flight->snapshot())
        if (e.state == tutti::FlightState::Queued || e.state == tutti::FlightState::Running) unfinished++;
    if (unfinished > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (unfinished > 0 && std::chrono::steady_clock::now() < deadline);
  CHECK(unfinished == 0);
  size_t done = 0;
  for (const tutti::FlightEntry& e : comms[0]->executor.flight->snapshot())
    done += e.state == tutti::FlightState::Done ? 1 : 0;
  CHECK(done >= size_t(kCalls));
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
}

// Defect: a group of more than eight launches on one stream was split into consecutive kernels,
// the first of which waited for ranks only the next one ran: a deadlock until the timeout.
TEST_CASE("cuda backend: a group of 9 and 12 communicators of one thread on one stream runs as one kernel",
          "[cuda][group]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "30");
  for (int n : {9, 12}) {
    INFO(n << " ranks");
    std::vector<ncclComm_t> comms = initAllOnDevice0(n);
    Stream stream;
    std::vector<std::unique_ptr<RankBuffers>> owned;
    std::vector<RankBuffers*> buffers;
    for (int r = 0; r < n; r++) {
      owned.push_back(std::make_unique<RankBuffers>(3001, r));
      buffers.push_back(owned.back().get());
    }
    allReduceGroup(comms, buffers, stream);
    REQUIRE(CudaDriver::get().waitFor(stream.s, 25));
    for (int r = 0; r < n; r++) CHECK(buffers[size_t(r)]->wrongSum(n) == 0);
    for (ncclComm_t c : comms) {
      ncclResult_t async = ncclInternalError;
      CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
      CHECK(async == ncclSuccess);
      CHECK(ncclCommDestroy(c) == ncclSuccess);
    }
  }
}

TEST_CASE("cuda backend: the caller's current context is its own again after every call", "[cuda][context]") {
  const CudaDriver& d = CudaDriver::get();
  d.useDevice(6);  // the caller works on device 6; its communicators are on device 0
  void* mine = nullptr;
  REQUIRE(d.cuCtxGetCurrent(&mine) == 0);
  std::vector<ncclComm_t> comms(2);
  int devices[2] = {0, 0};
  REQUIRE(ncclCommInitAll(comms.data(), 2, devices) == ncclSuccess);
  auto current = [&] {
    void* now = nullptr;
    d.cuCtxGetCurrent(&now);
    return now;
  };
  CHECK(current() == mine);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f), ra(1000),
      rb(1000);  // pageable memory, which the emulated GPUs reach
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(a.data(), ra.data(), a.size(), ncclFloat32, ncclSum, comms[0], nullptr) == ncclSuccess);
  REQUIRE(ncclAllReduce(b.data(), rb.data(), b.size(), ncclFloat32, ncclSum, comms[1], nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(current() == mine);
  CHECK(ra[999] == 3.0f);  // the emulated default stream ran it before the call returned
  void* p = nullptr;
  REQUIRE(ncclMemAlloc(&p, 4096) == ncclSuccess);
  CHECK(current() == mine);
  int device = -1;
  REQUIRE(d.cuCtxGetDevice(&device) == 0);
  CHECK(device == 6);
  CHECK(ncclMemFree(p) == ncclSuccess);
  for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(current() == mine);
}

TEST_CASE("cuda backend: a rank reaches no other GPU than those of ranks in its own process", "[cuda][peer-access]") {
  const CudaDriver& d = CudaDriver::get();
  for (int dev : {2, 3, 4, 5}) REQUIRE_FALSE(d.active(dev));
  std::vector<ncclComm_t> alone(1);
  int two[1] = {2};
  REQUIRE(ncclCommInitAll(alone.data(), 1, two) == ncclSuccess);
  CHECK(d.active(2));
  for (int dev : {3, 4, 5}) CHECK_FALSE(d.active(dev));  // no other GPU's context, just in case
  std::vector<ncclComm_t> pair(2);
  int threeAndFour[2] = {3, 4};
  REQUIRE(ncclCommInitAll(pair.data(), 2, threeAndFour) == ncclSuccess);
  CHECK(d.active(3));
  CHECK(d.active(4));
  CHECK_FALSE(d.active(5));
  // The pair's ranks reach each other's memory (their FIFOs): an all-reduce across the two GPUs.
  std::vector<float> a(5000, 1.5f), b(5000, 2.5f), ra(5000), rb(5000);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclAllReduce(a.data(), ra.data(), a.size(), ncclFloat32, ncclSum, pair[0], nullptr) == ncclSuccess);
  REQUIRE(ncclAllReduce(b.data(), rb.data(), b.size(), ncclFloat32, ncclSum, pair[1], nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  CHECK(ra[4999] == 4.0f);
  CHECK(rb[0] == 4.0f);
  for (ncclComm_t c : pair) CHECK(ncclCommDestroy(c) == ncclSuccess);
  CHECK(ncclCommDestroy(alone[0]) == ncclSuccess);
  for (int dev : {2, 3, 4}) CHECK_FALSE(d.active(dev));  // every context it retained, released
}

TEST_CASE("cuda backend: a communicator made after the last one on its GPU was destroyed loads the kernels again",
          "[cuda][context]") {
  const CudaDriver& d = CudaDriver::get();
  REQUIRE_FALSE(d.active(7));
  for (int round = 0; round < 3; round++) {
    INFO("round " << round);
    std::vector<ncclComm_t> comms(2);
    int devices[2] = {7, 7};
    REQUIRE(ncclCommInitAll(comms.data(), 2, devices) == ncclSuccess);
    std::vector<float> a(300, float(round)), b(300, 1.0f), ra(300), rb(300);
    REQUIRE(ncclGroupStart() == ncclSuccess);
    REQUIRE(ncclAllReduce(a.data(), ra.data(), a.size(), ncclFloat32, ncclSum, comms[0], nullptr) == ncclSuccess);
    REQUIRE(ncclAllReduce(b.data(), rb.data(), b.size(), ncclFloat32, ncclSum, comms[1], nullptr) == ncclSuccess);
    REQUIRE(ncclGroupEnd() == ncclSuccess);
    CHECK(ra[0] == float(round) + 1.0f);
    for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c) == ncclSuccess);
    CHECK_FALSE(d.active(7));  // released: the driver resets the context, and its modules go with it
  }
}

TEST_CASE("cuda backend: pageable memory is refused, naming the buffer, on a GPU that cannot reach it",
          "[cuda][capabilities]") {
  ScopedEnv lacks("TUTTI_EMULATED_LACKS", "pageable");
  std::vector<ncclComm_t> comms = initAllOnDevice0(1);
  std::vector<float> pageable(64, 1.0f);
  RankBuffers device(64, 0);
  Stream stream;
  CHECK(ncclAllReduce(pageable.data(), device.out(), 64, ncclFloat32, ncclSum, comms[0], stream.handle()) ==
        ncclInvalidArgument);
  CHECK_THAT(std::string(ncclGetLastError(comms[0])),
             Catch::Contains("sendbuff") && Catch::Contains("not memory the GPU can reach"));
  CHECK(ncclAllReduce(device.in(), device.out(), 64, ncclFloat32, ncclSum, comms[0], stream.handle()) == ncclSuccess);
  REQUIRE(CudaDriver::get().cuStreamSynchronize(stream.s) == 0);
  CHECK(device.wrongSum(1) == 0);
  CHECK(ncclCommDestroy(comms[0]) == ncclSuccess);
}

TEST_CASE(
    "cuda backend: a GPU's communicators take 16 channels, fewer where the ranks sharing it would not all stay "
    "resident",
    "[cuda][channels]") {
  ScopedEnv unset("NCCL_MAX_NCHANNELS", nullptr);
  {
    std::vector<ncclComm_t> two = initAllOnDevice0(2);
    CHECK(two[0]->settings.nchannels == 16);
    for (ncclComm_t c : two) CHECK(ncclCommDestroy(c) == ncclSuccess);
  }
  // 40 ranks on one GPU of 132 multiprocessors holding 4 of the executor's blocks each: 528 / 40.
  std::vector<ncclComm_t> many = initAllOnDevice0(40);
  for (ncclComm_t c : many) CHECK(c->settings.nchannels == 528 / 40);
  CHECK(many[0]->executor.backend->residentWorkers() == 528);
  for (ncclComm_t c : many) CHECK(ncclCommDestroy(c) == ncclSuccess);
  ScopedEnv four("NCCL_MAX_NCHANNELS", "4");
  std::vector<ncclComm_t> asked = initAllOnDevice0(2);
  CHECK(asked[0]->settings.nchannels == 4);
  for (ncclComm_t c : asked) CHECK(ncclCommDestroy(c) == ncclSuccess);
}
