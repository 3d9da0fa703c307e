// The communicator's selector: fabric, filters and the choice cache (see select.h).
#include "runtime/select.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "algorithms/plan_file.h"
#include "runtime/comm.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/params.h"

namespace tutti {
namespace {

// The size at which TUTTI_DETERMINISTIC picks its one all-reduce algorithm.
constexpr size_t kDeterministicReferenceBytes = 1 << 20;

// Host mode: shared memory between the ranks of a host, TCP between hosts. The figures are the
// model's defaults (sim.h); ranks are placed on nodes by host identity, in rank order.
sim::Fabric hostFabric(const ncclComm* comm) {
  std::map<uint64_t, int> nodeOfHost;
  std::vector<int> nodeOfRank;
  std::map<int, int> ranksOnNode;
  for (const RankInfo& p : comm->peers) {
    auto [it, fresh] = nodeOfHost.try_emplace(p.hostHash, int(nodeOfHost.size()));
    nodeOfRank.push_back(it->second);
    ranksOnNode[it->second]++;
  }
  int most = 1;
  for (auto& [node, n] : ranksOnNode) most = std::max(most, n);
  // More ranks than cores on a host (the test machines: 4 to 9 ranks on 2 cores) turn each wait
  // into a context switch and share the cores' copy bandwidth: the figures scale with the
  // oversubscription, as measured on a 2-core VM (perf/RESULTS.md, "Selector").
  long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  double over = std::max(1.0, double(most) / double(cores));
  sim::Fabric::HostFigures figures;
  figures.shm.latencyUs *= 1 + 2 * (over - 1);
  figures.stepOverheadUs *= over;
  figures.shm.gbps /= over;
  figures.channelGBps /= over;
  figures.copyGBps /= over;
  sim::Fabric fabric = sim::Fabric::host(comm->nranks, most, figures);
  fabric.nodes = int(nodeOfHost.size());
  fabric.nodeOfRank = std::move(nodeOfRank);
  return fabric;
}

}  // namespace

void loadCustomAlgorithms(ncclComm* comm) {
  std::string files = params::getString("TUTTI_ALGO_FILE");
  if (files.empty()) return;
  std::vector<plan::Algorithm> custom;
  try {
    custom = plan::loadPlanFiles(files);
    for (plan::Algorithm& a : custom) {
      std::string name = a.name, origin = a.origin;
      comm->algorithms.add(std::move(a));
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
  std::string algo = params::getString("NCCL_ALGO");
  if (!algo.empty()) {
    try {
      algoFilter_ = selector::parseAlgoFilter(algo, selector::knownAlgorithms(comm->algorithms));
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": " + e.message());
    }
    algoFilterSet_ = true;
    for (const std::string& note : algoFilter_.notes) TUTTI_WARN("%s: %s", comm->where().c_str(), note.c_str());
  }
  std::string proto = params::getString("NCCL_PROTO");
  if (!proto.empty()) {
    selector::NameFilter protocols;
    try {
      protocols = selector::parseProtoFilter(proto);
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": " + e.message());
    }
    for (const std::string& note : protocols.notes) TUTTI_WARN("%s: %s", comm->where().c_str(), note.c_str());
  }
  deterministic_ = params::getInt("TUTTI_DETERMINISTIC") != 0;
}

selector::Context CommSelector::context(plan::Coll coll) const {
  selector::Context ctx{fabric_, comm_->algorithms};
  ctx.algoFilter = algoFilterSet_ ? &algoFilter_ : nullptr;
  // Only all-reduce needs a restriction for bitwise reproducibility: every other reducing
  // collective's plans reduce each element in an order fixed by the ranks alone (reduce-scatter
  // by blocks, reduce along a chain or tree over whole chunks), whatever the size.
  ctx.deterministicOnly = deterministic_ && coll == plan::Coll::AllReduce;
  ctx.channels.min = 1;
  ctx.channels.max = comm_->nchannels;
  ctx.pipeline.chunkBytes = comm_->slotBytes;
  ctx.pipeline.fifoSlots = comm_->nsteps;
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
    if (deterministicAlgorithm_.empty())
      deterministicAlgorithm_ = selector::choose(coll, kDeterministicReferenceBytes, comm_->nranks, ctx).algorithm;
    pinned = algoFilter_;
    pinned.perColl[size_t(coll)].set = true;
    pinned.perColl[size_t(coll)].exclude = false;
    std::string name = deterministicAlgorithm_;
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    pinned.perColl[size_t(coll)].names = {name};
    ctx.algoFilter = &pinned;
  }
  selector::Choice choice = selector::choose(coll, bytes, comm_->nranks, ctx);
  Selection s{comm_->algorithms.find(choice.algorithm), std::clamp(choice.nchannels, 1, comm_->nchannels), choice.estimateUs};
  if (s.algorithm == nullptr)
    throw Error(ErrorCode::Internal, comm_->where() + ": the selector chose \"" + choice.algorithm + "\", which is not registered");
  if (cache_.size() >= 4096) cache_.clear();  // bounded: a program sweeping every size
  cache_.emplace(key, s);
  return s;
}

double CommSelector::estimate(plan::Coll coll, size_t bytes) {
  return selector::estimateOperation(coll, bytes, context(coll));
}

std::string CommSelector::tuningTable() { return selector::tuningTable(context(plan::Coll::AllReduce)); }

}  // namespace tutti
