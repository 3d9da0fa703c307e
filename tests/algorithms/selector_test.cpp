// The selector: NCCL_ALGO / NCCL_PROTO parsing, choices from the cost model (with stand-in
// registry entries, since the analytic model goes by name), the tuning table, and tutti-sim's
// output.
#include <catch2/catch.hpp>

#include <filesystem>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "algorithms/selector.h"
#include "algorithms/sim_cli.h"
#include "base/error.h"

using namespace tutti;
using plan::Coll;
using selector::NameFilter;

namespace {

std::vector<std::string> known() { return selector::knownAlgorithms(plan::builtinAlgorithms()); }

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "(no error)";
}

// Only the foundation's ring and direct: the selection tests below control the candidates.
plan::AlgorithmRegistry ringAndDirect() {
  plan::AlgorithmRegistry all = plan::builtinAlgorithms(), r;
  r.add(*all.find("ring"));
  r.add(*all.find("direct"));
  return r;
}

// Ring and direct plus stand-ins named as the cost model knows them, whose plans are rings.
plan::AlgorithmRegistry standInRegistry(std::vector<std::pair<std::string, bool>> names) {
  plan::AlgorithmRegistry r = ringAndDirect();
  for (auto& [name, deterministic] : names)
    r.add({name, {Coll::AllReduce}, deterministic, "test stand-in", [](const plan::PlanRequest& q) {
             return plan::builtinAlgorithms().find("ring")->build(q);
           }});
  return r;
}

}  // namespace

TEST_CASE("selector: NCCL_ALGO lists, exclusion, case and NCCL's names") {
  NameFilter f = selector::parseAlgoFilter("Ring,TREE", known());
  CHECK(f.allows(Coll::AllReduce, "ring"));
  CHECK(f.allows(Coll::AllGather, "tree"));
  CHECK_FALSE(f.allows(Coll::AllReduce, "recdoubling"));
  CHECK(f.notes.empty());

  f = selector::parseAlgoFilter("^ring", known());
  CHECK_FALSE(f.allows(Coll::AllReduce, "ring"));
  CHECK(f.allows(Coll::AllReduce, "tree"));

  f = selector::parseAlgoFilter("PAT,NVLS,CollnetDirect", known());
  CHECK(f.allows(Coll::AllGather, "pat"));
  CHECK_FALSE(f.allows(Coll::AllGather, "ring"));
  REQUIRE(f.notes.size() == 2);
  CHECK_THAT(f.notes[0], Catch::Contains("NVLS") && Catch::Contains("no equivalent"));

  // Only names with no equivalent: accepted, and no restriction.
  f = selector::parseAlgoFilter("NVLSTree,CollnetChain", known());
  CHECK(f.allows(Coll::AllReduce, "ring"));
  CHECK(f.notes.size() == 3);

  CHECK(selector::parseAlgoFilter("", known()).allows(Coll::AllReduce, "anything"));
}

TEST_CASE("selector: NCCL_ALGO per-collective settings") {
  NameFilter f = selector::parseAlgoFilter("ring;AllReduce:tree,recdoubling;allgather:^ring", known());
  CHECK(f.allows(Coll::AllReduce, "tree"));
  CHECK_FALSE(f.allows(Coll::AllReduce, "ring"));
  CHECK_FALSE(f.allows(Coll::AllGather, "ring"));
  CHECK(f.allows(Coll::AllGather, "pat"));
  CHECK(f.allows(Coll::Broadcast, "ring"));  // the unprefixed list
  CHECK_FALSE(f.allows(Coll::Broadcast, "binomial"));
  CHECK(f.setFor(Coll::AllReduce));
  CHECK_FALSE(f.setFor(Coll::Broadcast));
}

