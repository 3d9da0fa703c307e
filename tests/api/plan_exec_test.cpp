// The host executor and launch running the whole plan IR: hand-written test algorithms (several
// peers per lane, scratch chunks, Split tiles of tileChunks, connection tags, lanes that share
// connections) forced on communicators and run through the public API against a float64
// reference, as threads, processes and over TCP; scratch reuse; a timeout naming the peer; ring
// plans along a shuffled ring order, and along the topology's ring on interleaved hosts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/topo_init.h"
#include "runtime/launch/comm_launch.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti::plan::Algorithm;
using tutti::plan::Buf;
using tutti::plan::BufRef;
using tutti::plan::ConnKind;
using tutti::plan::LaneSpec;
using tutti::plan::Layout;
using tutti::plan::Op;
using tutti::plan::PlanRequest;
using tutti::plan::RankPlan;
using tutti::plan::Step;
using tutti_test::Case;
using tutti_test::check;
using tutti_test::Coll;

namespace {

namespace plan = tutti::plan;

int mod(int a, int n) { return ((a % n) + n) % n; }
BufRef in(int chunk = -1) { return {Buf::In, chunk}; }
BufRef out(int chunk = -1) { return {Buf::Out, chunk}; }
BufRef scratch(int chunk) { return {Buf::Scratch, chunk}; }
BufRef none() { return {}; }
Step step(Op op, uint8_t flags, BufRef src, BufRef dst, int sendConn = 0, int recvConn = 0) {
  return Step{op, flags, src, dst, uint8_t(sendConn), uint8_t(recvConn)};
}

// One rank: a local copy that applies the pre- and post-operations.
RankPlan single(const std::string& name, Layout layout) {
  LaneSpec lane;
  lane.layout = layout;
  lane.steps.push_back(step(Op::Copy, plan::kPre | plan::kPost, in(0), out(0)));
  return RankPlan{name, {lane}};
}

void requirePowerOfTwo(const PlanRequest& q, const char* name) {
  if (q.nranks & (q.nranks - 1))
    throw tutti::Error(tutti::ErrorCode::InvalidUsage, std::string(name) + " needs a power-of-two number of ranks");
}

// Recursive doubling in the output buffer: one lane, one peer per round (r xor 2^i), each round
// sends the partial result and reduces the partner's into it.
RankPlan recursiveDoubling(const PlanRequest& q) {
  if (q.nranks == 1) return single("test-recdoubling", Layout::Whole);
  requirePowerOfTwo(q, "test-recdoubling");
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.layout = Layout::Whole;
  for (int d = 1; d < q.nranks; d <<= 1) {
    lane.sendPeers.push_back(q.rank ^ d);
    lane.recvPeers.push_back(q.rank ^ d);
  }
  lane.steps.push_back(step(Op::Copy, plan::kPre, in(), out()));
  const int rounds = int(lane.sendPeers.size());
  for (int i = 0; i < rounds; i++) {
    lane.steps.push_back(step(Op::Send, 0, out(), none(), i, 0));
    lane.steps.push_back(step(Op::RecvReduceCopy, i == rounds - 1 ? plan::kPost : 0, out(), out(), 0, i));
  }
  return RankPlan{"test-recdoubling", {lane}};
}

// The same exchange staged in two scratch chunks that take turns as the accumulator; the output
// is written once, at the end.
RankPlan recursiveDoublingScratch(const PlanRequest& q) {
  if (q.nranks == 1) return single("test-recdoubling-scratch", Layout::Whole);
  requirePowerOfTwo(q, "test-recdoubling-scratch");
  RankPlan p = recursiveDoubling(q);
  p.algorithm = "test-recdoubling-scratch";
  LaneSpec& lane = p.lanes[0];
  lane.scratchChunks = 2;
  lane.steps.clear();
  lane.steps.push_back(step(Op::Copy, plan::kPre, in(), scratch(0)));
  const int rounds = int(lane.sendPeers.size());
  for (int i = 0; i < rounds; i++) {
    lane.steps.push_back(step(Op::Send, 0, scratch(i % 2), none(), i, 0));
    lane.steps.push_back(step(Op::RecvReduceCopy, 0, scratch(i % 2), scratch((i + 1) % 2), 0, i));
  }
  lane.steps.push_back(step(Op::Copy, plan::kPost, scratch(rounds % 2), out()));
  return p;
}

// Ring all-reduce over chunks base .. base + n - 1 of each tile, along `order` (order[i] is the
// rank at ring position i).
LaneSpec ringOver(int rank, int n, int base, const std::vector<int>& order, int tag) {
  int i = 0;
  while (order[size_t(i)] != rank) i++;
  LaneSpec lane;
  lane.kind = ConnKind::Ring;
  lane.tag = tag;
  lane.layout = Layout::Split;
  lane.tileChunks = 2 * n;
  lane.sendPeers = {order[size_t(mod(i + 1, n))]};
  lane.recvPeers = {order[size_t(mod(i - 1, n))]};
  auto c = [&](int k) { return base + mod(k, n); };
  auto& s = lane.steps;
  s.push_back(step(Op::Send, plan::kPre, in(c(i)), none()));
  for (int k = 1; k < n - 1; k++) s.push_back(step(Op::RecvReduceSend, plan::kPre, in(c(i - k)), none()));
  s.push_back(step(Op::RecvReduceCopySend, plan::kPre | plan::kPost, in(c(i + 1)), out(c(i + 1))));
  for (int j = 1; j < n - 1; j++) s.push_back(step(Op::RecvSend, 0, none(), out(c(i + 1 - j))));
  s.push_back(step(Op::Recv, 0, none(), out(c(i + 2 - n))));
  return lane;
}

// Two half rings at once: tiles of 2n chunks; the first half goes round the ring forwards on
// tag 0, the second backwards on tag 1.
RankPlan halfRings(const PlanRequest& q) {
  const int n = q.nranks;
  if (n == 1) return single("test-halfrings", Layout::Split);
  std::vector<int> forwards(size_t(n), 0), backwards(size_t(n), 0);
  for (int i = 0; i < n; i++) {
    forwards[size_t(i)] = i;
    backwards[size_t(i)] = mod(-i, n);
  }
  return RankPlan{"test-halfrings", {ringOver(q.rank, n, 0, forwards, 0), ringOver(q.rank, n, n, backwards, 1)}};
}

// Ring all-reduce whose second lap passes each finished chunk through a scratch chunk: receive
// it there (sized by what arrives, as the last chunks of a range are shorter), send it on, copy
// it out.
RankPlan ringThroughScratch(const PlanRequest& q) {
  const int n = q.nranks, r = q.rank;
  if (n == 1) return single("test-ring-scratch", Layout::Split);
  LaneSpec lane;
  lane.kind = ConnKind::Ring;
  lane.layout = Layout::Split;
  lane.scratchChunks = 1;
  lane.sendPeers = {mod(r + 1, n)};
  lane.recvPeers = {mod(r - 1, n)};
  auto& s = lane.steps;
  s.push_back(step(Op::Send, plan::kPre, in(r), none()));
  for (int k = 1; k < n - 1; k++) s.push_back(step(Op::RecvReduceSend, plan::kPre, in(mod(r - k, n)), none()));
  s.push_back(step(Op::RecvReduceCopySend, plan::kPre | plan::kPost, in(mod(r + 1, n)), out(mod(r + 1, n))));
  for (int j = 1; j < n; j++) {
    s.push_back(step(Op::Recv, 0, none(), scratch(0)));
    if (j < n - 1) s.push_back(step(Op::Send, 0, scratch(0), none()));
    s.push_back(step(Op::Copy, 0, scratch(0), out(mod(r + 1 - j, n))));
  }
  return RankPlan{"test-ring-scratch", {lane}};
}

// A binomial tree rooted at the root (rank 0 for all-reduce): each rank sums its children's
// partial results into a scratch accumulator, in one lane that receives from every child, and
// sends the sum to its parent. All-reduce then sends the result back down the same lane.
RankPlan binomial(const PlanRequest& q) {
  const int n = q.nranks;
  if (n == 1) return single("test-binomial", Layout::Whole);
  const bool all = q.coll == plan::Coll::AllReduce;
  const int root = all ? 0 : q.root;
  const int v = mod(q.rank - root, n);
  auto rankOf = [&](int u) { return mod(u + root, n); };
  std::vector<int> children;
  int parent = -1;
  for (int d = 1; d < n; d <<= 1) {
    if (v & d) {
      parent = rankOf(v - d);
      break;
    }
    if (v + d < n) children.push_back(rankOf(v + d));
  }
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.layout = Layout::Whole;
  lane.scratchChunks = 1;
  lane.recvPeers = children;
  if (parent >= 0) {
    lane.sendPeers.push_back(parent);
    lane.recvPeers.push_back(parent);
  }
  const int firstChild = int(lane.sendPeers.size());
  lane.sendPeers.insert(lane.sendPeers.end(), children.begin(), children.end());
  auto& s = lane.steps;
  s.push_back(step(Op::Copy, plan::kPre, in(), scratch(0)));
  for (size_t c = 0; c < children.size(); c++)
    s.push_back(step(Op::RecvReduceCopy, 0, scratch(0), scratch(0), 0, int(c)));
  if (parent < 0) {
    s.push_back(step(Op::Copy, plan::kPost, scratch(0), out()));
  } else {
    s.push_back(step(Op::Send, 0, scratch(0), none(), 0, 0));
    if (all) s.push_back(step(Op::Recv, 0, none(), out(), 0, int(children.size())));
  }
  if (all)
    for (size_t c = 0; c < children.size(); c++) s.push_back(step(Op::Send, 0, out(), none(), firstChild + int(c), 0));
  return RankPlan{"test-binomial", {lane}};
}

// Two ranks whose lanes cross: each rank first receives (on the tag its peer sends on), then
// sends on the other tag. Run one after another, both ranks would wait in their first lane
// forever; the lanes share no connection, so they must run concurrently. Out of place only.
RankPlan crossedTags(const PlanRequest& q) {
  if (q.nranks == 1) return single("test-crossed", Layout::Whole);
  if (q.nranks != 2) throw tutti::Error(tutti::ErrorCode::InvalidUsage, "test-crossed needs 2 ranks");
  const int peer = 1 - q.rank;
  LaneSpec receive, send;
  receive.kind = send.kind = ConnKind::Direct;
  receive.layout = send.layout = Layout::Whole;
  receive.tag = q.rank;
  send.tag = 1 - q.rank;
  receive.recvPeers = {peer};
  send.sendPeers = {peer};
  receive.steps.push_back(step(Op::RecvReduceCopy, plan::kPre | plan::kPost, in(), out()));
  send.steps.push_back(step(Op::Send, plan::kPre, in(), none()));
  return RankPlan{"test-crossed", {receive, send}};
}

// Three lanes that must form one queue: the first uses the send and receive connections to the
// peer, the second only the send one, the third only the receive one. Lane by lane they compute
// the sum, send it, and take the peer's (equal) sum as the output; run concurrently, the FIFOs
// would carry the lanes' chunks interleaved. (Each rank's second lane sends every tile before
// its third receives any: counts must fit the FIFO, at most TUTTI_NSTEPS tiles.)
RankPlan sharedConnections(const PlanRequest& q) {
  if (q.nranks == 1) return single("test-shared", Layout::Whole);
  if (q.nranks != 2) throw tutti::Error(tutti::ErrorCode::InvalidUsage, "test-shared needs 2 ranks");
  const int peer = 1 - q.rank;
  LaneSpec both, sendOnly, recvOnly;
  for (LaneSpec* l : {&both, &sendOnly, &recvOnly}) {
    l->kind = ConnKind::Direct;
    l->layout = Layout::Whole;
  }
  both.sendPeers = sendOnly.sendPeers = {peer};
  both.recvPeers = recvOnly.recvPeers = {peer};
  both.steps = {step(Op::Send, plan::kPre, in(), none()),
                step(Op::RecvReduceCopy, plan::kPre | plan::kPost, in(), out())};
  sendOnly.steps = {step(Op::Send, 0, out(), none())};
  recvOnly.steps = {step(Op::Recv, 0, none(), out())};
  return RankPlan{"test-shared", {both, sendOnly, recvOnly}};
}

// Rank 0 receives from ranks 1 and 2 in one lane; rank 2 connects but never sends.
RankPlan stuck(const PlanRequest& q) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.layout = Layout::Whole;
  if (q.rank == 0) {
    lane.recvPeers = {1, 2};
    lane.steps = {step(Op::Recv, 0, none(), out(), 0, 0), step(Op::Recv, 0, none(), out(), 0, 1)};
  } else if (q.rank <= 2) {
    lane.sendPeers = {0};
    if (q.rank == 1) lane.steps = {step(Op::Send, 0, in(), none())};
  } else {
    lane.kind = ConnKind::None;
  }
  return RankPlan{"test-stuck", {lane}};
}

