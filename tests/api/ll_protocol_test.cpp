// The LL protocol (kernels/fifo.h) between device executors, run by the emulated device: small
// operations go as LL lines (seen in the FIFOs' LL slots), NCCL_PROTO=^LL keeps them in Simple
// slots, large ones never take LL; results against the float64 reference either way.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/fifo.h"
#include "runtime/comm.h"
#include "tests/common/ranks_support.h"

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
                                                std::to_string(out[i]) + " where " + std::to_string(expected) + " was due");
    }
    withLL[size_t(rank)] = fifosWithLLMessages(comm);
  });
  REQUIRE(failures == "");
  return withLL;
}

}  // namespace

TEST_CASE("LL: small operations between emulated device executors go as LL lines, and NCCL_PROTO=^LL keeps them Simple", "[device][ll]") {
  setenv("TUTTI_DEVICE", "emulated", 1);
  setenv("NCCL_ALGO", "ring", 1);  // a ring: every rank receives from its neighbour
  unsetenv("NCCL_PROTO");
  for (int fifos : allReduce(1000)) CHECK(fifos >= 1);  // 8000 bytes: LL
  for (int fifos : allReduce(100000)) CHECK(fifos == 0);  // 800 KB: Simple
  setenv("NCCL_PROTO", "^LL", 1);
  for (int fifos : allReduce(1000)) CHECK(fifos == 0);
  unsetenv("NCCL_PROTO");
  setenv("TUTTI_DEVICE", "host", 1);  // the host executor never sends LL
  for (int fifos : allReduce(1000)) CHECK(fifos == 0);
  unsetenv("NCCL_ALGO");
}