TEST_CASE("selector: NCCL_ALGO errors name what is wrong and what is known") {
  std::string e = errorOf([] { selector::parseAlgoFilter("ring,fastest", known()); });
  CHECK_THAT(e, Catch::Contains("NCCL_ALGO=ring,fastest") && Catch::Contains("\"fastest\"") &&
                    Catch::Contains("known: ring") && Catch::Contains("bruck") && Catch::Contains("NVLSTree"));
  e = errorOf([] { selector::parseAlgoFilter("allreduse:ring", known()); });
  CHECK_THAT(e, Catch::Contains("unknown collective \"allreduse\"") && Catch::Contains("allreduce"));
  e = errorOf([] { selector::parseAlgoFilter("allreduce:", known()); });
  CHECK_THAT(e, Catch::Contains("empty list for allreduce"));
  // A plan file's algorithm is known by its registry name.
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  r.add({"MyPlan", {Coll::AllReduce}, false, "my.plan", nullptr});
  CHECK(selector::parseAlgoFilter("myplan", selector::knownAlgorithms(r)).allows(Coll::AllReduce, "MyPlan"));
}

TEST_CASE(
    "selector: NCCL_PROTO is the set of protocols allowed: LL per collective, Simple for what nothing else carries, "
    "LL128 noted") {
  CHECK(selector::parseProtoFilter("").notes.empty());
  CHECK(selector::parseProtoFilter("Simple").infos.empty());
  NameFilter f = selector::parseProtoFilter("ll,SIMPLE");
  CHECK(f.notes.empty());
  CHECK(f.infos.empty());
  CHECK(f.allows(Coll::AllReduce, "ll"));
  CHECK_FALSE(selector::parseProtoFilter("Simple").allows(Coll::AllReduce, "ll"));  // a list without LL excludes it
  NameFilter noLL = selector::parseProtoFilter("^LL");
  CHECK_FALSE(noLL.allows(Coll::Broadcast, "ll"));
  CHECK(noLL.allows(Coll::Broadcast, "simple"));
  NameFilter perColl = selector::parseProtoFilter("simple,ll;allreduce:simple");
  CHECK_FALSE(perColl.allows(Coll::AllReduce, "ll"));
  CHECK(perColl.allows(Coll::AllGather, "ll"));
  CHECK(selector::parseProtoFilter("^LL128").infos.empty());
  NameFilter with128 = selector::parseProtoFilter("Simple,LL128");
  REQUIRE(with128.infos.size() == 1);
  CHECK_THAT(with128.infos[0], Catch::Contains("LL128 is not implemented yet"));

  // What NCCL takes, tutti takes: Simple carries what the allowed protocols cannot, said once.
  NameFilter onlyLL = selector::parseProtoFilter("LL");
  CHECK(onlyLL.allows(Coll::AllReduce, "ll"));
  REQUIRE(onlyLL.infos.size() == 1);
  CHECK_THAT(onlyLL.infos[0], Catch::Contains("NCCL_PROTO=LL") && Catch::Contains("go as Simple"));
  NameFilter llBoth = selector::parseProtoFilter("LL,LL128");
  CHECK(llBoth.allows(Coll::Broadcast, "ll"));
  CHECK(llBoth.infos.size() == 2);
  NameFilter noSimple = selector::parseProtoFilter("^simple");
  CHECK(noSimple.allows(Coll::AllGather, "ll"));
  CHECK_THAT(noSimple.infos.back(), Catch::Contains("go as Simple"));
  NameFilter only128 = selector::parseProtoFilter("simple;allreduce:LL128");
  CHECK_FALSE(only128.allows(Coll::AllReduce, "ll"));
  REQUIRE(only128.infos.size() == 2);
  CHECK_THAT(only128.infos[0] + only128.infos[1],
             Catch::Contains("for allreduce") && Catch::Contains("Simple carries every message"));
  CHECK_THAT(errorOf([] { selector::parseProtoFilter("Simple,LL64"); }),
             Catch::Contains("\"LL64\"") && Catch::Contains("Simple, LL, LL128"));
}

