// The communicator's selector: fabric, filters and the choice cache (see select.h).
#include "runtime/comm/select.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "algorithms/plan_file.h"
#include "base/error.h"
#include "base/log.h"
#include "base/text.h"
#include "base/tunables.h"
#include "runtime/comm/calibrate.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/topo_init.h"

namespace tutti {
namespace {

// Between hosts, the largest operation whose channels are capped at the workers that can drive
// the sockets (see context()).
constexpr size_t kDrivenChannelsUpTo = size_t(32) << 20;

// The size at which TUTTI_DETERMINISTIC picks its one algorithm for a reducing collective.
constexpr size_t kDeterministicReferenceBytes = 1 << 20;

// The fixed figures (TUTTI_CALIBRATE=0): the model's defaults scaled by the oversubscription
// (ranks per core), as once measured on a 2-core VM (perf/RESULTS.md, "Selector").
sim::Fabric::HostFigures defaultFigures(int ranksPerHost, sim::Fabric::HostFigures figures) {
  double over = std::max(1.0, double(ranksPerHost) / double(std::max(1, figures.cores)));
  figures.shm.latencyUs *= 1 + 2 * (over - 1);
  figures.stepOverheadUs *= over;
  figures.shm.gbps /= over;
  figures.channelGBps /= over;
  figures.copyGBps /= over;
  return figures;
}

// The calibrated figures. A host whose ranks found no partner (one rank per host) timed no
// handoff: it takes the default one.
sim::Fabric::HostFigures measuredFigures(sim::HostMeasurements measured, int ranksPerHost,
                                         const sim::Fabric::HostFigures& base) {
  if (measured.hopUs <= 0) {
    sim::Fabric::HostFigures d = defaultFigures(ranksPerHost, base);
    measured.hopUs = d.stepOverheadUs + d.shm.latencyUs;
  }
  return sim::hostFigures(measured, ranksPerHost, base);
}

// Between hosts, the topology's NIC ports where they are the net backend's devices (IB ports, a
// plugin's; runtime/comm/topo_init.h): a port's bandwidth (the mean of a node's ports' speeds) and as
// many ports as the node with fewest has, which the cost model counts together for the traffic of
// a node's channels. Socket keeps the host figures' default network (one 10 GbE link). Returns
// what it took, for the log; "" when it kept the default.
std::string networkFromPorts(const ncclComm* comm, sim::Fabric::HostFigures& figures) {
  const CommTopology* t = comm->planning.topology.get();
  if (t == nullptr || !t->nicsAreNetDevices || t->system.nodes.size() < 2) return "";
  size_t ports = SIZE_MAX;
  double gbps = std::numeric_limits<double>::infinity();
  for (const topo::NodeSystem& node : t->system.nodes) {
    std::vector<int> nets = node.graph.nets();
    if (nets.empty()) return "";
    double total = 0;
    for (int net : nets) total += node.graph.node(net).netBandwidth();
    ports = std::min(ports, nets.size());
    gbps = std::min(gbps, total / double(nets.size()));
  }
  figures.tcp.gbps = gbps;
  figures.nicsPerHost = int(ports);
  char text[96];
  std::snprintf(text, sizeof text, ", between hosts %zu NIC port(s) of %.2f GB/s each", ports, gbps);
  return text;
}

// Host mode: shared memory between the ranks of a host, TCP between hosts; ranks are placed on
// nodes by host identity, in rank order. Collective over the ranks (the calibration's bootstrap
// exchange): every rank ends with the same fabric.
sim::Fabric hostFabric(const ncclComm* comm) {
  std::map<uint64_t, int> nodeOfHost;
  std::vector<int> nodeOfRank;
  std::map<int, int> ranksOnNode;
  for (const RankInfo& p : comm->identity.peers) {
    auto [it, fresh] = nodeOfHost.try_emplace(p.hostHash, int(nodeOfHost.size()));
    nodeOfRank.push_back(it->second);
    ranksOnNode[it->second]++;
  }
  int most = 1;
  for (auto& [node, n] : ranksOnNode) most = std::max(most, n);
  HostCalibration calibration = calibrateHost(comm, tunables::kCalibrate.get());
  sim::Fabric::HostFigures base;
  base.cores = calibration.host.cores;
  base.workersPerRank = comm->settings.nworkers;
  if (calibration.networkUs > 0) base.tcp.latencyUs = calibration.networkUs;
  const std::string ports = networkFromPorts(comm, base);
  sim::Fabric::HostFigures figures =
      calibration.measured ? measuredFigures(calibration.host, most, base) : defaultFigures(most, base);
  sim::Fabric fabric = sim::Fabric::host(comm->identity.nranks, most, figures);
  fabric.nodes = int(nodeOfHost.size());
  fabric.nodeOfRank = std::move(nodeOfRank);
  if (comm->control.mailboxesMapped) fabric.mailboxBytes = kern::kMailboxBytes;
  if (comm->identity.rank == 0) {
    const sim::HostMeasurements& m = calibration.host;
    if (calibration.measured) {
      char network[96] = "";
      if (calibration.nodes > 1 && calibration.networkUs > 0)
        std::snprintf(network, sizeof network, ", network one way %.2f us", calibration.networkUs);
      else if (calibration.nodes > 1)
        std::snprintf(network, sizeof network, ", network not timed (no reply in time): default latency %.1f us",
                      base.tcp.latencyUs);
      TUTTI_INFO(log::Tuning,
                 "%s: host fabric calibrated in %.1f ms: handoff %.2f us, copy %.2f GB/s, reduce %.2f GB/s, %d core(s) "
                 "per host%s%s",
                 comm->where().c_str(), calibration.seconds * 1e3, m.hopUs, m.copyGBps, m.reduceGBps, m.cores, network,
                 ports.c_str());
    } else {
      TUTTI_INFO(
          log::Tuning,
          "%s: host fabric not calibrated (TUTTI_CALIBRATE=0 at some rank): default figures, %d core(s) per host%s",
          comm->where().c_str(), m.cores, ports.c_str());
    }
  }
  return fabric;
}

}  // namespace

void loadCustomAlgorithms(ncclComm* comm) {
  std::string files = tunables::kAlgoFile.get();
  if (files.empty()) return;
  std::vector<plan::Algorithm> custom;
  try {
    custom = plan::loadPlanFiles(files);
    for (plan::Algorithm& a : custom) {
      std::string name = a.name, origin = a.origin;
      comm->planning.algorithms.add(std::move(a));
      TUTTI_INFO(log::Tuning, "%s: custom algorithm %s from %s", comm->where().c_str(), name.c_str(), origin.c_str());
    }
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidUsage, comm->where() + ": TUTTI_ALGO_FILE=" + files + ": " + e.message());
  }
}

