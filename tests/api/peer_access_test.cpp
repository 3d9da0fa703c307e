// Rank threads of one process on GPUs without peer access: emulated devices whose pairs listed in
// TUTTI_EMULATED_NO_PEER_ACCESS cannot reach each other's memory (the emulated executor refuses
// it, as a GPU would fault). Such a pair must connect through host memory both devices map (shm),
// the others in-process (local), with an INFO line saying why, and every collective must match the
// float64 reference either way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "nccl.h"
#include "runtime/comm/connection_setup.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/ranks_support.h"

using tutti_test::check;
using tutti_test::Coll;

namespace {

// All-reduce, all-gather and reduce-scatter in several types, at an LL size and beyond it (Simple
// slots), in and out of place.
std::vector<tutti_test::Case> cases() {
  std::vector<tutti_test::Case> all;
  for (size_t count : {size_t(1), size_t(1023), (size_t(1) << 17) + 5})
    for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter})
      for (ncclDataType_t type : {ncclFloat32, ncclFloat64, ncclInt32, ncclFloat16, ncclBfloat16})
        all.push_back({coll, type, coll == Coll::AllGather ? ncclSum : (type == ncclInt32 ? ncclMax : ncclSum), count,
                       count == 1023, 0});
  return all;
}

struct EmulatedGpus {
  tutti_test::ScopedEnv device{"TUTTI_DEVICE", "emulated"};
  tutti_test::ScopedEnv memory{"TUTTI_EMULATED_MEMORY", "device"};
  tutti_test::ScopedEnv ifname{"NCCL_SOCKET_IFNAME", "lo"};
};

// Rank threads of this process, rank r on emulated device r; `reach(a, b)` is the transport the
// pair must take (its name or the start of it: "net" for "net/Socket"). Checks each pair's
// transport, runs the cases on every rank, then checks that every connection made is one of those
// transports.
std::string runThreads(int nranks, const std::function<std::string(int, int)>& reach) {
  std::vector<ncclComm_t> comms(size_t(nranks), nullptr);
  std::vector<int> devices;
  for (int r = 0; r < nranks; r++) devices.push_back(r);
  const ncclResult_t made = ncclCommInitAll(comms.data(), nranks, devices.data());
  if (made != ncclSuccess)
    return std::string("ncclCommInitAll: ") + ncclGetErrorString(made) + ": " + ncclGetLastError(nullptr);
  const std::vector<tutti_test::Case> all = cases();
  std::string failures = tutti_test::runOnThreads(nranks, [&](int rank) {
    for (int peer = 0; peer < nranks; peer++) {
      if (peer == rank) continue;
      const std::string got = tutti::transportTo(comms[size_t(rank)], peer).name();
      const std::string want = reach(rank, peer);
      check(got.rfind(want, 0) == 0, "rank " + std::to_string(rank) + " (device " + std::to_string(rank) +
                                         ") reaches rank " + std::to_string(peer) + " through " + got + ", not " +
                                         want);
    }
    tutti_test::runAll(all, rank, nranks, comms[size_t(rank)]);
    const std::string made = tutti::connectionTransports(comms[size_t(rank)]);
    for (size_t at = 0; at <= made.size();) {
      const size_t end = std::min(made.find('+', at), made.size());
      const std::string name = made.substr(at, end - at);
      at = end + 1;
      bool expected = false;
      for (int peer = 0; peer < nranks; peer++)
        expected = expected || (peer != rank && name.rfind(reach(rank, peer), 0) == 0);
      check(expected, "rank " + std::to_string(rank) + " made a connection through " + name +
                          ", which no pair of it should take");
    }
  });
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return failures;
}

bool listed(int a, int b, const std::vector<std::pair<int, int>>& pairs) {
  for (auto [x, y] : pairs)
    if ((x == a && y == b) || (x == b && y == a)) return true;
  return false;
}

}  // namespace

TEST_CASE("peer access: rank threads on GPUs with peer access connect in-process (local)",
          "[device][emulated][p2p][peer-access]") {
  EmulatedGpus gpus;
  tutti_test::ScopedEnv none("TUTTI_EMULATED_NO_PEER_ACCESS", nullptr);
  CHECK(runThreads(2, [](int, int) { return std::string("local"); }) == "");
}

TEST_CASE("peer access: rank threads on two GPUs without peer access connect through host memory (shm)",
          "[device][emulated][p2p][peer-access]") {
  EmulatedGpus gpus;
  tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", "0:1");
  tutti_test::CapturedLog log("INFO", "P2P");
  CHECK(runThreads(2, [](int, int) { return std::string("shm"); }) == "");
  // Once per pair and communicator, naming both devices and the reason.
  const std::vector<std::string> lines = log.linesWith("do not connect through in-process FIFOs");
  CHECK(lines.size() == 2);
  for (const std::string& line : lines) {
    CHECK(line.find("devices 0 and 1") != std::string::npos);
    CHECK(line.find("no peer access") != std::string::npos);
  }
}

TEST_CASE("peer access: in one communicator, only the pairs without peer access go through host memory",
          "[device][emulated][p2p][peer-access]") {
  EmulatedGpus gpus;
  const std::vector<std::pair<int, int>> without = {{0, 1}, {2, 3}, {1, 3}};
  tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", "0:1,2:3,3:1");
  CHECK(runThreads(4, [&](int a, int b) { return std::string(listed(a, b, without) ? "shm" : "local"); }) == "");
}

TEST_CASE("peer access: NCCL_SHM_DISABLE leaves a pair without peer access to the network",
          "[device][emulated][p2p][peer-access][net]") {
  EmulatedGpus gpus;
  tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", "0:1");
  tutti_test::ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  CHECK(runThreads(2, [](int, int) { return std::string("net"); }) == "");
}

TEST_CASE("peer access: a malformed TUTTI_EMULATED_NO_PEER_ACCESS is refused at init, naming the variable",
          "[device][emulated][p2p][peer-access]") {
  EmulatedGpus gpus;
  for (const char* bad : {"0-1", "0:0", "1:x", "0:1,"}) {
    tutti_test::ScopedEnv pairs("TUTTI_EMULATED_NO_PEER_ACCESS", bad);
    ncclComm_t comms[2];
    int devices[2] = {0, 1};
    CHECK(ncclCommInitAll(comms, 2, devices) == ncclInvalidUsage);
    CHECK(std::string(ncclGetLastError(nullptr)).find("TUTTI_EMULATED_NO_PEER_ACCESS") != std::string::npos);
  }
}