// The order "test-shuffled-ring" walks: a shuffle of the ranks, the same on every rank.
std::vector<int> shuffledOrder(int nranks) {
  std::vector<int> order(static_cast<size_t>(nranks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(unsigned(nranks) * 7919u));
  return order;
}

RankPlan shuffledRing(const PlanRequest& q) {
  PlanRequest along = q;
  along.ring = shuffledOrder(q.nranks);
  RankPlan p = plan::builtinAlgorithms().find("ring")->build(along);
  p.algorithm = "test-shuffled-ring";
  return p;
}

std::vector<Algorithm> testAlgorithms() {
  using plan::Coll;
  return {
      {"test-recdoubling", {Coll::AllReduce}, false, "plan_exec_test", recursiveDoubling},
      {"test-recdoubling-scratch", {Coll::AllReduce}, false, "plan_exec_test", recursiveDoublingScratch},
      {"test-halfrings", {Coll::AllReduce}, false, "plan_exec_test", halfRings},
      {"test-ring-scratch", {Coll::AllReduce}, false, "plan_exec_test", ringThroughScratch},
      {"test-binomial", {Coll::AllReduce, Coll::Reduce}, false, "plan_exec_test", binomial},
      {"test-crossed", {Coll::AllReduce}, false, "plan_exec_test", crossedTags},
      {"test-shared", {Coll::AllReduce}, false, "plan_exec_test", sharedConnections},
      {"test-stuck", {Coll::AllReduce}, false, "plan_exec_test", stuck},
      {"test-shuffled-ring",
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce},
       false,
       "plan_exec_test",
       shuffledRing},
  };
}

