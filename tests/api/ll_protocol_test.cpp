// The LL protocol (kernels/fifo.h) between device executors, run by the emulated device: small
// operations go as LL lines (seen in the FIFOs' LL slots), NCCL_PROTO=^LL keeps them in Simple
// slots, large ones never take LL; results against the float64 reference either way.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/fifo.h"
#include "runtime/comm/comm.h"
#include "tests/common/ranks_support.h"
#include "transports/transport.h"
#include "tutti/tutti.h"

namespace {

// How many of this rank's receive FIFOs hold an LL message in LL slot 0 (the first message each
// carried: flag 1).
int fifosWithLLMessages(ncclComm_t comm) {
  int n = 0;
  for (auto& [key, conn] : comm->links.connections) {
    if (key.send) continue;
    tutti::kern::FifoHeader* h = conn->fifo();
    if (h->llOffset != 0 && uint32_t(tutti::kern::fifoLLSlot(h, 0)[0] >> 32) == tutti::kern::llFlag(0)) n++;
  }
  return n;
}

// An all-reduce of `count` doubles on 3 ranks, checked; returns the FIFOs with LL messages on
// each rank.
std::vector<int> allReduce(size_t count) {
  std::vector<int> withLL(3, -1);
  std::string failures = tutti_test::runThreads(3, [&](int rank, int nranks, ncclComm_t comm) {
    std::vector<double> in(count), out(count, -1.0);
    for (size_t i = 0; i < count; i++) in[i] = double(i % 13) + 0.5 * rank;
    TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat64, ncclSum, comm, nullptr));
    for (size_t i = 0; i < count; i++) {
      double expected = 0;
      for (int r = 0; r < nranks; r++) expected += double(i % 13) + 0.5 * r;
      tutti_test::check(out[i] == expected, "rank " + std::to_string(rank) + " element " + std::to_string(i) + ": " +
                                                std::to_string(out[i]) + " where " + std::to_string(expected) +
                                                " was due");
    }
    withLL[size_t(rank)] = fifosWithLLMessages(comm);
    // What tuttiCommProtocol says agrees with what the FIFOs hold.
    char protocol[16] = "";
    TUTTI_NCCL_CHECK(tuttiCommProtocol(comm, "allreduce", count, ncclFloat64, protocol, sizeof protocol));
    tutti_test::check(std::string(protocol) == (withLL[size_t(rank)] > 0 ? "LL" : "Simple"),
                      "rank " + std::to_string(rank) + ": tuttiCommProtocol says " + protocol +
                          " where the FIFOs hold " + std::to_string(withLL[size_t(rank)]) + " LL message(s)");
  });
  REQUIRE(failures == "");
  return withLL;
}

}  // namespace

TEST_CASE("LL: small operations between emulated device executors go as LL lines, and NCCL_PROTO=^LL keeps them Simple",
          "[device][ll]") {
  setenv("TUTTI_DEVICE", "emulated", 1);
  setenv("NCCL_ALGO", "ring", 1);  // a ring: every rank receives from its neighbour
  unsetenv("NCCL_PROTO");
  for (int fifos : allReduce(1000)) CHECK(fifos >= 1);    // 8000 bytes: LL
  for (int fifos : allReduce(100000)) CHECK(fifos == 0);  // 800 KB: Simple
  setenv("NCCL_PROTO", "^LL", 1);
  for (int fifos : allReduce(1000)) CHECK(fifos == 0);
  unsetenv("NCCL_PROTO");
  setenv("TUTTI_DEVICE", "host", 1);  // the host executor never sends LL
  for (int fifos : allReduce(1000)) CHECK(fifos == 0);
  unsetenv("NCCL_ALGO");
}

TEST_CASE("LL: a host-executor rank and an emulated rank agree on Simple between them", "[device][ll][processes]") {
  // The emulated rank could take LL, the host rank cannot: every connection between them must go
  // Simple at both ends (RankInfo::llBytes), or the emulated side would wait for lines that never
  // come. TUTTI_TIMEOUT bounds such a wait, so a regression fails instead of hanging.
  setenv("TUTTI_TIMEOUT", "20", 1);
  unsetenv("NCCL_PROTO");
  // The one-shot all-reduce: the host rank alone could take it through the mailboxes while the
  // emulated one runs its plan, unless both agree that mailboxes are off (RankInfo::mailboxes).
  setenv("NCCL_ALGO", "allreduce:oneshot", 1);
  const size_t count = 1000;
  std::string failures = tutti_test::runProcesses(
      2,
      [&](int rank, int nranks, ncclComm_t comm) {
        std::vector<float> in(count, float(rank + 1)), out(count, 0.0f);
        TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
        TUTTI_NCCL_CHECK(ncclBroadcast(in.data(), out.data(), count, ncclFloat32, 1, comm, nullptr));
        for (size_t i = 0; i < count; i++)
          tutti_test::check(out[i] == 2.0f, "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                                ": broadcast element " + std::to_string(i) + " is " +
                                                std::to_string(out[i]));
        tutti_test::check(fifosWithLLMessages(comm) == 0,
                          "rank " + std::to_string(rank) + " received LL messages from a host-executor peer");
      },
      120, 1, [](int process) { setenv("TUTTI_DEVICE", process == 0 ? "host" : "emulated", 1); });
  unsetenv("TUTTI_TIMEOUT");
  unsetenv("NCCL_ALGO");
  REQUIRE(failures == "");
}
