// The cost model: fabrics, the exact event-driven simulator against hand-computed timings, the
// analytic model against the exact one for every registered algorithm it models, and the
// analytic model's behaviour up to 100,000 ranks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/sim.h"
#include "algorithms/tiling.h"
#include "base/error.h"
#include "topology/channels.h"

using namespace tutti;
using plan::Coll;

namespace {

// Every rank's plan for one operation; Send pairs rank 0's send with the last rank's receive
// (on another node when there are several, as the analytic model assumes). `ranksPerNode` is
// the fabric's (hierarchical's plan depends on it).
std::vector<plan::RankPlan> plansFor(const plan::Algorithm& a, Coll coll, int n, int ranksPerNode = 0) {
  std::vector<plan::RankPlan> plans;
  for (int r = 0; r < n; r++) {
    if (coll == Coll::Send) {
      if (r == 0)
        plans.push_back(a.build({Coll::Send, 0, n, n - 1, ranksPerNode}));
      else if (r == n - 1)
        plans.push_back(a.build({Coll::Recv, r, n, 0, ranksPerNode}));
      else
        plans.push_back(plan::RankPlan{a.name, {}});
    } else {
      plans.push_back(a.build({coll, r, n, 0, ranksPerNode}));
    }
  }
  return plans;
}

// The analytic model's allowed error against the exact simulator: 20%, except the tree at 25%
// (measured worst 22%, one host of 16 ranks at 64 MiB over 2 channels; across nodes 17%): the
// model charges every transfer an average share of its port with the other tree and channel,
// which the exact simulator's channels, drifting apart, mostly do not pay (with one channel
// the worst is 14%).
// oneshot: its plan form across nodes with several channels (the model counts every channel
// on the NIC pool at once; they drift apart) is off by up to 28%; it runs only at small sizes.
double toleranceFor(const std::string& algorithm) {
  return algorithm == "oneshot" ? 0.30 : algorithm == "tree" ? 0.25 : 0.20;
}

// Hosts of `perHost` ranks (the last possibly short) with the given figures.
using HostFigures = sim::Fabric::HostFigures;
sim::Fabric hostsWith(int nranks, int perHost, decltype(HostFigures::shm) shm, decltype(HostFigures::tcp) tcp,
                      double stepOverheadUs, double channelGBps, double copyGBps, int nicsPerHost) {
  HostFigures h;
  h.shm = shm;
  h.tcp = tcp;
  h.stepOverheadUs = stepOverheadUs;
  h.channelGBps = channelGBps;
  h.copyGBps = copyGBps;
  h.nicsPerHost = nicsPerHost;
  return sim::Fabric::host(nranks, perHost, h);
}

// Round figures so that hand computations are easy: 1 GB/s moves 1000 bytes per us.
sim::Fabric simpleHost(int nranks, int perHost) {
  return hostsWith(nranks, perHost, {1.0, 1.0}, {10.0, 0.5}, 2.0, 1.0, 4.0, HostFigures{}.nicsPerHost);
}

// Fabric::synthetic's GPU figures.
sim::Fabric gpuHosts(int nranks, int perHost) {
  return hostsWith(nranks, perHost, {1.5, 450.0}, {4.0, 50.0}, 0.4, 20.0, 1500.0, 2);
}

}  // namespace

TEST_CASE("sim: fabrics place ranks on nodes") {
  sim::Fabric s = sim::Fabric::synthetic(4, 8, 2);
  CHECK(s.nranks == 32);
  CHECK(s.nodes == 4);
  CHECK(s.nodeOf(7) == 0);
  CHECK(s.nodeOf(8) == 1);
  CHECK(s.sameNode(8, 15));
  CHECK_FALSE(s.sameNode(7, 8));
  CHECK(s.linkBetween(0, 31).gbps == s.network.gbps);
  CHECK(s.linkBetween(0, 1).gbps == s.local.gbps);

  sim::Fabric h = sim::Fabric::host(10, 4);
  CHECK(h.nodes == 3);
  CHECK(h.nodeOf(9) == 2);

  sim::TopologySummary t;
  t.nodeOfRank = {0, 0, 1, 1, 1};
  t.intraNode = {1.0, 100.0};
  t.nic = {3.0, 25.0};
  sim::Fabric f = sim::fabricFromTopology(t);
  CHECK(f.nranks == 5);
  CHECK(f.nodes == 2);
  CHECK(f.ranksPerNode == 3);
  CHECK(f.nodeOf(2) == 1);
  CHECK_THROWS_AS(sim::fabricFromTopology(sim::TopologySummary{}), Error);
  CHECK_THROWS_AS(sim::Fabric::synthetic(0, 8, 1), Error);
}