// Registers the test algorithms on this rank's communicator and forces `name`.
void force(ncclComm_t comm, const std::string& name) {
  if (!comm->planning.algorithms.find(name))
    for (Algorithm& a : testAlgorithms()) comm->planning.algorithms.add(a);
  comm->planning.forcedAlgorithm = name;
}

const std::vector<size_t> kSmallCounts = {0, 1, 7, 1023};
constexpr size_t kLarge = (1u << 20) + 3;

// Sum for every type, every op for float32 and int32, in and out of place, of the collectives
// the algorithm serves; at 1M+3 elements, float32 sum out of place and int32 avg in place.
std::vector<Case> casesFor(const std::string& name, int nranks, const std::vector<size_t>& counts, bool large) {
  std::vector<Case> cases;
  for (const Case& c : tutti_test::allCases(counts, nranks)) {
    bool served = c.coll == Coll::AllReduce || (c.coll == Coll::Reduce && name == "test-binomial");
    if (served && (c.op == ncclSum || c.type == ncclFloat32 || c.type == ncclInt32)) cases.push_back(c);
  }
  if (large) {
    cases.push_back(Case{Coll::AllReduce, ncclFloat32, ncclSum, kLarge, false, 0});
    cases.push_back(Case{Coll::AllReduce, ncclInt32, ncclAvg, kLarge, true, 0});
    if (name == "test-binomial") cases.push_back(Case{Coll::Reduce, ncclFloat32, ncclSum, kLarge, true, 1 % nranks});
  }
  return cases;
}