TEST_CASE("selector: small messages take a logarithmic algorithm, large ones what the model says") {
  sim::Fabric f = sim::Fabric::synthetic(64, 8, 8);
  plan::AlgorithmRegistry only = ringAndDirect();
  plan::AlgorithmRegistry more = standInRegistry({{"tree", false}, {"recdoubling", false}});
  selector::Context ctx{f, more};
  ctx.channels = {1, 32};

  selector::Choice small = selector::choose(Coll::AllReduce, 1024, f.nranks, ctx);
  CHECK((small.algorithm == "recdoubling" || small.algorithm == "tree"));
  CHECK(small.runnerUp != small.algorithm);
  CHECK(small.runnerUpUs >= small.estimateUs);
  CHECK(small.protocol == "Simple");
  REQUIRE(small.candidates.size() == 3);

  selector::Choice large = selector::choose(Coll::AllReduce, size_t(1) << 30, f.nranks, ctx);
  CHECK((large.algorithm == "ring" || large.algorithm == "tree"));
  // The choice is the cheapest estimate of any candidate at any channel count.
  for (const char* name : {"ring", "tree", "recdoubling"})
    for (int nch : {1, 2, 4, 8, 16, 32}) {
      sim::Pipeline p;
      p.nchannels = nch;
      CHECK(large.estimateUs <= *sim::analyticUs(name, Coll::AllReduce, size_t(1) << 30, f, p) * (1 + 1e-9));
    }

  selector::Context ringOnly{f, only};
  CHECK(selector::choose(Coll::AllReduce, 1024, f.nranks, ringOnly).algorithm == "ring");
  CHECK(selector::choose(Coll::AllReduce, 1024, f.nranks, ringOnly).runnerUp.empty());
  CHECK(selector::choose(Coll::AlltoAll, 1 << 20, f.nranks, ringOnly).algorithm == "direct");
}

TEST_CASE("selector: an algorithm the model does not know is timed by the exact simulator") {
  sim::Fabric f = sim::Fabric::host(8, 8);
  plan::AlgorithmRegistry r;
  r.add({"myring", {Coll::AllReduce}, false, "my.plan", [](const plan::PlanRequest& q) {
           return plan::builtinAlgorithms().find("ring")->build(q);
         }});
  selector::Context ctx(f, r);
  ctx.channels = {1, 1};
  std::vector<plan::RankPlan> plans;
  for (int rank = 0; rank < 8; rank++) plans.push_back(r.find("myring")->build({Coll::AllReduce, rank, 8, 0}));
  selector::Choice c = selector::choose(Coll::AllReduce, 1 << 20, 8, ctx);
  CHECK(c.algorithm == "myring");
  CHECK(c.estimateUs == Approx(sim::timePlans(plans, Coll::AllReduce, 1 << 20, f, sim::Pipeline{}).us));
  // Too large to simulate step by step: no estimate, and so no candidate.
  CHECK_THAT(errorOf([&] { selector::choose(Coll::AllReduce, size_t(64) << 30, 8, ctx); }),
             Catch::Contains("cost estimate"));
}

TEST_CASE("selector: channels stay within NCCL_MIN/MAX_NCHANNELS") {
  sim::Fabric f = sim::Fabric::synthetic(1, 8, 8);
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  selector::Context ctx{f, r};
  ctx.channels = {1, 32};
  selector::Choice big = selector::choose(Coll::AllReduce, size_t(1) << 30, 8, ctx);
  CHECK(big.nchannels > 1);  // 450 GB/s of NVLink needs many 20 GB/s channels
  CHECK(big.nchannels <= 32);
  CHECK(selector::choose(Coll::AllReduce, 8, 8, ctx).nchannels == 1);
  ctx.channels = {4, 4};
  CHECK(selector::choose(Coll::AllReduce, 8, 8, ctx).nchannels == 4);
  CHECK(selector::choose(Coll::AllReduce, size_t(1) << 30, 8, ctx).nchannels == 4);
  CHECK_THROWS_AS(selector::choose(Coll::AllReduce, 8, 16, ctx), Error);  // not this fabric's size
}

