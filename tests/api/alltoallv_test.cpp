// ncclAllToAllv: count matrices with zeros, a hot destination and random skew, send blocks out of
// order and overlapping, receive blocks out of order with gaps whose bytes must stay untouched, in
// several types; ranks as threads and as processes, on the host backend, the emulated device and
// between hosts. Every rank's receive buffer is compared byte for byte with a reference built on
// the host from the count matrix and the layouts alone. Then the refusals (in place, overlapping
// receive blocks, overflow, missing arrays and buffers), each leaving the communicator usable, and
// a pair whose counts disagree, named at both ends.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::ScopedEnv;

namespace {

constexpr unsigned char kSentinel = 0xA5;

enum class Pattern { Zeros, HotColumn, Skew, Uniform };

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::Zeros: return "zeros";
    case Pattern::HotColumn: return "hot column";
    case Pattern::Skew: return "skew";
    case Pattern::Uniform: return "uniform";
  }
  return "?";
}

size_t typeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

// counts[i][j]: the elements rank i sends rank j. Every rank builds the same matrix from the seed.
using Matrix = std::vector<std::vector<size_t>>;

Matrix countMatrix(Pattern pattern, int n, unsigned seed) {
  std::mt19937 rng(seed);
  Matrix m(size_t(n), std::vector<size_t>(size_t(n), 0));
  const int hot = n - 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      size_t& c = m[size_t(i)][size_t(j)];
      switch (pattern) {
        case Pattern::Zeros:
          // Whole rows and columns empty, and scattered zeros, around small blocks.
          c = (i == 1 || j == 0 || (i + j) % 3 == 0) ? 0 : 1 + rng() % 37;
          break;
        case Pattern::HotColumn: c = j == hot ? 60000 + rng() % 5000 : rng() % 4; break;
        case Pattern::Skew: {
          // Heavy-tailed: most blocks small, a few thousands of times larger.
          const unsigned shift = rng() % 15;
          c = (size_t(1) << shift) + rng() % 7 - 1;
          break;
        }
        case Pattern::Uniform: c = 777; break;
      }
    }
  return m;
}

// One rank's layout: where each peer's send block starts (out of peer order, some sharing bytes
// with another peer's block) and where each receive block lands (out of order, with gaps).
struct Layout {
  std::vector<size_t> sendCounts, sdispls, recvCounts, rdispls;
  size_t sendElems = 0, recvElems = 0;
};

Layout layoutOf(const Matrix& m, int rank, unsigned seed) {
  const int n = int(m.size());
  std::mt19937 rng(seed * 7919u + unsigned(rank));
  Layout l;
  l.sendCounts.resize(size_t(n));
  l.recvCounts.resize(size_t(n));
  l.sdispls.assign(size_t(n), 0);
  l.rdispls.assign(size_t(n), 0);
  for (int p = 0; p < n; p++) {
    l.sendCounts[size_t(p)] = m[size_t(rank)][size_t(p)];
    l.recvCounts[size_t(p)] = m[size_t(p)][size_t(rank)];
  }
  std::vector<int> order(static_cast<size_t>(n));
  for (int p = 0; p < n; p++) order[size_t(p)] = p;
  std::shuffle(order.begin(), order.end(), rng);
  size_t at = rng() % 3;
  for (size_t k = 0; k < order.size(); k++) {
    const size_t p = size_t(order[k]);
    // Every third block after the first starts inside the previous one: reads may overlap.
    if (k > 0 && k % 3 == 0 && at > 0)
      l.sdispls[p] = at - 1 - rng() % at;
    else {
      l.sdispls[p] = at;
      at += l.sendCounts[p] + rng() % 3;
    }
    l.sendElems = std::max(l.sendElems, l.sdispls[p] + l.sendCounts[p]);
  }
  std::shuffle(order.begin(), order.end(), rng);
  at = 1 + rng() % 4;  // a gap before the first block too
  for (int p : order) {
    l.rdispls[size_t(p)] = at;
    at += l.recvCounts[size_t(p)] + rng() % 5;
  }
  l.recvElems = at + 3;  // and after the last
  return l;
}