void runWith(const std::string& name, const std::vector<Case>& cases, int rank, int nranks, ncclComm_t comm) {
  force(comm, name);
  tutti_test::runAll(cases, rank, nranks, comm);
}

std::vector<int> ranksFor(const std::string& name, std::vector<int> all) {
  if (name.rfind("test-recdoubling", 0) != 0) return all;
  std::vector<int> powers;
  for (int n : all)
    if ((n & (n - 1)) == 0) powers.push_back(n);
  return powers;
}

void runOnThreads(const std::string& name) {
  for (int n : ranksFor(name, {1, 2, 3, 4, 8})) {
    INFO(name << " on " << n << " rank threads");
    auto cases = casesFor(name, n, kSmallCounts, n == 3 || n == 4);
    REQUIRE(tutti_test::runThreads(
                n, [&](int rank, int nranks, ncclComm_t comm) { runWith(name, cases, rank, nranks, comm); }) == "");
  }
}

}  // namespace

TEST_CASE("plan exec: recursive doubling, one lane with a peer per round, ranks as threads", "[plan-exec][threads]") {
  runOnThreads("test-recdoubling");
}

TEST_CASE("plan exec: recursive doubling staged in scratch chunks, ranks as threads", "[plan-exec][threads][scratch]") {
  runOnThreads("test-recdoubling-scratch");
}

TEST_CASE("plan exec: two half rings on tags 0 and 1 over Split tiles of 2n chunks, ranks as threads",
          "[plan-exec][threads][tags]") {
  runOnThreads("test-halfrings");
}

TEST_CASE("plan exec: a ring whose second lap goes through a scratch chunk sized by what arrives, ranks as threads",
          "[plan-exec][threads][scratch]") {
  runOnThreads("test-ring-scratch");
}

TEST_CASE("plan exec: binomial reduce and all-reduce, a lane receiving from several children, ranks as threads",
          "[plan-exec][threads][scratch]") {
  runOnThreads("test-binomial");
}

TEST_CASE("plan exec: lanes on different tags run concurrently, lanes sharing connections in plan order",
          "[plan-exec][threads][queues]") {
  std::vector<Case> crossed, shared;
  for (const Case& c : casesFor("test-crossed", 2, kSmallCounts, false))
    if (!c.inPlace) crossed.push_back(c);
  shared = casesFor("test-shared", 2, kSmallCounts, false);
  shared.push_back(Case{Coll::AllReduce, ncclFloat32, ncclSum, 600000, false, 0});  // 3 tiles on each of 2 channels
  shared.push_back(Case{Coll::AllReduce, ncclInt32, ncclAvg, 600000, true, 0});
  REQUIRE(tutti_test::runThreads(2, [&](int rank, int nranks, ncclComm_t comm) {
            runWith("test-crossed", crossed, rank, nranks, comm);
            runWith("test-shared", shared, rank, nranks, comm);
          }) == "");
}

