// Calls that disagree between ranks on different hosts: the network proxy carries each message's
// call signature in a trailer (transports/net/net_proxy.cpp), so the receiver catches the mismatch
// at the first message, naming both calls, as it does between processes of one host.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/hosts_support.h"

using tutti_test::check;
using tutti_test::HostLayout;
using tutti_test::runOnHosts;

namespace {

// Three hosts of one rank each, one ring on one channel, so every connection is TCP and the ranks
// open the same connections whatever the count. Rank 0 runs `odd` as its second operation, the
// others `usual`; the first operation agrees, so the signatures' sequence numbers have moved.
struct Call {
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op = ncclSum;
};

void requireCaughtOverTcp(Call odd, Call usual, const std::string& ours, const std::string& theirs) {
  HostLayout layout;
  layout.hosts = 3;
  layout.ranksPerHost = 1;
  // A mismatch must not need the timeout: the ranks would otherwise fail only after 60 s.
  layout.environment = {
      {"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_ALGO", "ring"}, {"NCCL_MAX_NCHANNELS", "1"}, {"TUTTI_TIMEOUT", "60"}};
  layout.timeoutSeconds = 90;
  auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
    // A rank still finishing the first operation when another announces the mismatch fails in it.
    std::vector<char> warm(4096, 1);
    auto start = std::chrono::steady_clock::now();
    ncclResult_t result = ncclAllReduce(warm.data(), warm.data(), 1024, ncclFloat32, ncclSum, comm, nullptr);
    const Call c = rank == 0 ? odd : usual;
    std::vector<char> in(c.count * 8, 1), out(c.count * 8, 0);
    if (result == ncclSuccess) {
      start = std::chrono::steady_clock::now();
      result = ncclAllReduce(in.data(), out.data(), c.count, c.type, c.op, comm, nullptr);
    }
    const double seconds = tutti_test::secondsSince(start);
    const std::string message = ncclGetLastError(comm);
    const std::string who = "rank " + std::to_string(rank) + " (" + std::to_string(seconds) + " s): ";
    check(result != ncclSuccess, who + "the mismatched all-reduce succeeded");
    check(seconds < 30, who + "failed only after " + std::to_string(seconds) + " s, as by the timeout: " + message);
    // Every rank's error names the call: the rank that saw the mismatch both calls, the others the
    // failure it announced, whose text holds them too.
    check(message.find(ours) != std::string::npos && message.find(theirs) != std::string::npos,
          who + "the error does not name both \"" + ours + "\" and \"" + theirs + "\": " + message);
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

}  // namespace

TEST_CASE("net mismatch: a count that differs between hosts fails every rank at once, naming both calls",
          "[mismatch][net][processes][any-net]") {
  requireCaughtOverTcp({100000, ncclFloat32}, {400000, ncclFloat32}, "count 100000", "count 400000");
}

TEST_CASE("net mismatch: the same bytes as another type between hosts fail instead of reducing garbage",
          "[mismatch][net][processes][any-net]") {
  requireCaughtOverTcp({200000, ncclFloat32}, {200000, ncclInt32}, "float32", "int32");
}

TEST_CASE("net mismatch: another reduction between hosts is named", "[mismatch][net][processes][any-net]") {
  requireCaughtOverTcp({50000, ncclFloat32, ncclMax}, {50000, ncclFloat32, ncclSum}, "max", "sum");
}

TEST_CASE("net mismatch: send and receive of different byte counts between hosts fail both ranks",
          "[mismatch][net][processes][any-net]") {
  HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 1;
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"}, {"TUTTI_TIMEOUT", "60"}};
  layout.timeoutSeconds = 90;
  auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> buf(300000, 1.0f);
    auto start = std::chrono::steady_clock::now();
    ncclResult_t result = rank == 0 ? ncclSend(buf.data(), 100000, ncclFloat32, 1, comm, nullptr)
                                    : ncclRecv(buf.data(), 300000, ncclFloat32, 0, comm, nullptr);
    const double seconds = tutti_test::secondsSince(start);
    const std::string message = ncclGetLastError(comm);
    const std::string who = "rank " + std::to_string(rank) + ": ";
    if (rank == 1) {
      check(result != ncclSuccess, who + "a receive of 1200000 bytes matched a send of 400000");
      check(message.find("400000") != std::string::npos && message.find("1200000") != std::string::npos,
            who + "the error does not name both byte counts: " + message);
    }
    // The sender may have finished before the receiver looked; if it failed, it failed early.
    check(result == ncclSuccess || seconds < 30,
          who + "failed only after " + std::to_string(seconds) + " s: " + message);
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}