size_t modelBytes(plan::Coll coll, size_t count, size_t eltSize, int nranks) {
  size_t bytes = count * eltSize;
  switch (coll) {
    case plan::Coll::AllGather:
    case plan::Coll::ReduceScatter:
    case plan::Coll::AlltoAll:
    case plan::Coll::Gather:
    case plan::Coll::Scatter: return bytes * size_t(nranks);
    default: return bytes;
  }
}

CommSelector::CommSelector(const ncclComm* comm) : comm_(comm), fabric_(hostFabric(comm)) {
  std::string algo = tunables::kAlgo.get();
  if (!algo.empty()) {
    try {
      algoFilter_ = selector::parseAlgoFilter(algo, selector::knownAlgorithms(comm->planning.algorithms));
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": " + e.message());
    }
    algoFilterSet_ = true;
    for (const std::string& note : algoFilter_.notes) TUTTI_WARN("%s: %s", comm->where().c_str(), note.c_str());
  }
  std::string proto = tunables::kProto.get();
  if (!proto.empty()) {
    try {
      protoFilter_ = selector::parseProtoFilter(proto);
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": " + e.message());
    }
    protoFilterSet_ = true;
    for (const std::string& note : protoFilter_.notes) TUTTI_WARN("%s: %s", comm->where().c_str(), note.c_str());
    if (comm->identity.rank == 0)
      for (const std::string& info : protoFilter_.infos)
        TUTTI_INFO(log::Tuning, "%s: %s", comm->where().c_str(), info.c_str());
  }
  deterministic_ = tunables::kDeterministic.get();
}