// The byte at `index` of rank's send buffer: independent of the library, so the reference can
// rebuild any rank's buffer.
unsigned char sendByte(int rank, size_t index, unsigned seed) {
  uint64_t x = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(index) + seed) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  return static_cast<unsigned char>(x * 0xBF58476D1CE4E5B9ull >> 56);
}

std::vector<unsigned char> sendBuffer(const Layout& l, int rank, size_t elt, unsigned seed) {
  std::vector<unsigned char> b(l.sendElems * elt);
  for (size_t i = 0; i < b.size(); i++) b[i] = sendByte(rank, i, seed);
  return b;
}

// What `rank` must hold after the call: each peer's block copied from the peer's send buffer,
// every other byte the sentinel.
std::vector<unsigned char> expectedReceive(const Matrix& m, int rank, size_t elt, unsigned seed) {
  const int n = int(m.size());
  const Layout mine = layoutOf(m, rank, seed);
  std::vector<unsigned char> want(mine.recvElems * elt, kSentinel);
  for (int p = 0; p < n; p++) {
    const Layout theirs = layoutOf(m, p, seed);
    const size_t bytes = m[size_t(p)][size_t(rank)] * elt;
    for (size_t b = 0; b < bytes; b++)
      want[mine.rdispls[size_t(p)] * elt + b] = sendByte(p, theirs.sdispls[size_t(rank)] * elt + b, seed);
  }
  return want;
}

// The first byte where got and want differ, in words.
std::string firstDifference(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want) {
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i]) {
      char text[128];
      std::snprintf(text, sizeof text, "byte %zu of %zu is 0x%02x, expected 0x%02x%s", i, want.size(), got[i], want[i],
                    want[i] == kSentinel ? " (untouched)" : "");
      return text;
    }
  return "";
}

const ncclDataType_t kTypes[] = {ncclInt8, ncclInt32, ncclFloat16, ncclBfloat16, ncclFloat64};
const Pattern kPatterns[] = {Pattern::Zeros, Pattern::HotColumn, Pattern::Skew, Pattern::Uniform};

// How a rank issues the call: on the null stream, or on a stream of its own (tuttiStreamCreate)
// inside a group of its own with an all-reduce behind it.
enum class Issue { NullStream, StreamInGroup };

// Every pattern and type on one communicator: the calls and the checks of one rank.
void exchangeAll(int rank, int n, ncclComm_t comm, Issue issue) {
  cudaStream_t stream = nullptr;
  if (issue == Issue::StreamInGroup) TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
  unsigned seed = 11;
  for (Pattern pattern : kPatterns)
    for (ncclDataType_t type : kTypes) {
      seed++;
      const Matrix m = countMatrix(pattern, n, seed);
      const Layout l = layoutOf(m, rank, seed);
      const size_t elt = typeBytes(type);
      const std::vector<unsigned char> in = sendBuffer(l, rank, elt, seed);
      std::vector<unsigned char> out(l.recvElems * elt, kSentinel);
      const std::string what = std::string(patternName(pattern)) + ", type " + std::to_string(int(type)) + ", rank " +
                               std::to_string(rank) + " of " + std::to_string(n);
      if (issue == Issue::NullStream) {
        TUTTI_NCCL_CHECK(ncclAllToAllv(in.data(), l.sendCounts.data(), l.sdispls.data(), out.data(),
                                       l.recvCounts.data(), l.rdispls.data(), type, comm, nullptr));
      } else {
        std::vector<int32_t> one(4, rank), sum(4, 0);
        TUTTI_NCCL_CHECK(ncclGroupStart());
        TUTTI_NCCL_CHECK(ncclAllToAllv(in.data(), l.sendCounts.data(), l.sdispls.data(), out.data(),
                                       l.recvCounts.data(), l.rdispls.data(), type, comm, stream));
        TUTTI_NCCL_CHECK(ncclAllReduce(one.data(), sum.data(), 4, ncclInt32, ncclSum, comm, stream));
        TUTTI_NCCL_CHECK(ncclGroupEnd());
        TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
        check(sum[3] == n * (n - 1) / 2, what + ": the all-reduce in the same group gave " + std::to_string(sum[3]));
      }
      const std::string difference = firstDifference(out, expectedReceive(m, rank, elt, seed));
      check(difference.empty(), what + ": " + difference);
    }
  if (stream != nullptr) TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
}

