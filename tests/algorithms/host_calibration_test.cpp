// The host fabric from measurements (sim::hostFigures), channels counted against cores
// (Fabric::threadShare, atChannels), and the choices that follow, with made-up measurements.
#include <catch2/catch.hpp>

#include <sstream>

#include "algorithms/registry.h"
#include "algorithms/selector.h"
#include "algorithms/sim.h"
#include "algorithms/sim_cli.h"
#include "base/error.h"

using namespace tutti;
using plan::Coll;

namespace {

// What calibrateHost measured on the 2-core test VM when idle (perf/RESULTS.md): a handoff of
// about 6 us with four ranks busy, cache-resident copy and float sum near 100 and 60 GB/s.
constexpr double kVmHopUs = 6.0, kVmCopyGBps = 100.0, kVmReduceGBps = 60.0;

sim::Fabric measuredHost(int nranks, double hopUs, int cores, int workers = 2) {
  sim::Fabric::HostFigures base;
  base.workersPerRank = workers;
  sim::HostMeasurements m{hopUs, kVmCopyGBps, kVmReduceGBps, cores};
  return sim::Fabric::host(nranks, nranks, sim::hostFigures(m, nranks, base));
}

const plan::AlgorithmRegistry& builtins() {
  static const plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  return registry;
}

selector::Choice chooseAllReduce(const sim::Fabric& f, size_t bytes, int maxChannels = 2) {
  selector::Context ctx{f, builtins()};
  ctx.channels = {1, maxChannels};
  return selector::choose(Coll::AllReduce, bytes, f.nranks, ctx);
}

double estimate(const std::string& algorithm, Coll coll, size_t bytes, const sim::Fabric& f, int nchannels) {
  sim::Pipeline p;
  p.nchannels = nchannels;
  return *sim::analyticUs(algorithm, coll, bytes, f, p);
}

}  // namespace

TEST_CASE("host calibration: measurements map to figures") {
  sim::Fabric::HostFigures base;
  base.tcp = {30.0, 2.0};
  sim::HostMeasurements m{8.0, 100.0, 60.0, 2};
  sim::Fabric::HostFigures two = sim::hostFigures(m, 2, base);
  sim::Fabric::HostFigures four = sim::hostFigures(m, 4, base);
  // The handoff is split between the sender's step and the wake-up, whatever the ranks.
  CHECK(two.stepOverheadUs + two.shm.latencyUs == Approx(8.0));
  CHECK(four.stepOverheadUs + four.shm.latencyUs == Approx(8.0));
  // Four ranks on two cores run half the time each: half the rates of two ranks.
  CHECK(four.channelGBps == Approx(two.channelGBps / 2));
  CHECK(four.copyGBps == Approx(two.copyGBps / 2));
  CHECK(four.shm.gbps == Approx(two.shm.gbps / 2));
  // A reducing step is slower than a copy, and no figure exceeds the cache-resident one.
  CHECK(two.channelGBps < two.copyGBps);
  CHECK(two.copyGBps <= m.copyGBps);
  CHECK(four.cores == 2);
  CHECK(four.tcp.latencyUs == 30.0);  // not measured: the base's
  CHECK(four.tcp.gbps == 2.0);
  CHECK_THROWS_AS(sim::hostFigures({0, 100, 60, 2}, 4), Error);
  CHECK_THROWS_AS(sim::hostFigures({8, 100, 0, 2}, 4), Error);
}