TEST_CASE("plan exec: every test algorithm across 4 channels and many tiles", "[plan-exec][threads][channels]") {
  tutti_test::ScopedEnv channels("NCCL_MIN_NCHANNELS", "4");
  tutti_test::ScopedEnv slots("NCCL_BUFFSIZE", "65536");  // 8 KiB FIFO slots: tens of tiles per channel
  for (const char* name :
       {"test-recdoubling", "test-recdoubling-scratch", "test-halfrings", "test-ring-scratch", "test-binomial"}) {
    INFO(name);
    std::vector<Case> cases;
    for (bool inPlace : {false, true}) {
      cases.push_back(Case{Coll::AllReduce, ncclFloat32, ncclSum, 300007, inPlace, 0});
      cases.push_back(Case{Coll::AllReduce, ncclBfloat16, ncclSum, 500001, inPlace, 0});
      cases.push_back(Case{Coll::AllReduce, ncclInt32, ncclAvg, 262147, inPlace, 0});
    }
    REQUIRE(tutti_test::runThreads(4, [&](int rank, int nranks, ncclComm_t comm) {
              check(comm->settings.nchannels == 4,
                    "the communicator has " + std::to_string(comm->settings.nchannels) + " channels, not 4");
              runWith(name, cases, rank, nranks, comm);
              // The connections the lanes used exist on every channel, with the lanes' tags.
              std::set<std::pair<int, int>> channelTags;
              for (auto& [key, conn] : comm->links.connections)
                if (key.kind != tutti::plan::ConnKind::Ring || std::string(name).find("ring") != std::string::npos)
                  channelTags.insert({key.channel, key.tag});
              size_t expected = std::string(name) == "test-halfrings" ? 8 : 4;
              check(channelTags.size() == expected, std::string(name) + ": connections on " +
                                                        std::to_string(channelTags.size()) +
                                                        " (channel, tag) pairs, expected " + std::to_string(expected));
            }) == "");
  }
}

TEST_CASE("plan exec: every test algorithm, ranks as processes (shm)", "[plan-exec][processes]") {
  int n = GENERATE(2, 4);
  REQUIRE(tutti_test::runProcesses(n, [&](int rank, int nranks, ncclComm_t comm) {
            for (const char* name : {"test-recdoubling", "test-recdoubling-scratch", "test-halfrings", "test-binomial"})
              runWith(name, casesFor(name, nranks, kSmallCounts, true), rank, nranks, comm);
          }) == "");
}