void requireThreads(int n, const char* device, Issue issue) {
  ScopedEnv backend("TUTTI_DEVICE", device);
  INFO(n << " ranks as threads on " << device);
  REQUIRE(tutti_test::runThreads(
              n, [&](int rank, int nranks, ncclComm_t comm) { exchangeAll(rank, nranks, comm, issue); }) == "");
}

void requireProcesses(int n, const char* device, Issue issue) {
  ScopedEnv backend("TUTTI_DEVICE", device);
  INFO(n << " ranks as processes on " << device);
  REQUIRE(tutti_test::runProcesses(
              n, [&](int rank, int nranks, ncclComm_t comm) { exchangeAll(rank, nranks, comm, issue); }) == "");
}

// Every rank makes the same bad call, so every rank refuses it before anything moves; the
// communicator then runs a good one.
struct Refusal {
  std::string words;  // what the message must say
  ncclResult_t result;
};

void expectRefused(ncclResult_t got, const Refusal& want, ncclComm_t comm, int rank) {
  const std::string message = ncclGetLastError(comm);
  const std::string who = "rank " + std::to_string(rank) + ": ";
  check(got == want.result, who + "expected result " + std::to_string(int(want.result)) + " for \"" + want.words +
                                "\", got " + std::to_string(int(got)) + ": " + message);
  check(message.find("ncclAllToAllv") != std::string::npos && message.find(want.words) != std::string::npos &&
            message.find("rank " + std::to_string(rank)) != std::string::npos,
        who + "the message does not name ncclAllToAllv, the rank and \"" + want.words + "\": " + message);
}

}  // namespace

TEST_CASE("alltoallv: every pattern and type, 2, 4 and 6 ranks as threads, host backend", "[alltoallv][threads]") {
  for (int n : {2, 4, 6}) requireThreads(n, "host", Issue::NullStream);
}

TEST_CASE("alltoallv: every pattern and type, 2, 4 and 6 rank processes, host backend (shm)",
          "[alltoallv][processes]") {
  for (int n : {2, 4, 6}) requireProcesses(n, "host", Issue::NullStream);
}

TEST_CASE("alltoallv: on a host stream inside a group with an all-reduce, 2, 4 and 6 ranks as threads",
          "[alltoallv][threads][stream]") {
  for (int n : {2, 4, 6}) requireThreads(n, "host", Issue::StreamInGroup);
}

TEST_CASE("alltoallv: emulated device, on a stream inside a group with an all-reduce, 2, 4 and 6 ranks as threads",
          "[alltoallv][threads][device]") {
  for (int n : {2, 4, 6}) requireThreads(n, "emulated", Issue::StreamInGroup);
}

TEST_CASE("alltoallv: emulated device, 2 and 4 rank processes", "[alltoallv][processes][device]") {
  for (int n : {2, 4}) requireProcesses(n, "emulated", Issue::StreamInGroup);
}

TEST_CASE("alltoallv: 2 hosts x 2 rank processes over the network transport", "[alltoallv][net][processes]") {
  tutti_test::HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 2;
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"}, {"TUTTI_DEVICE", "host"}};
  auto outcomes = tutti_test::runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    char names[64];
    int nodes = 0;
    TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
    check(nodes == 2 && std::string(names).find("net") != std::string::npos,
          "rank " + std::to_string(rank) + ": the ranks reached each other through " + names + " over " +
              std::to_string(nodes) + " nodes, not the network");
    exchangeAll(rank, n, comm, Issue::NullStream);
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("alltoallv: the flight recorder names the call", "[alltoallv][flight]") {
  char path[] = "/tmp/tutti-alltoallv-XXXXXX";
  REQUIRE(mkdtemp(path) != nullptr);
  const std::string dir = path;
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
            std::vector<size_t> counts(size_t(n), 2), displs(static_cast<size_t>(n));
            for (int p = 0; p < n; p++) displs[size_t(p)] = size_t(p) * 2;
            std::vector<float> in(size_t(n) * 2, 1.0f), out(size_t(n) * 2, 0.0f);
            TUTTI_NCCL_CHECK(ncclAllToAllv(in.data(), counts.data(), displs.data(), out.data(), counts.data(),
                                           displs.data(), ncclFloat32, comm, nullptr));
            const std::string file = dir + "/rank" + std::to_string(rank) + ".json";
            TUTTI_NCCL_CHECK(tuttiCommDump(comm, file.c_str()));
            std::ifstream f(file);
            std::stringstream s;
            s << f.rdbuf();
            const std::string text = s.str();
            std::remove(file.c_str());
            size_t named = 0;
            for (size_t at = text.find("\"op\": \"AllToAllv\""); at != std::string::npos;
                 at = text.find("\"op\": \"AllToAllv\"", at + 1))
              named++;
            // A send and a receive per peer, the self pair as one copy.
            check(named == size_t(2 * n - 1) && text.find("\"op\": \"Send\"") == std::string::npos,
                  "rank " + std::to_string(rank) + ": the record names AllToAllv " + std::to_string(named) +
                      " times, not " + std::to_string(2 * n - 1) + ": " + text);
          }) == "");
  rmdir(path);
}

