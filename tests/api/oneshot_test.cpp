// The one-shot all-reduce through shared mailboxes (kernels/mailbox.h): the same bits as the
// chain plan and on every rank, the same fold whether a call fits the mailboxes or runs the
// plan, the selector's choice for small all-reduces on one host, waits that sleep and wake, and
// a wait on an absent rank that ends at an abort (its timeout: faults_test.cpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "kernels/mailbox.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/ranks_support.h"

using tutti_test::check;
using tutti_test::initPair;
using tutti_test::secondsSince;

namespace {

// Values whose sums round differently in different orders.
std::vector<float> inputOf(int rank, size_t count) {
  std::mt19937 gen(1234u + unsigned(rank));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = d(gen) * std::pow(10.0f, float(int(gen() % 7) - 3));
  return v;
}

std::vector<float> allReduce(ncclComm_t comm, const std::string& algorithm, const std::vector<float>& in,
                             bool inPlace) {
  comm->planning.forcedAlgorithm = algorithm;
  std::vector<float> out(in.size(), -7.0f);
  if (inPlace) out = in;
  TUTTI_NCCL_CHECK(
      ncclAllReduce(inPlace ? out.data() : in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr));
  comm->planning.forcedAlgorithm.clear();
  return out;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("oneshot through the mailboxes gives chain's bits on every rank, in and out of place", "[oneshot][threads]") {
  int nranks = GENERATE(2, 3, 5, 8);
  INFO(nranks << " ranks");
  const size_t count = tutti::kern::kMailboxBytes / sizeof(float);  // the largest that fits
  std::mutex mutex;
  std::vector<std::vector<float>> results(static_cast<size_t>(nranks));
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    check(comm->control.mailboxesMapped, "every rank is in this process, so the mailboxes are mapped");
    std::vector<float> in = inputOf(rank, count);
    // The float64 reference, as a sanity check of the fold itself.
    std::vector<double> reference(count, 0.0);
    for (int r = 0; r < n; r++) {
      std::vector<float> x = inputOf(r, count);
      for (size_t i = 0; i < count; i++) reference[i] += x[i];
    }
    std::vector<float> chain = allReduce(comm, "chain", in, false);
    for (bool inPlace : {false, true}) {
      std::vector<float> oneshot = allReduce(comm, "oneshot", in, inPlace);
      check(sameBits(oneshot, chain),
            std::string("oneshot differs from chain ") + (inPlace ? "in place" : "out of place"));
    }
    for (size_t i = 0; i < count; i++)
      check(std::abs(double(chain[i]) - reference[i]) <= 1e-5 * (1 + std::abs(reference[i])) + 1e-6,
            "element " + std::to_string(i) + " is " + std::to_string(chain[i]) + ", float64 reference " +
                std::to_string(reference[i]));
    std::lock_guard<std::mutex> lock(mutex);
    results[size_t(rank)] = chain;
  });
  REQUIRE(failures == "");
  for (int r = 1; r < nranks; r++) CHECK(sameBits(results[size_t(r)], results[0]));
}

TEST_CASE("oneshot folds alike through the mailboxes and through its plan", "[oneshot][threads]") {
  // A call that fits the mailboxes, and a larger one that runs the plan's FIFOs: the larger
  // one's prefix holds the same inputs, so it must hold the same bits.
  int nranks = GENERATE(3, 4);
  INFO(nranks << " ranks");
  const size_t small = tutti::kern::kMailboxBytes / sizeof(float), large = 3 * small + 5;
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> big = inputOf(rank, large);
    std::vector<float> prefix(big.begin(), big.begin() + std::ptrdiff_t(small));
    std::vector<float> a = allReduce(comm, "oneshot", prefix, false);
    std::vector<float> b = allReduce(comm, "oneshot", big, false);
    b.resize(small);
    check(sameBits(a, b), "the mailbox and plan forms of oneshot differ");
  });
  REQUIRE(failures == "");
}

TEST_CASE("the selector runs small all-reduces on one host through the mailboxes", "[oneshot][threads]") {
  int nranks = GENERATE(2, 4);
  std::string failures = tutti_test::runThreads(nranks, [&](int, int, ncclComm_t comm) {
    for (size_t bytes : {size_t(4), size_t(8), size_t(256)})
      check(comm->planning.selector->select(tutti::plan::Coll::AllReduce, bytes).algorithm->name == "oneshot",
            std::to_string(bytes) + " bytes: the selector chose " +
                comm->planning.selector->select(tutti::plan::Coll::AllReduce, bytes).algorithm->name);
    const std::string large =
        comm->planning.selector->select(tutti::plan::Coll::AllReduce, size_t(16) << 20).algorithm->name;
    check(large != "oneshot", "16 MiB: the selector chose oneshot");
  });
  REQUIRE(failures == "");
}

TEST_CASE("mailbox waits that sleep are woken by the last writer", "[oneshot][threads]") {
  // No busy or yielding polls: every wait sleeps at once, and a rank that comes late wakes the
  // others. Every rank also lags in turn.
  const int nranks = 3;
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    comm->settings.spin = 1;
    comm->settings.yields = 0;
    for (int iter = 0; iter < 200; iter++) {
      if (iter % 50 == 0 && iter / 50 % n == rank) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      int32_t x[3] = {rank + iter, 1, -rank}, y[3] = {0, 0, 0};
      TUTTI_NCCL_CHECK(ncclAllReduce(x, y, 3, ncclInt32, ncclSum, comm, nullptr));
      const int32_t ranks = n * (n - 1) / 2;
      check(y[0] == ranks + n * iter && y[1] == n && y[2] == -ranks,
            "iteration " + std::to_string(iter) + ": wrong sum");
    }
  });
  REQUIRE(failures == "");
}

TEST_CASE("ncclCommAbort from another thread ends a mailbox wait", "[oneshot][faults]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ncclResult_t result = ncclSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread stuck([&] { result = ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(ncclCommAbort(comms[0]) == ncclSuccess);
  stuck.join();
  CHECK(result != ncclSuccess);
  CHECK(secondsSince(start) < 5);
  REQUIRE(ncclCommAbort(comms[1]) == ncclSuccess);
}