TEST_CASE("sim: exact timing of a two-rank ring all-reduce matches a hand computation") {
  // One tile of two 1000-byte chunks. Each rank: send (o + x), receive-reduce-copy-send
  // (waits a for the peer's chunk, then o + x), receive (a, then o). x = 1000 B / 1 GB/s = 1 us.
  sim::Fabric f = simpleHost(2, 2);
  sim::Pipeline p;
  p.chunkBytes = 1000;
  auto plans = plansFor(*plan::builtinAlgorithms().find("ring"), Coll::AllReduce, 2);
  sim::ExactResult r = sim::timePlans(plans, Coll::AllReduce, 2000, f, p);
  double o = 2, x = 1, a = 1;
  CHECK(r.us == Approx((o + x) + (a + o + x) + (a + o)));
  CHECK(r.steps == 6);
  CHECK(r.transfers == 4);

  // Two tiles: the second starts when the first's last step is done.
  r = sim::timePlans(plans, Coll::AllReduce, 4000, f, p);
  CHECK(r.us == Approx(2 * ((o + x) + (a + o + x) + (a + o))));
}

TEST_CASE("sim: exact timing of a FIFO-limited stream matches a hand computation") {
  // Send of 3 chunks over TCP with 2 FIFO slots: the third chunk waits for the first slot,
  // released when the receiver has consumed chunk 0 (arrival + o) plus a latency.
  sim::Fabric f = simpleHost(2, 1);
  sim::Pipeline p;
  p.chunkBytes = 500;
  p.fifoSlots = 2;
  auto plans = plansFor(*plan::builtinAlgorithms().find("direct"), Coll::Send, 2);
  double o = 2, x = 1, a = 10;  // 500 B at 0.5 GB/s
  double end0 = o + x, end1 = end0 + o + x;
  double release0 = end0 + a + o + a;
  double end2 = std::max(end1, release0) + o + x;
  double received2 = std::max(end2 + a, end1 + a + o) + o;
  CHECK(sim::timePlans(plans, Coll::Send, 1500, f, p).us == Approx(received2));
}

TEST_CASE("sim: ports are shared by concurrent transfers") {
  // Rank 0 scatters 4 blocks to 3 peers on one host: its local port (1 GB/s) carries 3000 bytes
  // while each transfer alone would take 0.1 us.
  sim::Fabric f = hostsWith(4, 4, {1.0, 1.0}, {10.0, 0.5}, 0.1, 10.0, 4.0, 1);
  sim::Pipeline p;
  p.chunkBytes = 1000;
  auto plans = plansFor(*plan::builtinAlgorithms().find("direct"), Coll::Scatter, 4);
  double us = sim::timePlans(plans, Coll::Scatter, 4000, f, p).us;
  double o = 0.1, a = 1;
  // The root's worker issues its own block's copy, then the sends, one overhead each; the first
  // send enters the port at 2o and the port is busy from then on.
  CHECK(us == Approx(2 * o + 3.0 + a + o));
}

TEST_CASE("sim: a rank's worker issues its lanes' steps one at a time") {
  // A direct all-to-all at 6 ranks on one host, 8-byte blocks: each rank's worker issues its
  // own block's copy, 5 sends and 5 receives, one step overhead each, and the last receive waits
  // for a send its peer issued at the same point of its own sequence. Both models agree, and at
  // 100,000 ranks the all-to-all costs at least 2(n - 1) overheads per rank.
  sim::Fabric f = simpleHost(6, 6);
  sim::Pipeline p;
  auto plans = plansFor(*plan::builtinAlgorithms().find("direct"), Coll::AlltoAll, 6);
  double exact = sim::timePlans(plans, Coll::AlltoAll, 6 * 8, f, p).us;
  double o = 2;
  CHECK(exact >= 11 * o);
  CHECK(exact < 11 * o + 2 * o);
  CHECK(*sim::analyticUs("direct", Coll::AlltoAll, 6 * 8, f, p) == Approx(exact).epsilon(0.1));
  sim::Fabric big = sim::Fabric::synthetic(12500, 8, 8);
  double us = *sim::analyticUs("direct", Coll::AlltoAll, size_t(1) << 20, big, p);
  CHECK(us >= 2.0 * (big.nranks - 1) * big.stepOverheadUs);
  // Over channels the exchange's lanes spread (LaneSpec::spread): 4 channels at 9 ranks give each
  // worker 2 of the 8 peers, so about a quarter of the overheads, in both models.
  sim::Fabric nine = simpleHost(9, 9);
  auto nines = plansFor(*plan::builtinAlgorithms().find("direct"), Coll::AlltoAll, 9);
  p.nchannels = 1;
  double one = sim::timePlans(nines, Coll::AlltoAll, 9 * 8, nine, p).us;
  p.nchannels = 4;
  double four = sim::timePlans(nines, Coll::AlltoAll, 9 * 8, nine, p).us;
  CHECK(one >= 17 * o);
  CHECK(four < 5 * o + 3 * o);
  CHECK(*sim::analyticUs("direct", Coll::AlltoAll, 9 * 8, nine, p) == Approx(four).epsilon(0.2));
}