TEST_CASE("alltoallv: bad arguments are refused on every rank, naming the problem, and the communicator stays usable",
          "[alltoallv][arguments]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
            const size_t big = std::numeric_limits<size_t>::max();
            std::vector<size_t> counts(size_t(n), 4), displs(static_cast<size_t>(n));
            for (int p = 0; p < n; p++) displs[size_t(p)] = size_t(p) * 4;
            std::vector<int32_t> in(size_t(n) * 4, rank), out(size_t(n) * 4, -1);
            auto call = [&](const void* s, const size_t* sc, const size_t* sd, void* r, const size_t* rc,
                            const size_t* rd) { return ncclAllToAllv(s, sc, sd, r, rc, rd, ncclInt32, comm, nullptr); };
            // Only a good call after each refusal shows the communicator still works.
            auto good = [&] {
              std::fill(out.begin(), out.end(), -1);
              TUTTI_NCCL_CHECK(call(in.data(), counts.data(), displs.data(), out.data(), counts.data(), displs.data()));
              for (int p = 0; p < n; p++)
                check(out[size_t(p) * 4 + 3] == p, "rank " + std::to_string(rank) + ": block " + std::to_string(p) +
                                                       " holds " + std::to_string(out[size_t(p) * 4 + 3]));
            };
            good();
            expectRefused(call(in.data(), counts.data(), displs.data(), in.data(), counts.data(), displs.data()),
                          {"in place", ncclInvalidArgument}, comm, rank);
            good();
            std::vector<size_t> overlapping = displs;
            overlapping[size_t(n - 1)] = overlapping[size_t(n - 2)] + 3;  // one element shared
            expectRefused(call(in.data(), counts.data(), displs.data(), out.data(), counts.data(), overlapping.data()),
                          {"overlap", ncclInvalidArgument}, comm, rank);
            good();
            std::vector<size_t> far = displs;
            far[1] = big / 4;  // times 4 bytes, past the address space
            expectRefused(call(in.data(), counts.data(), far.data(), out.data(), counts.data(), displs.data()),
                          {"overflows the address space", ncclInvalidArgument}, comm, rank);
            far = displs;
            far[0] = big - 2;  // displacement + count itself overflows
            expectRefused(call(in.data(), counts.data(), displs.data(), out.data(), counts.data(), far.data()),
                          {"overflows the address space", ncclInvalidArgument}, comm, rank);
            good();
            expectRefused(call(in.data(), counts.data(), displs.data(), out.data(), nullptr, displs.data()),
                          {"recvcounts is NULL", ncclInvalidArgument}, comm, rank);
            expectRefused(call(in.data(), nullptr, displs.data(), out.data(), counts.data(), displs.data()),
                          {"sendcounts is NULL", ncclInvalidArgument}, comm, rank);
            expectRefused(call(in.data(), counts.data(), nullptr, out.data(), counts.data(), displs.data()),
                          {"sdispls is NULL", ncclInvalidArgument}, comm, rank);
            expectRefused(call(in.data(), counts.data(), displs.data(), out.data(), counts.data(), nullptr),
                          {"rdispls is NULL", ncclInvalidArgument}, comm, rank);
            expectRefused(call(nullptr, counts.data(), displs.data(), out.data(), counts.data(), displs.data()),
                          {"sendbuff is NULL", ncclInvalidArgument}, comm, rank);
            expectRefused(call(in.data(), counts.data(), displs.data(), nullptr, counts.data(), displs.data()),
                          {"recvbuff is NULL", ncclInvalidArgument}, comm, rank);
            // Inside a group the refusal fails the group, which then runs nothing.
            TUTTI_NCCL_CHECK(ncclGroupStart());
            const ncclResult_t inGroup =
                call(in.data(), counts.data(), displs.data(), in.data(), counts.data(), displs.data());
            const ncclResult_t end = ncclGroupEnd();
            check(inGroup == ncclInvalidArgument && end != ncclSuccess,
                  "rank " + std::to_string(rank) + ": in a group the in-place call gave " +
                      std::to_string(int(inGroup)) + " and the group " + std::to_string(int(end)));
            good();
            // NULL buffers are fine where nothing is sent or received.
            std::vector<size_t> none(size_t(n), 0);
            TUTTI_NCCL_CHECK(call(nullptr, none.data(), displs.data(), nullptr, none.data(), displs.data()));
            good();
          }) == "");
}

