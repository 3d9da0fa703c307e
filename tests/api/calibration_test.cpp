// Host fabric calibration at init (TUTTI_CALIBRATE): every rank ends with the same fabric and
// the same choices (or collectives would deadlock), as threads and as processes; 0 gives the
// fixed figures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "nccl.h"
#include "runtime/comm/calibrate.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace {

// The rank's fabric and its choice for every collective at sizes 8 B to 64 MiB, as text.
std::string choicesOf(ncclComm_t comm) {
  std::string text = comm->planning.selector->fabric().describe();
  for (const char* coll : {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"})
    for (size_t count = 2; count <= (size_t(16) << 20); count *= 8) {
      char name[64];
      int channels = 0;
      TUTTI_NCCL_CHECK(tuttiCommAlgorithm(comm, coll, count, ncclFloat32, name, sizeof name, &channels));
      text += std::string("|") + coll + " " + std::to_string(count) + " " + name + " " + std::to_string(channels);
    }
  return text;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Every rank's digest of its choices, through the bootstrap (which needs no selection).
void checkAllAgree(int rank, int nranks, ncclComm_t comm) {
  std::string mine = choicesOf(comm);
  std::vector<uint64_t> digests(size_t(nranks), 0);
  digests[size_t(rank)] = fnv1a(mine);
  comm->identity.bootstrap->allGather(digests.data(), sizeof(uint64_t));
  for (int r = 0; r < nranks; r++)
    tutti_test::check(
        digests[size_t(r)] == digests[0],
        "rank " + std::to_string(r) + " chose differently from rank 0; rank " + std::to_string(rank) + " has " + mine);
  const tutti::sim::Fabric& f = comm->planning.selector->fabric();
  tutti_test::check(f.coresPerNode >= 1, "no cores counted: " + f.describe());
  tutti_test::check(f.workersPerRank == comm->settings.nworkers,
                    "workers per rank not the communicator's: " + f.describe());
}

// The fixed figures (sim.h: 2 us a step, 1 us of latency) scaled by ranks per core.
void checkFixedFigures(int nranks, ncclComm_t comm) {
  const tutti::sim::Fabric& f = comm->planning.selector->fabric();
  double over = std::max(1.0, double(nranks) / f.coresPerNode);
  tutti_test::check(
      std::abs(f.stepOverheadUs - 2.0 * over) < 1e-9 && std::abs(f.local.latencyUs - (1 + 2 * (over - 1))) < 1e-9,
      "not the fixed figures: " + f.describe());
}

}  // namespace

TEST_CASE("calibration: every rank agrees on the fabric and the choices, ranks as threads", "[calibration][threads]") {
  tutti_test::ScopedEnv calibrate("TUTTI_CALIBRATE", "1");
  const int nranks = GENERATE(2, 4, 5);
  INFO(nranks << " ranks");
  REQUIRE(tutti_test::runThreads(nranks, checkAllAgree) == "");
}

TEST_CASE("calibration: every rank agrees on the fabric and the choices, ranks as processes",
          "[calibration][processes]") {
  tutti_test::ScopedEnv calibrate("TUTTI_CALIBRATE", "1");
  // Two processes of two rank threads each: the handoff crosses processes through shared memory.
  REQUIRE(tutti_test::runProcesses(4, checkAllAgree, 120, 2) == "");
}

TEST_CASE("calibration: TUTTI_CALIBRATE=0 keeps the fixed figures", "[calibration][threads]") {
  tutti_test::ScopedEnv calibrate("TUTTI_CALIBRATE", "0");
  REQUIRE(tutti_test::runThreads(4, [](int rank, int nranks, ncclComm_t comm) {
            checkAllAgree(rank, nranks, comm);
            checkFixedFigures(nranks, comm);
          }) == "");
}

TEST_CASE("calibration: processes whose TUTTI_CALIBRATE differs all take the fixed figures",
          "[calibration][processes]") {
  // Process 0 would measure, process 1 would not: calibration counts as measured only if every
  // rank measured, so both take the fixed figures, and they agree on every choice.
  REQUIRE(tutti_test::runProcesses(
              2,
              [](int rank, int nranks, ncclComm_t comm) {
                checkAllAgree(rank, nranks, comm);
                checkFixedFigures(nranks, comm);
              },
              120, 1, [](int process) { setenv("TUTTI_CALIBRATE", process == 0 ? "1" : "0", 1); }) == "");
}

TEST_CASE("calibration: the network is timed between the i-th ranks of hosts 2k and 2k+1", "[calibration]") {
  using tutti::networkPartner;
  // 2 hosts x 2 ranks, in blocks: 0-2 and 1-3.
  std::vector<uint64_t> blocks = {7, 7, 9, 9};
  CHECK(networkPartner(blocks, 0) == 2);
  CHECK(networkPartner(blocks, 1) == 3);
  CHECK(networkPartner(blocks, 2) == 0);
  CHECK(networkPartner(blocks, 3) == 1);
  // Interleaved by a launcher: hosts are numbered by their first rank.
  std::vector<uint64_t> interleaved = {9, 7, 9, 7};
  CHECK(networkPartner(interleaved, 0) == 1);
  CHECK(networkPartner(interleaved, 2) == 3);
  CHECK(networkPartner(interleaved, 3) == 2);
  // Three hosts: the third sits out. Uneven hosts: the rank without a counterpart sits out.
  std::vector<uint64_t> three = {1, 2, 3, 1, 2, 3};
  CHECK(networkPartner(three, 0) == 1);
  CHECK(networkPartner(three, 4) == 3);
  CHECK(networkPartner(three, 2) == -1);
  CHECK(networkPartner(three, 5) == -1);
  std::vector<uint64_t> uneven = {1, 1, 1, 2};
  CHECK(networkPartner(uneven, 0) == 3);
  CHECK(networkPartner(uneven, 3) == 0);
  CHECK(networkPartner(uneven, 1) == -1);
  CHECK(networkPartner(uneven, 2) == -1);
  // One host: nobody.
  CHECK(networkPartner({5, 5, 5}, 1) == -1);
}