TEST_CASE("host calibration: worker threads are counted against the cores") {
  sim::Fabric crowded = measuredHost(4, kVmHopUs, 2);
  CHECK(crowded.threadShare(1) == Approx(0.5));
  CHECK(crowded.threadShare(2) == Approx(0.25));
  sim::Fabric two = crowded.atChannels(2);
  CHECK(two.stepOverheadUs == Approx(2 * crowded.stepOverheadUs));
  CHECK(two.local.latencyUs == Approx(2 * crowded.local.latencyUs));
  CHECK(two.channelGBps == Approx(crowded.channelGBps / 2));
  CHECK(two.local.gbps == crowded.local.gbps);  // the rank's port is its share of the cores either way
  // One worker per rank (TUTTI_NTHREADS=1) runs every channel: no more threads, no change.
  sim::Fabric oneWorker = measuredHost(4, kVmHopUs, 2, 1);
  CHECK(oneWorker.atChannels(2).stepOverheadUs == oneWorker.stepOverheadUs);
  // Cores to spare: each channel has its own.
  sim::Fabric roomy = measuredHost(4, kVmHopUs, 64);
  CHECK(roomy.threadShare(2) == 1.0);
  CHECK(roomy.atChannels(2).channelGBps == roomy.channelGBps);
  // GPUs (no cores counted) are left alone.
  sim::Fabric gpus = sim::Fabric::synthetic(2, 8, 8);
  CHECK(gpus.atChannels(16).stepOverheadUs == gpus.stepOverheadUs);
}

TEST_CASE("host calibration: more channels than the cores can run never look faster") {
  for (int nranks : {2, 4, 8})
    for (int cores : {1, 2}) {
      sim::Fabric f = measuredHost(nranks, kVmHopUs, cores);
      for (const char* algorithm : {"ring", "recdoubling", "rabenseifner", "tree", "chain"})
        for (size_t bytes = 8; bytes <= (size_t(64) << 20); bytes *= 8) {
          INFO(algorithm << " " << bytes << " B, " << nranks << " ranks on " << cores << " cores");
          CHECK(estimate(algorithm, Coll::AllReduce, bytes, f, 2) >=
                estimate(algorithm, Coll::AllReduce, bytes, f, 1) * 0.999);
        }
      for (size_t bytes = 8; bytes <= (size_t(64) << 20); bytes *= 8) CHECK(chooseAllReduce(f, bytes).nchannels == 1);
    }
  // With a core per thread, a second channel doubles what a rank's executor moves.
  sim::Fabric roomy = measuredHost(4, kVmHopUs, 64);
  CHECK(chooseAllReduce(roomy, size_t(64) << 20).nchannels == 2);
}

TEST_CASE("host calibration: a 2-core, 4-rank host picks what ran fastest there") {
  // perf/RESULTS.md, "Selector against fixed algorithms": recursive doubling wins up to 256 KiB
  // (4.8x ahead of the 2-channel ring the fixed figures chose there), ring at 16 MiB.
  sim::Fabric vm = measuredHost(4, kVmHopUs, 2);
  for (size_t bytes : {size_t(8), size_t(4096), size_t(32768), size_t(262144)}) {
    INFO(bytes << " B");
    selector::Choice c = chooseAllReduce(vm, bytes);
    CHECK(c.algorithm == "recdoubling");
    CHECK(c.nchannels == 1);
  }
  CHECK(chooseAllReduce(vm, size_t(16) << 20).algorithm == "ring");
  // One-tile rings (a chunk per rank) ran 1.10-1.25x Rabenseifner there: each step waits for a
  // predecessor that is often descheduled, a pair only for its partner (kLockstepWait).
  for (size_t bytes : {size_t(1) << 20, size_t(2) << 20}) {
    INFO(bytes << " B");
    CHECK(chooseAllReduce(vm, bytes).algorithm == "rabenseifner");
  }
  // With a core per rank nothing waits for a descheduled thread: the ring's fewer copies win.
  sim::Fabric fourCores = measuredHost(4, kVmHopUs, 4);
  CHECK(chooseAllReduce(fourCores, size_t(2) << 20).algorithm == "ring");
  // A loaded machine (every handoff a scheduler round) keeps the logarithmic algorithm longer.
  sim::Fabric loaded = measuredHost(4, 40.0, 2);
  CHECK(chooseAllReduce(loaded, size_t(512) << 10).algorithm == "recdoubling");
}