TEST_CASE("plans: both ends of a spread lane's connection put it on the same channel") {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  const plan::Algorithm& direct = *registry.find("direct");
  for (int n : {2, 3, 7, 16})
    for (Coll coll : {Coll::AlltoAll, Coll::Gather, Coll::Scatter})
      for (int root : {0, n - 1}) {
        std::vector<plan::RankPlan> plans;
        for (int r = 0; r < n; r++) plans.push_back(direct.build({coll, r, n, root}));
        std::map<std::pair<int, int>, int> sent;  // (from, to) -> spread
        for (int r = 0; r < n; r++)
          for (const plan::LaneSpec& lane : plans[size_t(r)].lanes)
            for (int peer : lane.sendPeers) sent[{r, peer}] = lane.spread;
        int received = 0;
        for (int r = 0; r < n; r++)
          for (const plan::LaneSpec& lane : plans[size_t(r)].lanes)
            for (int peer : lane.recvPeers) {
              INFO(plan::collName(coll) << " n=" << n << " root " << root << ": " << peer << " -> " << r);
              REQUIRE(sent.count({peer, r}) == 1);
              CHECK(sent[{peer, r}] == lane.spread);
              CHECK(lane.spread >= 0);
              received++;
            }
        CHECK(received == int(sent.size()));
      }
}

TEST_CASE("sim: the exact simulator reports plans that deadlock") {
  plan::LaneSpec lane;
  lane.kind = plan::ConnKind::Ring;
  lane.layout = plan::Layout::Whole;
  std::vector<plan::RankPlan> plans(2);
  for (int r = 0; r < 2; r++) {
    plan::LaneSpec l = lane;
    l.sendPeers = {1 - r};
    l.recvPeers = {1 - r};
    l.steps.push_back({plan::Op::Recv, 0, {}, {plan::Buf::Out, -1}});
    l.steps.push_back({plan::Op::Send, 0, {plan::Buf::In, -1}, {}});
    plans[size_t(r)] = plan::RankPlan{"bad", {l}};
  }
  try {
    sim::timePlans(plans, Coll::Broadcast, 4096, simpleHost(2, 2), sim::Pipeline{});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Internal);
    CHECK_THAT(e.message(), Catch::Contains("deadlock") && Catch::Contains("rank 0"));
  }
}

// The analytic model asks the built-ins' registry entries for their costs: every built-in carries
// one, and a name without a built-in entry (a plan file's algorithm) has no estimate.
TEST_CASE("sim: the modelled algorithms are the built-ins, each with its cost") {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  std::vector<std::string> builtins;
  for (const plan::Algorithm& a : registry.all()) {
    INFO(a.name);
    CHECK(a.analyticCost != nullptr);
    builtins.push_back(a.name);
  }
  CHECK(sim::modelledAlgorithms() == builtins);
  sim::Fabric f = sim::Fabric::host(4, 4);
  CHECK_FALSE(sim::analyticUs("myring", Coll::AllReduce, 1024, f, sim::Pipeline{}).has_value());
  CHECK_FALSE(sim::analyticUs("tree", Coll::AlltoAll, 1024, f, sim::Pipeline{}).has_value());  // not a tree collective
  CHECK(sim::analyticUs("ring", Coll::AllReduce, 1024, f, sim::Pipeline{}).has_value());
}