TEST_CASE("selector: a small all-to-all at many ranks takes the channels its peers spread over") {
  // 1,024 ranks: a direct all-to-all's worker issues a step per peer unless its lanes spread
  // over channels, which pays far more than the 64 KiB a channel otherwise has to carry.
  sim::Fabric f = sim::Fabric::synthetic(128, 8, 8);
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  selector::Context ctx{f, r};
  ctx.channels = {1, 32};
  selector::Choice c = selector::choose(Coll::AlltoAll, 8 * 1024, 1024, ctx);
  CHECK(c.algorithm == "direct");
  CHECK(c.nchannels == 32);
  ctx.channels = {1, 1};
  double directOnOne = 0;  // (Bruck, a message per round, is the choice on one channel)
  for (const selector::Estimate& e : selector::choose(Coll::AlltoAll, 8 * 1024, 1024, ctx).candidates)
    if (e.algorithm == "direct") directOnOne = e.us;
  CHECK(directOnOne > 16 * c.estimateUs);
  // A small all-reduce gains nothing like that from channels: one, as before.
  ctx.channels = {1, 32};
  CHECK(selector::choose(Coll::AllReduce, 8 * 1024, 1024, ctx).nchannels == 1);
}

TEST_CASE("selector: a cap on channels up to a size holds there, never below the minimum, and not above it") {
  sim::Fabric f = sim::Fabric::synthetic(1, 8, 8);
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  selector::Context ctx{f, r};
  ctx.channels = {1, 32};
  const size_t big = size_t(1) << 30;
  selector::Choice free = selector::choose(Coll::AllReduce, big, 8, ctx);
  REQUIRE(free.nchannels > 2);
  ctx.channels.maxUpTo = 2;
  ctx.channels.upToBytes = big;
  CHECK(selector::choose(Coll::AllReduce, big, 8, ctx).nchannels <= 2);
  ctx.channels.upToBytes = big - 1;  // the cap ends just below: the free choice again
  selector::Choice above = selector::choose(Coll::AllReduce, big, 8, ctx);
  CHECK(above.nchannels == free.nchannels);
  CHECK(above.algorithm == free.algorithm);
  ctx.channels = {4, 32, 2, big};  // NCCL_MIN_NCHANNELS wins over the cap
  CHECK(selector::choose(Coll::AllReduce, big, 8, ctx).nchannels == 4);
}

TEST_CASE("selector: deterministicOnly keeps to deterministic algorithms") {
  sim::Fabric f = sim::Fabric::synthetic(8, 8, 8);
  plan::AlgorithmRegistry r = standInRegistry({{"chain", true}, {"recdoubling", false}});
  selector::Context ctx{f, r};
  ctx.deterministicOnly = true;
  for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(1) << 30})
    CHECK(selector::choose(Coll::AllReduce, bytes, f.nranks, ctx).algorithm == "chain");
  plan::AlgorithmRegistry none = ringAndDirect();
  selector::Context noDet{f, none};
  noDet.deterministicOnly = true;
  CHECK_THAT(errorOf([&] { selector::choose(Coll::AllReduce, 8, f.nranks, noDet); }),
             Catch::Contains("no deterministic algorithm for allreduce") && Catch::Contains("ring"));
}

TEST_CASE("selector: NCCL_ALGO steers the choice") {
  sim::Fabric f = sim::Fabric::synthetic(8, 8, 8);
  plan::AlgorithmRegistry r = standInRegistry({{"tree", false}, {"recdoubling", false}});
  auto chosen = [&](const std::string& algo, Coll coll, size_t bytes) {
    NameFilter filter = selector::parseAlgoFilter(algo, selector::knownAlgorithms(r));
    selector::Context ctx{f, r, &filter};
    return selector::choose(coll, bytes, f.nranks, ctx).algorithm;
  };
  CHECK(chosen("ring", Coll::AllReduce, 8) == "ring");
  CHECK(chosen("Tree", Coll::AllReduce, 8) == "tree");
  CHECK(chosen("^recdoubling,tree", Coll::AllReduce, 8) == "ring");
  CHECK(chosen("ring;allreduce:tree", Coll::AllReduce, 8) == "tree");
  CHECK(chosen("ring;allreduce:tree", Coll::AllGather, 8) == "ring");
  // As in NCCL, an unprefixed list does not bind the point-to-point family.
  CHECK(chosen("tree", Coll::AlltoAll, 1024) == "direct");
  CHECK_THAT(errorOf([&] { chosen("alltoall:ring", Coll::AlltoAll, 1024); }),
             Catch::Contains("NCCL_ALGO=alltoall:ring leaves no algorithm for alltoall") && Catch::Contains("direct"));
  // An unprefixed list naming none of a collective's algorithms leaves it free; a list for that
  // collective, or an exclusion of all its algorithms, does not.
  CHECK(chosen("tree", Coll::AllGather, 1024) == "ring");
  CHECK_THAT(errorOf([&] { chosen("allgather:tree", Coll::AllGather, 1024); }),
             Catch::Contains("leaves no algorithm for allgather") && Catch::Contains("registered for allgather: ring"));
  CHECK_THAT(errorOf([&] { chosen("^ring", Coll::AllGather, 1024); }),
             Catch::Contains("leaves no algorithm for allgather"));
}