namespace {

// Ranks 0 and 1 of 3 disagree on the blocks between them, both ways; both must fail at once naming both calls.
void requireMismatchCaught(const char* device) {
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");  // a mismatch must not need the timeout
  ScopedEnv backend("TUTTI_DEVICE", device);
  INFO(device);
  {
    const std::string failures = tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
      // Rank 0 sends rank 1 10 elements where rank 1 expects 12; rank 1 sends rank 0 7 where rank 0
      // expects 5. Rank 2's blocks agree.
      std::vector<size_t> send(size_t(n), 8), recv(size_t(n), 8), displs(static_cast<size_t>(n));
      for (int p = 0; p < n; p++) displs[size_t(p)] = size_t(p) * 16;
      if (rank == 0) send[1] = 10, recv[1] = 5;
      if (rank == 1) send[0] = 7, recv[0] = 12;
      std::vector<int32_t> in(size_t(n) * 16, rank), out(size_t(n) * 16, 0);
      const auto start = std::chrono::steady_clock::now();
      const ncclResult_t result = ncclAllToAllv(in.data(), send.data(), displs.data(), out.data(), recv.data(),
                                                displs.data(), ncclInt32, comm, nullptr);
      const double seconds = tutti_test::secondsSince(start);
      const std::string message = ncclGetLastError(comm);
      const std::string who = "rank " + std::to_string(rank) + " (" + std::to_string(seconds) + " s): ";
      if (rank < 2) {
        // Each of the pair receives a block of the wrong size: rank 1 40 bytes for 48, rank 0 28 for 20. A rank
        // told of the other's failure first reports that one: either way its error names both calls.
        auto names = [&](const char* a, const char* b) {
          return message.find(std::string("ncclAllToAllv with a block of ") + a) != std::string::npos &&
                 message.find(std::string("ncclAllToAllv with a block of ") + b) != std::string::npos;
        };
        check(result != ncclSuccess, who + "the mismatched call succeeded");
        check(names("40 bytes", "48 bytes") || names("28 bytes", "20 bytes"),
              who + "the error does not name both calls of either pair: " + message);
      }
      check(result == ncclSuccess || seconds < 30, who + "failed only after the timeout: " + message);
      if (result != ncclSuccess) throw tutti_test::RankFailure("expected: " + message);
    });
    // Exactly the expected failures: ranks 0 and 1 failed in the call (and rank 2 only if it was told of theirs).
    INFO(failures);
    CHECK(failures.find("rank 0/3: expected: ") != std::string::npos);
    CHECK(failures.find("rank 1/3: expected: ") != std::string::npos);
    CHECK(failures.find("does not name") == std::string::npos);
    CHECK(failures.find("succeeded") == std::string::npos);
    CHECK(failures.find("after the timeout") == std::string::npos);
  }
}

}  // namespace

TEST_CASE("alltoallv: a pair whose counts disagree fails both ranks at the first message, naming ncclAllToAllv",
          "[alltoallv][mismatch]") {
  requireMismatchCaught("host");
}

TEST_CASE("alltoallv: a pair whose counts disagree on the emulated device fails both ranks naming ncclAllToAllv",
          "[alltoallv][mismatch][device]") {
  requireMismatchCaught("emulated");
}