// The analytic model against the exact simulator, for every modelled algorithm whose plans are
// registered. Tolerance: toleranceFor() (measured worst for ring: 14%, on a host system whose
// last node is partly filled).
TEST_CASE("sim: analytic estimates agree with the exact simulator") {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  int compared = 0;
  std::vector<std::string> skipped;
  for (const std::string& name : sim::modelledAlgorithms()) {
    const plan::Algorithm* a = registry.find(name);
    if (!a) {
      skipped.push_back(name);
      continue;
    }
    for (int n : {2, 3, 5, 8, 12, 16, 33, 64}) {
      std::vector<sim::Fabric> fabrics = {sim::Fabric::host(n, n), sim::Fabric::synthetic(1, n, 1),
                                          sim::Fabric::host(n, 8)};
      if (n % 4 == 0) fabrics.push_back(sim::Fabric::synthetic(n / 4, 4, 2));
      for (int c = 0; c <= int(Coll::Send); c++) {
        Coll coll = Coll(c);
        if (!a->serves(coll)) continue;
        for (const sim::Fabric& f : fabrics) {
          auto plans = plansFor(*a, coll, n, f.ranksPerNode);
          for (size_t bytes : {size_t(8), size_t(65536), size_t(4) << 20, size_t(64) << 20}) {
            if (n > 16 && bytes > (size_t(4) << 20)) continue;  // keeps the test short
            for (int nch : {1, 2}) {
              sim::Pipeline p;
              p.chunkBytes = 256 * 1024;
              p.nchannels = nch;
              double exact = sim::timePlans(plans, coll, bytes, f, p).us;
              std::optional<double> analytic = sim::analyticUs(name, coll, bytes, f, p);
              INFO(name << " " << plan::collName(coll) << " n=" << n << " " << f.name << " bytes=" << bytes
                        << " channels=" << nch);
              REQUIRE(analytic.has_value());
              CHECK(*analytic == Approx(exact).epsilon(toleranceFor(name)));
              compared++;
            }
          }
        }
      }
    }
  }
  CHECK(compared > 1000);
  CHECK(registry.find("ring"));
  CHECK(registry.find("direct"));
  std::string names;
  for (const std::string& s : skipped) names += " " + s;
  if (!skipped.empty()) WARN("no plans registered yet, not compared:" << names);
}

// Across nodes the tree plans are node trees (registry.cpp, topo::treeOverChains): the analytic
// model must walk the same trees for any node count and node size. Measured worst 9%; a model
// that walks in-order trees over the ranks instead is off by up to 60% here.
TEST_CASE("sim: the analytic tree all-reduce follows the node trees") {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  const plan::Algorithm& tree = *registry.find("tree");
  auto compare = [](const sim::Fabric& f, const std::vector<plan::RankPlan>& plans) {
    for (size_t bytes : {size_t(8), size_t(65536), size_t(4) << 20, size_t(64) << 20})
      for (int nch : {1, 2}) {
        sim::Pipeline p;
        p.chunkBytes = 256 * 1024;
        p.nchannels = nch;
        double exact = sim::timePlans(plans, Coll::AllReduce, bytes, f, p).us;
        std::optional<double> analytic = sim::analyticUs("tree", Coll::AllReduce, bytes, f, p);
        INFO(f.name << " bytes=" << bytes << " channels=" << nch);
        REQUIRE(analytic.has_value());
        CHECK(*analytic == Approx(exact).epsilon(0.15));
      }
  };
  for (int nodes = 2; nodes <= 9; nodes++)
    for (int perNode = 1; perNode <= 8; perNode++)
      for (int shortBy : {0, 1}) {  // 1: the last node is one rank short
        if (perNode == 1 && shortBy) continue;
        int n = nodes * perNode - shortBy;
        sim::Fabric f = gpuHosts(n, perNode);
        REQUIRE(f.nodes == nodes);
        compare(f, plansFor(tree, Coll::AllReduce, n, perNode));
      }
  // Nodes of unequal sizes, their ranks interleaved: the plans take the topology's trees.
  sim::TopologySummary t;
  t.nodeOfRank = {0, 1, 2, 0, 2, 3, 0, 2, 3, 0, 2};
  t.intraNode = {1.5, 450.0};
  t.nic = {4.0, 50.0};
  t.nicsPerNode = 2;
  sim::Fabric f = sim::fabricFromTopology(t);
  const int n = f.nranks;
  std::vector<std::vector<int>> chains(size_t(f.nodes));
  for (int r = 0; r < n; r++) chains[size_t(f.nodeOf(r))].push_back(r);
  std::vector<plan::TreeShape> trees;
  for (bool mirrored : {false, true}) {
    topo::Tree shape = topo::treeOverChains(chains, n, mirrored);
    trees.push_back({shape.parent, shape.children});
  }
  std::vector<plan::RankPlan> plans;
  for (int r = 0; r < n; r++) plans.push_back(tree.build({Coll::AllReduce, r, n, 0, 0, {}, trees}));
  compare(f, plans);
}