TEST_CASE("plan exec: every test algorithm over TCP between 4 rank processes", "[plan-exec][processes][net]") {
  tutti_test::HostLayout layout;
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_SHM_DISABLE", "1"}};
  auto outcomes = tutti_test::runOnHosts(layout, [&](int rank, int nranks, ncclComm_t comm) {
    for (const char* name : {"test-recdoubling", "test-recdoubling-scratch", "test-halfrings", "test-binomial"}) {
      std::vector<Case> cases;
      // Every type once; the other counts and ops are covered above, and each case here pays
      // TCP round trips.
      for (const Case& c : casesFor(name, nranks, {1023}, true))
        if (c.op == ncclSum && (c.count < kLarge || c.type == ncclFloat32)) cases.push_back(c);
      runWith(name, cases, rank, nranks, comm);
    }
    for (auto& [key, conn] : comm->links.connections)
      check(conn->transport().rfind("net/", 0) == 0,
            "a connection to rank " + std::to_string(key.peer) + " uses " + conn->transport());
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("plan exec: scratch is taken from one block per communicator and reused, inline and on a host stream",
          "[plan-exec][threads][scratch]") {
  REQUIRE(
      tutti_test::runThreads(4, [&](int rank, int nranks, ncclComm_t comm) {
        const std::vector<Case> cases = {Case{Coll::AllReduce, ncclFloat32, ncclSum, kLarge, false, 0},
                                         Case{Coll::AllReduce, ncclFloat64, ncclMax, 5000, true, 0}};
        runWith("test-binomial", cases, rank, nranks, comm);
        runWith("test-recdoubling-scratch", cases, rank, nranks, comm);
        const size_t blocks = comm->executor.scratch->blocks(), bytes = comm->executor.scratch->totalBytes();
        check(blocks == 1, "scratch pool holds " + std::to_string(blocks) + " blocks after serial launches");
        runWith("test-binomial", cases, rank, nranks, comm);
        check(comm->executor.scratch->totalBytes() == bytes, "scratch grew on a repeated launch");

        // Launches bound now and run later on a stream's thread, one after another.
        cudaStream_t stream = nullptr;
        TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
        const size_t count = 300000;
        std::vector<std::vector<float>> bufs(6, std::vector<float>(count));
        for (size_t b = 0; b < bufs.size(); b++)
          for (size_t i = 0; i < count; i++) bufs[b][i] = float((rank + 1) * (b + 1) + i % 7);
        for (size_t b = 0; b < bufs.size(); b++) {
          force(comm, b % 2 ? "test-binomial" : "test-recdoubling-scratch");
          TUTTI_NCCL_CHECK(ncclAllReduce(bufs[b].data(), bufs[b].data(), count, ncclFloat32, ncclSum, comm, stream));
        }
        TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
        TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
        const double rankSum = nranks * (nranks + 1) / 2.0;
        for (size_t b = 0; b < bufs.size(); b++)
          for (size_t i = 0; i < count; i++) {
            double want = rankSum * double(b + 1) + nranks * double(i % 7);
            if (bufs[b][i] != float(want))
              throw tutti_test::RankFailure("stream launch " + std::to_string(b) + " element " + std::to_string(i) +
                                            " is " + std::to_string(bufs[b][i]) + ", want " + std::to_string(want));
          }
        check(
            comm->executor.scratch->blocks() == 1,
            "scratch pool holds " + std::to_string(comm->executor.scratch->blocks()) + " blocks after stream launches");
      }) == "");
}

TEST_CASE("plan exec: an algorithm that does not serve the collective falls back to the default",
          "[plan-exec][threads]") {
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int nranks, ncclComm_t comm) {
            force(comm, "test-binomial");
            tutti_test::runAll({Case{Coll::AllGather, ncclInt32, ncclSum, 1000, false, 0},
                                Case{Coll::ReduceScatter, ncclFloat32, ncclSum, 1000, true, 0}},
                               rank, nranks, comm);
            comm->planning.forcedAlgorithm = "no-such-algorithm";
            // (larger than the mailboxes, where a small all-reduce would run without a plan)
            tutti_test::runAll({Case{Coll::AllReduce, ncclFloat32, ncclSum, 4000, false, 0}}, rank, nranks, comm);
            std::set<std::pair<std::string, int>> used;
            for (auto& [key, plan] : comm->planning.planCache) used.insert({std::get<0>(key), std::get<1>(key)});
            // The default is the selector's choice for each call.
            auto chosen = [&](plan::Coll coll, size_t bytes) {
              return comm->planning.selector->select(coll, bytes).algorithm->name;
            };
            const std::set<std::pair<std::string, int>> expected = {
                {chosen(plan::Coll::AllGather, 1000 * 4 * size_t(nranks)), int(plan::Coll::AllGather)},
                {chosen(plan::Coll::ReduceScatter, 1000 * 4 * size_t(nranks)), int(plan::Coll::ReduceScatter)},
                {chosen(plan::Coll::AllReduce, 4000 * 4), int(plan::Coll::AllReduce)}};
            check(used == expected, "plans were built for other algorithms than the selector's choices");
          }) == "");
}

TEST_CASE("plan exec: a plan whose step names a connection the lane lacks is refused, naming the algorithm",
          "[plan-exec][threads]") {
  REQUIRE(tutti_test::runThreads(2, [&](int, int, ncclComm_t comm) {
            Algorithm bad{"test-bad", {plan::Coll::AllReduce}, false, "plan_exec_test", [](const PlanRequest& q) {
                            LaneSpec lane;
                            lane.kind = ConnKind::Direct;
                            lane.layout = Layout::Whole;
                            lane.sendPeers = {1 - q.rank};
                            lane.steps = {step(Op::Send, 0, in(), none(), 1, 0)};
                            return RankPlan{"test-bad", {lane}};
                          }};
            comm->planning.algorithms.add(bad);
            comm->planning.forcedAlgorithm = "test-bad";
            float x = 1;
            ncclResult_t result = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
            std::string message = ncclGetLastError(comm);
            check(result == ncclInvalidUsage, std::string("the bad plan gave ") + ncclGetErrorString(result));
            check(
                message.find("test-bad") != std::string::npos && message.find("send connection 1") != std::string::npos,
                "the error does not name the algorithm and connection: " + message);
          }) == "");
}