TEST_CASE("selector: estimateOperation and the tuning table") {
  sim::Fabric f = sim::Fabric::host(8, 4);
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  selector::Context ctx{f, r};
  double small = selector::estimateOperation(Coll::AllReduce, 1024, ctx);
  double large = selector::estimateOperation(Coll::AllReduce, 64 << 20, ctx);
  CHECK(small > 0);
  CHECK(large > small);
  CHECK(small == selector::choose(Coll::AllReduce, 1024, 8, ctx).estimateUs);

  std::string table = selector::tuningTable(ctx);
  for (const char* coll :
       {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter", "send"})
    CHECK_THAT(table, Catch::Contains(std::string("TUNING ") + coll));
  CHECK_THAT(table, Catch::Contains("8 B") && Catch::Contains("1 GiB") && Catch::Contains("-> ring") &&
                        Catch::Contains("-> direct"));
  CHECK(std::count(table.begin(), table.end(), '\n') == 1 + 9 * (1 + 15));
}

TEST_CASE("selector: tutti-sim prints a table that parses") {
  std::ostringstream out, err;
  int rc = sim::runSimTool(
      {"--nodes", "2", "--gpus-per-node", "4", "--nics-per-node", "2", "-b", "8", "-e", "1M", "--model-all"}, out, err);
  INFO(err.str());
  REQUIRE(rc == 0);
  std::istringstream lines(out.str());
  std::string line;
  int rows = 0;
  size_t expected = 8;
  bool crossovers = false;
  while (std::getline(lines, line)) {
    if (line.rfind("# crossovers allreduce:", 0) == 0) crossovers = true;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    size_t bytes;
    std::string algorithm, proto, runnerUp, runnerUpUs;
    int channels;
    double us, algbw, busbw;
    REQUIRE(fields >> bytes >> algorithm >> proto >> channels >> us >> algbw >> busbw >> runnerUp >> runnerUpUs);
    CHECK(bytes == expected);
    CHECK(proto == "Simple");
    CHECK(channels >= 1);
    CHECK(us > 0);
    CHECK(algbw == Approx(double(bytes) / us / 1e3).epsilon(0.01).margin(0.001));
    CHECK(busbw == Approx(algbw * 2 * 7 / 8).epsilon(0.01).margin(0.001));
    if (runnerUp != "-") CHECK(std::stod(runnerUpUs) >= us);
    expected *= 2;
    rows++;
  }
  CHECK(rows == 18);  // 8 B .. 1 MiB
  CHECK(crossovers);

  std::ostringstream out2, err2;
  CHECK(sim::runSimTool({"--topo", "no-such-system.xml"}, out2, err2) == 1);
  CHECK_THAT(err2.str(), Catch::Contains("no-such-system.xml"));
  // The hand-written 8-GPU dump, 4 nodes of it: 32 ranks, its NICs and NVLink.
  std::ostringstream out3, err3;
  const std::string dump = std::string(TUTTI_TEST_SOURCE_DIR) + "/topology/data/dgx_a100_8gpu.xml";
  CHECK(sim::runSimTool({"--topo", dump, "--nodes", "4", "-b", "1M", "-e", "1M"}, out3, err3) == 0);
  CHECK_THAT(out3.str(), Catch::Contains("32 ranks on 4 node(s)") && Catch::Contains("NIC(s) per node"));
  CHECK(sim::runSimTool({"--bogus"}, out2, err2) == 1);
  CHECK_THAT(err2.str(), Catch::Contains("unknown argument \"--bogus\""));
  CHECK(sim::runSimTool({"--min-channels", "4", "--max-channels", "2"}, out2, err2) == 1);
  CHECK_THAT(err2.str(), Catch::Contains("--min-channels is larger than --max-channels"));
  CHECK(sim::runSimTool({"--algo", "LL"}, out2, err2) == 1);
  std::ostringstream out4, err4;
  CHECK(sim::runSimTool({"--proto", "LL", "-b", "1M", "-e", "1M"}, out4, err4) == 0);  // as NCCL takes it
  CHECK_THAT(out4.str(), Catch::Contains("# note: NCCL_PROTO=LL") && Catch::Contains("go as Simple"));
  CHECK(sim::runSimTool({"--proto", "LL64"}, out2, err2) == 1);
  CHECK_THAT(err2.str(), Catch::Contains("LL64"));
}

TEST_CASE("selector: a 100,000-rank sweep of every collective completes") {
  std::ostringstream out, err;
  int rc = sim::runSimTool(
      {"--nodes", "12500", "--gpus-per-node", "8", "--nics-per-node", "8", "--coll", "all", "--model-all", "--all"},
      out, err);
  INFO(err.str());
  REQUIRE(rc == 0);
  std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("100000 ranks"));
  for (const char* coll :
       {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter", "send"})
    CHECK_THAT(text, Catch::Contains(std::string("# crossovers ") + coll));
  CHECK(text.find("nan") == std::string::npos);
  CHECK(text.find("inf") == std::string::npos);
}

TEST_CASE("selector: on the host executor Bruck and PAT are taken only for small blocks", "[selector][join]") {
  sim::Fabric f = sim::Fabric::host(8, 8);
  plan::AlgorithmRegistry r = plan::builtinAlgorithms();
  selector::Context ctx{f, r};
  ctx.channels = {1, 1};
  // Small blocks: the model's choice, a logarithmic one.
  for (Coll coll : {Coll::AllGather, Coll::ReduceScatter}) {
    selector::Choice small = selector::choose(coll, 8 * 4096, 8, ctx);
    INFO(plan::collName(coll));
    CHECK((small.algorithm == "bruck" || small.algorithm == "pat"));
  }
  // Past 32 KiB per rank the ring runs, also where the model has a logarithmic plan ahead (the
  // test looks for such a size, so that it keeps exercising the rule).
  for (Coll coll : {Coll::AllGather, Coll::ReduceScatter}) {
    INFO(plan::collName(coll));
    bool modelPrefersJoined = false;
    for (size_t perRank = 33 * 1024; perRank <= 1024 * 1024; perRank *= 2) {
      selector::Choice big = selector::choose(coll, 8 * perRank, 8, ctx);
      double fastestJoined = 0, ring = 0;
      for (const selector::Estimate& e : big.candidates) {
        if ((e.algorithm == "bruck" || e.algorithm == "pat") && (fastestJoined == 0 || e.us < fastestJoined))
          fastestJoined = e.us;
        if (e.algorithm == "ring") ring = e.us;
      }
      REQUIRE(fastestJoined > 0);
      REQUIRE(ring > 0);
      modelPrefersJoined = modelPrefersJoined || fastestJoined < ring;
      CHECK(big.algorithm == "ring");
      CHECK(big.estimateUs == ring);
    }
    CHECK(modelPrefersJoined);
  }
  // Named alone they still run at any size.
  NameFilter onlyPat = selector::parseAlgoFilter("pat", selector::knownAlgorithms(r));
  selector::Context forced{f, r, &onlyPat};
  forced.channels = {1, 1};
  CHECK(selector::choose(Coll::ReduceScatter, 8 << 20, 8, forced).algorithm == "pat");
  // GPU fabrics are not concerned: the CUDA executor's copies are not the host's.
  sim::Fabric gpus = sim::Fabric::synthetic(16, 8, 4);
  selector::Context gpu{gpus, r};
  CHECK(selector::choose(Coll::ReduceScatter, size_t(16) << 20, 128, gpu).algorithm == "pat");
}