TEST_CASE("sim: analytic estimates grow with the message size") {
  for (sim::Fabric f : {sim::Fabric::synthetic(1, 8, 8), sim::Fabric::synthetic(125, 8, 8),
                        sim::Fabric::synthetic(12500, 8, 8), sim::Fabric::host(64, 16)}) {
    for (int nch : {1, 8}) {
      sim::Pipeline p;
      p.nchannels = nch;
      for (const std::string& name : sim::modelledAlgorithms())
        for (int c = 0; c <= int(Coll::Recv); c++) {
          double previous = 0;
          for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 2) {
            std::optional<double> us = sim::analyticUs(name, Coll(c), bytes, f, p);
            if (!us) break;
            INFO(name << " " << plan::collName(Coll(c)) << " " << f.name << " bytes " << bytes << " channels " << nch);
            CHECK(std::isfinite(*us));
            CHECK(*us > 0);
            CHECK(*us >= previous * (1 - 1e-9));
            previous = *us;
          }
        }
    }
  }
}

TEST_CASE("sim: a 100,000-rank sweep of every algorithm and collective computes") {
  sim::Fabric f = sim::Fabric::synthetic(12500, 8, 8);
  REQUIRE(f.nranks == 100000);
  int estimates = 0;
  for (const std::string& name : sim::modelledAlgorithms())
    for (int c = 0; c <= int(Coll::Recv); c++)
      for (size_t bytes = 8; bytes <= (size_t(1) << 30); bytes *= 2)
        if (std::optional<double> us = sim::analyticUs(name, Coll(c), bytes, f, sim::Pipeline{})) {
          CHECK(std::isfinite(*us));
          estimates++;
        }
  CHECK(estimates > 11 * 28);
  // Logarithmic all-reduce beats the 2(n-1)-step ring at small sizes, at this scale by far.
  auto ring = sim::analyticUs("ring", Coll::AllReduce, 1024, f, sim::Pipeline{});
  auto rd = sim::analyticUs("recdoubling", Coll::AllReduce, 1024, f, sim::Pipeline{});
  REQUIRE(ring);
  REQUIRE(rd);
  CHECK(*rd * 100 < *ring);
}

TEST_CASE("sim: bus bandwidth factors are nccl-tests'") {
  CHECK(sim::busBandwidthFactor(Coll::AllReduce, 8) == Approx(14.0 / 8));
  CHECK(sim::busBandwidthFactor(Coll::AllGather, 8) == Approx(7.0 / 8));
  CHECK(sim::busBandwidthFactor(Coll::AlltoAll, 4) == Approx(3.0 / 4));
  CHECK(sim::busBandwidthFactor(Coll::Broadcast, 8) == 1);
  CHECK(sim::busBandwidthFactor(Coll::Send, 2) == 1);
}

TEST_CASE("tiling: an operation's chunk is its slot, halved down to 512 KiB while it would have fewer than 32 chunks",
          "[sim]") {
  const size_t KiB = 1024, MiB = 1024 * KiB;
  // Slots of the default size or smaller are used whole, whatever the operation.
  for (size_t bytes : {size_t(8), 4 * MiB, 1024 * MiB}) {
    CHECK(tiling::chunkBytesFor(512 * KiB, bytes) == 512 * KiB);
    CHECK(tiling::chunkBytesFor(64 * KiB, bytes) == 64 * KiB);
  }
  // 1 MiB slots: whole from 32 chunks' worth (32 MiB) up, half a slot below.
  CHECK(tiling::chunkBytesFor(MiB, 32 * MiB - 1) == 512 * KiB);
  CHECK(tiling::chunkBytesFor(MiB, 32 * MiB) == MiB);
  CHECK(tiling::chunkBytesFor(MiB, 8) == 512 * KiB);
  // 4 MiB slots (NCCL_BUFFSIZE 32 MiB): each halving until 32 chunks fit, never under 512 KiB.
  CHECK(tiling::chunkBytesFor(4 * MiB, 128 * MiB) == 4 * MiB);
  CHECK(tiling::chunkBytesFor(4 * MiB, 100 * MiB) == 2 * MiB);
  CHECK(tiling::chunkBytesFor(4 * MiB, 40 * MiB) == MiB);
  CHECK(tiling::chunkBytesFor(4 * MiB, MiB) == 512 * KiB);
  // A slot that is not a power of two halves to one that is no smaller than 512 KiB.
  CHECK(tiling::chunkBytesFor(1536 * KiB, MiB) == 768 * KiB);
}