TEST_CASE("plan exec: a joined message received as another number of steps fails, naming the peer",
          "[plan-exec][threads][join]") {
  // Each rank sends its block twice as one message of 2 parts; rank 0 receives it so, rank 1
  // expects a message of 3.
  REQUIRE(tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
            Algorithm bad{"test-join", {plan::Coll::AllGather}, false, "plan_exec_test", [](const PlanRequest& q) {
                            LaneSpec lane;
                            lane.kind = ConnKind::Direct;
                            lane.layout = Layout::Blocks;
                            lane.sendPeers = {1 - q.rank};
                            lane.recvPeers = {1 - q.rank};
                            const int r = q.rank, parts = r == 0 ? 2 : 3;
                            lane.steps = {step(Op::Copy, 0, in(), out(r)), step(Op::Send, plan::kJoin, out(r), none()),
                                          step(Op::Send, 0, out(r), none())};
                            for (int j = 0; j < parts; j++)
                              lane.steps.push_back(step(Op::Recv, j + 1 < parts ? plan::kJoin : 0, none(), out(1 - r)));
                            return RankPlan{"test-join", {lane}};
                          }};
            comm->planning.algorithms.add(bad);
            comm->planning.forcedAlgorithm = "test-join";
            std::vector<float> x(7, 1.0f), y(14, 0.0f);
            ncclResult_t result = ncclAllGather(x.data(), y.data(), 7, ncclFloat32, comm, nullptr);
            std::string message = ncclGetLastError(comm);
            if (rank == 0) check(result == ncclSuccess, std::string("rank 0's matching message failed: ") + message);
            if (rank == 1)
              check(result == ncclInvalidUsage &&
                        message.find("received a message of 2 joined steps from rank 0") != std::string::npos &&
                        message.find("joins 3 steps") != std::string::npos,
                    "the error does not say what arrived from whom: " + message);
          }) == "");
}

TEST_CASE("plan exec: a receive that never comes times out, naming the peer of the blocked step",
          "[plan-exec][threads][faults]") {
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "2");
  std::vector<std::string> messages(3);
  std::vector<ncclResult_t> results(3, ncclSuccess);
  auto start = std::chrono::steady_clock::now();
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int, ncclComm_t comm) {
            force(comm, "test-stuck");
            std::vector<float> buf(100, 1.0f);
            results[size_t(rank)] =
                ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
            messages[size_t(rank)] = ncclGetLastError(comm);
          }) == "");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 30);
  CHECK(results[1] == ncclSuccess);
  CHECK(results[2] == ncclSuccess);
  CHECK(results[0] == ncclRemoteError);
  INFO(messages[0]);
  CHECK(messages[0].find("waiting for data from rank 2") != std::string::npos);
  CHECK(messages[0].find("TUTTI_TIMEOUT") != std::string::npos);
}