selector::Context CommSelector::context(plan::Coll coll) const {
  selector::Context ctx{fabric_, comm_->planning.algorithms};
  ctx.algoFilter = algoFilterSet_ ? &algoFilter_ : nullptr;
  // Every reducing collective keeps to deterministic algorithms: a ring's order follows the
  // channel's ring, and the choice between ring and PAT (reduce-scatter) or ring and binomial
  // (reduce) changes with the size, so a prefix of a large result would differ from the small one.
  ctx.deterministicOnly = deterministic_ && (coll == plan::Coll::AllReduce || coll == plan::Coll::ReduceScatter ||
                                             coll == plan::Coll::Reduce);
  ctx.channels.min = comm_->settings.minChannels;
  ctx.channels.max = comm_->settings.nchannels;
  // Between hosts, a rank's workers drive its sockets themselves only while each has a core
  // (comm_settings.cpp, drivingWorkers); past that every slot goes through the proxy thread. On two hosts
  // of one core each, one channel so was 1.2-2x faster than two from 256 KiB to 32 MiB, and
  // behind two from 64 MiB (128 MiB: 1.9-2.05 against 2.05-2.25 GB/s; perf/RESULTS.md). The
  // model does not know the proxy's hand-offs.
  if (fabric_.coresPerNode > 0 && fabric_.nodes > 1) {
    ctx.channels.maxUpTo = std::max(1, fabric_.coresPerNode / std::max(1, fabric_.ranksPerNode));
    ctx.channels.upToBytes = kDrivenChannelsUpTo;
  }
  ctx.pipeline.chunkBytes = comm_->settings.slotBytes;
  ctx.pipeline.fifoSlots = comm_->settings.nsteps;
  return ctx;
}

Selection CommSelector::select(plan::Coll coll, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(int(coll), bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  selector::Context ctx = context(coll);
  selector::NameFilter pinned;
  if (ctx.deterministicOnly) {
    // Two deterministic algorithms still add in different orders, so one of them serves every
    // size: the one the model prefers at a middling size.
    std::string& fixed = deterministicAlgorithm_[size_t(coll)];
    if (fixed.empty())
      fixed = selector::choose(coll, kDeterministicReferenceBytes, comm_->identity.nranks, ctx).algorithm;
    pinned = algoFilter_;
    pinned.perColl[size_t(coll)].set = true;
    pinned.perColl[size_t(coll)].exclude = false;
    pinned.perColl[size_t(coll)].names = {toLower(fixed)};
    ctx.algoFilter = &pinned;
  }
  selector::Choice choice = selector::choose(coll, bytes, comm_->identity.nranks, ctx);
  Selection s{comm_->planning.algorithms.find(choice.algorithm),
              std::clamp(choice.nchannels, 1, comm_->settings.nchannels), choice.estimateUs};
  if (s.algorithm == nullptr)
    throw Error(ErrorCode::Internal,
                comm_->where() + ": the selector chose \"" + choice.algorithm + "\", which is not registered");
  if (cache_.size() >= 4096) cache_.clear();  // bounded: a program sweeping every size
  cache_.emplace(key, s);
  return s;
}

double CommSelector::estimate(plan::Coll coll, size_t bytes) {
  return selector::estimateOperation(coll, bytes, context(coll));
}

std::string CommSelector::tuningTable() { return selector::tuningTable(context(plan::Coll::AllReduce)); }

}  // namespace tutti