// The models cut channels as the launch does, with bytes for elements: 16-byte aligned ranges,
// and the analytic model costs the channels that move bytes, each as channel 0, the largest.
TEST_CASE("sim: the models cut channels by the tiling rule in bytes", "[sim]") {
  CHECK(sim::channelBytes(Coll::AllReduce, plan::Layout::Split, 1000, 4, 8) == 128);  // 125, aligned up
  CHECK(sim::channelBytes(Coll::AllReduce, plan::Layout::Split, 100, 4, 8) == 16);
  CHECK(sim::channelBytes(Coll::AllReduce, plan::Layout::Whole, 8, 4, 8) == 8);  // less than one aligned range
  CHECK(sim::channelBytes(Coll::AllGather, plan::Layout::Blocks, 4 * 1000, 4, 8) == 128);  // per block
  CHECK(sim::channelBytes(Coll::AllReduce, plan::Layout::Blocks, 1000, 4, 1) ==
        1000);  // all-reduce's bytes are one buffer
  for (size_t bytes : {size_t(0), size_t(1), size_t(17), size_t(4096), size_t(1000003)})
    for (int nch : {1, 3, 8, 32}) {
      size_t range = sim::channelBytes(Coll::Broadcast, plan::Layout::Whole, bytes, 8, nch);
      for (int c = 0; c < nch; c++) CHECK(tiling::channelRange(bytes, nch, c).size() <= range);
      CHECK(range == std::min(bytes, tiling::channelElems(bytes, nch)));
    }
  // A lane shorter than its channels' aligned ranges leaves the last ones empty.
  CHECK(sim::busyChannels(100, 8) == 7);  // 6 x 16 + 4
  CHECK(sim::busyChannels(13, 8) == 1);
  CHECK(sim::busyChannels(0, 8) == 1);
  CHECK(sim::busyChannels(1 << 20, 8) == 8);
  CHECK(sim::busyChannels(1 << 20, 0) == 1);
}

// A Bruck round's blocks travel as one joined message, so at small blocks and many ranks its
// ceil(log2 n) step overheads beat the n - 1 of pairwise and direct, in both models.
TEST_CASE("sim: Bruck's all-to-all of 8-byte blocks at 64 ranks beats pairwise and direct", "[sim][join]") {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  const int n = 64;
  const size_t bytes = size_t(n) * 8;
  for (const sim::Fabric& f :
       {sim::Fabric::synthetic(8, 8, 4), sim::Fabric::synthetic(1, n, 1), sim::Fabric::host(n, 8)}) {
    sim::Pipeline p;
    std::map<std::string, double> exact, analytic;
    for (const char* name : {"bruck", "pairwise", "direct"}) {
      const plan::Algorithm* a = registry.find(name);
      REQUIRE(a);
      exact[name] = sim::timePlans(plansFor(*a, Coll::AlltoAll, n, f.ranksPerNode), Coll::AlltoAll, bytes, f, p).us;
      analytic[name] = sim::analyticUs(name, Coll::AlltoAll, bytes, f, p).value();
    }
    INFO(f.name << ": exact bruck " << exact["bruck"] << " pairwise " << exact["pairwise"] << " direct "
                << exact["direct"] << " us; analytic bruck " << analytic["bruck"] << " pairwise "
                << analytic["pairwise"] << " direct " << analytic["direct"] << " us");
    CHECK(exact["bruck"] < exact["pairwise"]);
    CHECK(exact["bruck"] < exact["direct"]);
    CHECK(analytic["bruck"] < analytic["pairwise"]);
    CHECK(analytic["bruck"] < analytic["direct"]);
  }
}
