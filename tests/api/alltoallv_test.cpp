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
#include "tests/common/alltoallv_support.h"
#include "tests/common/env_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::ScopedEnv;

namespace {

using tutti_test::AllToAllvIssue;

void requireThreads(int n, const char* device, AllToAllvIssue issue) {
  ScopedEnv backend("TUTTI_DEVICE", device);
  INFO(n << " ranks as threads on " << device);
  REQUIRE(tutti_test::runThreads(n, [&](int rank, int nranks, ncclComm_t comm) {
            tutti_test::exchangeAllToAllv(rank, nranks, comm, issue);
          }) == "");
}

void requireProcesses(int n, const char* device, AllToAllvIssue issue) {
  ScopedEnv backend("TUTTI_DEVICE", device);
  INFO(n << " ranks as processes on " << device);
  REQUIRE(tutti_test::runProcesses(n, [&](int rank, int nranks, ncclComm_t comm) {
            tutti_test::exchangeAllToAllv(rank, nranks, comm, issue);
          }) == "");
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
  for (int n : {2, 4, 6}) requireThreads(n, "host", AllToAllvIssue::NullStream);
}

TEST_CASE("alltoallv: every pattern and type, 2, 4 and 6 rank processes, host backend (shm)",
          "[alltoallv][processes]") {
  for (int n : {2, 4, 6}) requireProcesses(n, "host", AllToAllvIssue::NullStream);
}

TEST_CASE("alltoallv: on a host stream inside a group with an all-reduce, 2, 4 and 6 ranks as threads",
          "[alltoallv][threads][stream]") {
  for (int n : {2, 4, 6}) requireThreads(n, "host", AllToAllvIssue::StreamInGroup);
}

TEST_CASE("alltoallv: emulated device, on a stream inside a group with an all-reduce, 2, 4 and 6 ranks as threads",
          "[alltoallv][threads][device]") {
  for (int n : {2, 4, 6}) requireThreads(n, "emulated", AllToAllvIssue::StreamInGroup);
}

TEST_CASE("alltoallv: emulated device, 2 and 4 rank processes", "[alltoallv][processes][device]") {
  for (int n : {2, 4}) requireProcesses(n, "emulated", AllToAllvIssue::StreamInGroup);
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
    tutti_test::exchangeAllToAllv(rank, n, comm, AllToAllvIssue::NullStream);
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
          return message.find(std::string("ncclAllToAllv #0 with a block of ") + a) != std::string::npos &&
                 message.find(std::string("ncclAllToAllv #0 with a block of ") + b) != std::string::npos;
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

// A block of 0 elements sends no message, so a receive that expects more from that peer waits: the
// peer's block of its next ncclAllToAllv must not fill it (silently wrong) but fail it, naming both calls.
TEST_CASE("alltoallv: a block of 0 against a nonzero one is caught at the next call's message, not taken from it",
          "[alltoallv][mismatch]") {
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  ScopedEnv backend("TUTTI_DEVICE", "host");
  const std::string failures = tutti_test::runThreads(2, [&](int rank, int n, ncclComm_t comm) {
    std::vector<size_t> counts(size_t(n), 4), displs = {0, 8};
    std::vector<int32_t> in(16, rank), out(16, -1);
    std::vector<size_t> first = counts;
    if (rank == 0) first[1] = 0;  // rank 1 expects 4 elements
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t result = ncclAllToAllv(in.data(), first.data(), displs.data(), out.data(), counts.data(),
                                        displs.data(), ncclInt32, comm, nullptr);
    const bool firstFailed = result != ncclSuccess;
    if (result == ncclSuccess)
      result = ncclAllToAllv(in.data(), counts.data(), displs.data(), out.data(), counts.data(), displs.data(),
                             ncclInt32, comm, nullptr);
    const std::string message = ncclGetLastError(comm);
    const std::string who =
        "rank " + std::to_string(rank) + " (" + std::to_string(tutti_test::secondsSince(start)) + " s): ";
    check(result != ncclSuccess, who + "both calls succeeded; rank 1's first took rank 0's second block");
    if (rank == 1)
      check(firstFailed && message.find("ncclAllToAllv #1 with a block of 16 bytes") != std::string::npos &&
                message.find("ncclAllToAllv #0 with a block of 16 bytes") != std::string::npos,
            who + "the first call did not fail naming both calls: " + message);
    check(tutti_test::secondsSince(start) < 30, who + "failed only after the timeout: " + message);
    throw tutti_test::RankFailure("expected: " + message);
  });
  INFO(failures);
  CHECK(failures.find("rank 0/2: expected: ") != std::string::npos);
  CHECK(failures.find("rank 1/2: expected: ") != std::string::npos);
}

TEST_CASE("alltoallv: a pair whose counts disagree fails both ranks at the first message, naming ncclAllToAllv",
          "[alltoallv][mismatch]") {
  requireMismatchCaught("host");
}

TEST_CASE("alltoallv: a pair whose counts disagree on the emulated device fails both ranks naming ncclAllToAllv",
          "[alltoallv][mismatch][device]") {
  requireMismatchCaught("emulated");
}