TEST_CASE("host calibration: a tree's first-tile crossings queue on each host's NIC") {
  // Two hosts of 2 ranks, one core each (perf/RESULTS.md, "TCP: 2 namespaces x 2 ranks"). The
  // node trees cross between the hosts once each: on the way up one chunk leaves each host (one
  // per tree, in opposite directions), on the way down one more, after them, so each host's NIC
  // carries 2 chunks per tile before the tile ends. (The in-order trees the tree plan ran before
  // crossed 3 times, queued 6 chunks, and ran 1.6x the best plan at 256 KiB, while the model,
  // charging each crossing as one flow, chose them.)
  sim::HostMeasurements m{kVmHopUs, kVmCopyGBps, kVmReduceGBps, 1};
  sim::Fabric twoHosts = sim::Fabric::host(4, 2, sim::hostFigures(m, 2, sim::Fabric::HostFigures{}));
  REQUIRE(twoHosts.nodes == 2);
  for (size_t bytes : {size_t(128) << 10, size_t(256) << 10, size_t(512) << 10}) {
    const double chunk = double(bytes) / 2;                          // one tile: half of it per tree
    const double queue = 2 * chunk / (twoHosts.network.gbps * 1e3);  // bytes per us
    INFO(bytes << " B: a host's queue " << queue << " us");
    CHECK(estimate("tree", Coll::AllReduce, bytes, twoHosts, 1) >= queue);
  }
}

TEST_CASE("host calibration: the exact simulator sees the same crowded fabric") {
  // 8 MiB: several tiles, so the analytic model's charge for a one-tile ring waiting on
  // descheduled predecessors (which the exact simulator does not time) does not apply.
  sim::Fabric vm = measuredHost(4, kVmHopUs, 2);
  const plan::Algorithm& ring = *builtins().find("ring");
  for (int nch : {1, 2}) {
    sim::Pipeline p;
    p.nchannels = nch;
    std::vector<plan::RankPlan> plans;
    for (int r = 0; r < 4; r++) plans.push_back(ring.build({Coll::AllReduce, r, 4, 0}));
    double exact = sim::timePlans(plans, Coll::AllReduce, 8 << 20, vm, p).us;
    double analytic = estimate("ring", Coll::AllReduce, 8 << 20, vm, nch);
    INFO(nch << " channel(s): exact " << exact << " us, analytic " << analytic << " us");
    CHECK(analytic == Approx(exact).epsilon(0.2));
  }
}

namespace {

// tutti-sim's first row for `args` (one size): its algorithm and channel count.
struct SimRow {
  std::string algorithm;
  int channels = 0;
};
SimRow firstSimRow(const std::vector<std::string>& args, size_t mailboxBytes = 0) {
  std::ostringstream out, err;
  REQUIRE(sim::runSimTool(args, out, err, mailboxBytes) == 0);
  std::istringstream lines(out.str());
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty() && line[0] != '#') {
      std::istringstream fields(line);
      size_t bytes;
      std::string proto;
      SimRow row;
      fields >> bytes >> row.algorithm >> proto >> row.channels;
      return row;
    }
  FAIL("no row in " << out.str());
  return {};
}

}  // namespace

TEST_CASE("host calibration: tutti-sim models the mailboxes of a one-host system") {
  auto at8Bytes = [](std::vector<std::string> args, size_t mailboxBytes) {
    args.insert(args.end(), {"-b", "8", "-e", "8"});
    return firstSimRow(args, mailboxBytes).algorithm;
  };
  CHECK(at8Bytes({"--host-ranks", "4"}, 8248) == "oneshot");
  CHECK(at8Bytes({"--host-ranks", "4"}, 0) != "oneshot");                                   // no mailboxes
  CHECK(at8Bytes({"--host-ranks", "4", "--host-ranks-per-node", "2"}, 8248) != "oneshot");  // two hosts
}

TEST_CASE("host calibration: tutti-sim --host-cores counts threads against cores") {
  auto channelsAt = [](std::vector<std::string> args) {
    args.insert(args.end(), {"--host-ranks", "4", "-b", "64M", "-e", "64M"});
    return firstSimRow(args).channels;
  };
  CHECK(channelsAt({}) == 2);  // cores not counted: a second channel looks twice as fast
  CHECK(channelsAt({"--host-cores", "2"}) == 1);
  CHECK(channelsAt({"--host-cores", "16"}) == 2);
  std::ostringstream out, err;
  CHECK(sim::runSimTool({"--host-cores", "2"}, out, err) == 1);
  CHECK_THAT(err.str(), Catch::Contains("--host-ranks"));
}