namespace {

// The ring's collectives: sum for every type, every op for float32 and int32, in and out of
// place, a middle root; and one large case per collective.
std::vector<Case> ringCases(int nranks, const std::vector<size_t>& counts, bool large) {
  std::vector<Case> cases;
  for (const Case& c : tutti_test::allCases(counts, nranks)) {
    bool ring = c.coll == Coll::AllReduce || c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter ||
                c.coll == Coll::Broadcast || c.coll == Coll::Reduce;
    if (ring && (c.op == ncclSum || c.type == ncclFloat32 || c.type == ncclInt32)) cases.push_back(c);
  }
  if (large)
    for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
      cases.push_back(Case{coll, ncclFloat32, ncclSum, coll == Coll::AllReduce ? kLarge : kLarge / 4,
                           coll == Coll::Reduce, nranks / 2});
  return cases;
}

std::string orderText(const std::vector<int>& order) {
  std::string s;
  for (int r : order) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

int crossingsOf(ncclComm_t comm, const std::vector<int>& order) {
  int count = 0;
  for (size_t i = 0; i < order.size(); i++)
    count += comm->identity.peers[size_t(order[i])].hostHash !=
             comm->identity.peers[size_t(order[(i + 1) % order.size()])].hostHash;
  return count;
}

}  // namespace

TEST_CASE("plan exec: ring plans along a shuffled ring order, every ring collective, ranks as threads",
          "[plan-exec][threads][ring-order]") {
  tutti_test::ScopedEnv channels("NCCL_MIN_NCHANNELS", "2");
  for (int n : {2, 3, 5, 8}) {
    std::vector<int> order = shuffledOrder(n);
    INFO(n << " ranks, ring order " << orderText(order));
    auto cases = ringCases(n, {0, 1, 7, 1023}, n == 3 || n == 5);
    REQUIRE(tutti_test::runThreads(n, [&](int rank, int nranks, ncclComm_t comm) {
              runWith("test-shuffled-ring", cases, rank, nranks, comm);
            }) == "");
  }
}

TEST_CASE("plan exec: tree all-reduce along the topology's node trees on interleaved hosts",
          "[plan-exec][processes][net][ring-order]") {
  tutti_test::HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 3;
  layout.interleaved = true;  // ranks 0, 2, 4 on one host, 1, 3, 5 on the other
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_MIN_NCHANNELS", "2"}};
  auto outcomes = tutti_test::runOnHosts(layout, [&](int rank, int nranks, ncclComm_t comm) {
    comm->planning.forcedAlgorithm = "tree";
    std::vector<Case> cases;
    for (size_t count : {size_t(1), size_t(1023), size_t(300001)})
      for (ncclDataType_t type : {ncclFloat32, ncclInt64, ncclFloat64})
        for (bool inPlace : {false, true}) cases.push_back(Case{Coll::AllReduce, type, ncclSum, count, inPlace, 0});
    cases.push_back(Case{Coll::AllReduce, ncclFloat32, ncclMax, 4099, false, 0});
    tutti_test::runAll(cases, rank, nranks, comm);
    // Each channel's two trees join the hosts' heads by one edge; the plans that ran are theirs.
    check(comm->settings.nchannels == 2, "expected 2 channels, got " + std::to_string(comm->settings.nchannels));
    for (int channel = 0; channel < comm->settings.nchannels; channel++) {
      const std::vector<tutti::plan::TreeShape>& trees = tutti::treesOf(comm->planning.topology.get(), channel);
      check(trees.size() == 2, "channel " + std::to_string(channel) + " has no node trees");
      int plans = 0;
      for (const auto& [key, plan] : comm->planning.planCache) {
        if (std::get<0>(key) != "tree" ||
            std::get<4>(key) != tutti::treeIndexOf(comm->planning.topology.get(), channel))
          continue;
        plans++;
        for (size_t t = 0; t < 2; t++) {
          const tutti::plan::TreeShape& shape = trees[t];
          int crossing = 0;
          for (int r = 0; r < nranks; r++)
            if (shape.parent[size_t(r)] >= 0)
              crossing += comm->identity.peers[size_t(r)].hostHash !=
                          comm->identity.peers[size_t(shape.parent[size_t(r)])].hostHash;
          check(crossing == 1, "tree " + std::to_string(t) + " of channel " + std::to_string(channel) +
                                   " crosses between the hosts " + std::to_string(crossing) + " times, not once");
          std::set<int> expected(shape.children[size_t(rank)].begin(), shape.children[size_t(rank)].end());
          if (shape.parent[size_t(rank)] >= 0) expected.insert(shape.parent[size_t(rank)]);
          const auto& lane = plan->plan.lanes[t];
          std::set<int> peers(lane.sendPeers.begin(), lane.sendPeers.end());
          peers.insert(lane.recvPeers.begin(), lane.recvPeers.end());
          check(peers == expected, "rank " + std::to_string(rank) + "'s tree plan on channel " +
                                       std::to_string(channel) +
                                       " does not talk to its node tree's parent and children");
        }
      }
      check(plans == 1, "expected one cached tree plan for channel " + std::to_string(channel) + ", found " +
                            std::to_string(plans));
    }
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("plan exec: on interleaved hosts the ring follows the topology and crosses between hosts twice",
          "[plan-exec][processes][net][ring-order]") {
  tutti_test::HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 2;
  layout.interleaved = true;  // ranks 0 and 2 on one host, 1 and 3 on the other
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"}};
  auto outcomes = tutti_test::runOnHosts(layout, [&](int rank, int nranks, ncclComm_t comm) {
    std::vector<int> rankOrder(static_cast<size_t>(nranks));
    std::iota(rankOrder.begin(), rankOrder.end(), 0);
    check(crossingsOf(comm, rankOrder) == 4, "rank order should cross between the hosts 4 times");
    const std::vector<int>& order = tutti::ringOrderOf(comm->planning.topology.get(), 0);
    check(order.size() == size_t(nranks), "the communicator has no ring order from its topology");
    check(crossingsOf(comm, order) == 2, "the topology's ring crosses between the hosts " +
                                             std::to_string(crossingsOf(comm, order)) + " times, not 2");
    comm->planning.forcedAlgorithm = "ring";
    std::vector<Case> cases;
    for (const Case& c : ringCases(nranks, {1023}, true))
      if (c.op == ncclSum && (c.type == ncclFloat32 || c.type == ncclInt8 || c.type == ncclFloat64)) cases.push_back(c);
    tutti_test::runAll(cases, rank, nranks, comm);
    // Every ring connection, at init and since, is to a neighbour along the order: two of them
    // cross hosts in the whole ring, not four.
    auto at = std::find(order.begin(), order.end(), rank) - order.begin();
    std::set<int> neighbours = {order[size_t((at + 1) % nranks)], order[size_t((at + nranks - 1) % nranks)]};
    for (auto& [key, conn] : comm->links.connections)
      if (key.kind == tutti::plan::ConnKind::Ring)
        check(neighbours.count(key.peer) == 1, "a ring connection to rank " + std::to_string(key.peer) +
                                                   ", which is not next to rank " + std::to_string(rank) +
                                                   " in the ring");
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}
