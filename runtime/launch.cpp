// Group collection, plan binding (channels, tiles, lanes, connections), and execution on the
// communicator's workers, inline or on a host stream.
#include "runtime/launch.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/registry.h"
#include "base/log.h"
#include "kernels/dtypes.h"
#include "kernels/host_reduce.h"
#include "runtime/api.h"
#include "runtime/comm.h"
#include "runtime/host_stream.h"
#include "runtime/select.h"

namespace tutti {
namespace {

// Below this many bytes per channel, fewer channels are used (each costs a lap of latency).
constexpr size_t kMinBytesPerChannel = 256 * 1024;

struct GroupState {
  int depth = 0;
  int error = ncclSuccess;
  std::vector<Task> tasks;
};
thread_local GroupState tGroup;

double scalarAsDouble(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclFloat16: return kern::half_t{uint16_t(bits)}.toFloat();
    case ncclBfloat16: return kern::bf16_t{uint16_t(bits)}.toFloat();
    case ncclFloat8e4m3: return kern::fp8e4m3_t{uint8_t(bits)}.toFloat();
    case ncclFloat8e5m2: return kern::fp8e5m2_t{uint8_t(bits)}.toFloat();
    case ncclFloat32: { float f; std::memcpy(&f, &bits, 4); return f; }
    case ncclFloat64: { double d; std::memcpy(&d, &bits, 8); return d; }
    default: return 0;
  }
}

// The executor's form of a reduction, resolved when the operation runs (a device-resident
// PreMulSum scalar is read then).
kern::RedOp resolveRedOp(ncclComm* comm, ncclDataType_t type, ncclRedOp_t op) {
  kern::RedOp r;
  switch (op) {
    case ncclSum: r.kind = kern::RedKind::Sum; return r;
    case ncclProd: r.kind = kern::RedKind::Prod; return r;
    case ncclMax: r.kind = kern::RedKind::Max; return r;
    case ncclMin: r.kind = kern::RedKind::Min; return r;
    case ncclAvg:
      if (kern::dtypeIsFloating(type)) {
        r.kind = kern::RedKind::PreMulSum;
        r.floatScalar = 1.0 / comm->identity.nranks;
      } else {
        r.kind = kern::RedKind::SumPostDiv;
        r.intScalar = uint64_t(comm->identity.nranks);
      }
      return r;
    default: break;
  }
  UserRedOp user;
  {
    std::lock_guard<std::mutex> lock(comm->redops.mutex);
    user = comm->redops.ops.at(size_t(op) - ncclNumOps);
  }
  uint64_t bits = user.hostValue;
  if (user.residence == ncclScalarDevice) {
    bits = 0;
    std::memcpy(&bits, user.pointer, kern::dtypeSize(type));
  }
  r.kind = kern::RedKind::PreMulSum;
  if (kern::dtypeIsFloating(type)) r.floatScalar = scalarAsDouble(type, bits);
  else r.intScalar = bits;
  return r;
}

plan::Coll toColl(CollKind kind) {
  // CollKind and plan::Coll list the collectives in the same order.
  static_assert(int(CollKind::Recv) == int(plan::Coll::Recv));
  return plan::Coll(int(kind));
}

// The algorithm for a task: the forced one (NCCL_ALGO) when it serves the collective; otherwise
// rings for the reducing and gathering collectives, direct exchanges for the rest.
// The default when nothing else decides: rings for the reducing and gathering collectives,
// direct exchanges for the rest, and a channel per kMinBytesPerChannel.
Selection defaultSelection(ncclComm* comm, const Task& t) {
  plan::Coll coll = toColl(t.kind);
  bool ring = coll == plan::Coll::AllReduce || coll == plan::Coll::AllGather || coll == plan::Coll::ReduceScatter ||
              coll == plan::Coll::Broadcast || coll == plan::Coll::Reduce;
  Selection s;
  s.algorithm = comm->planning.algorithms.find(ring ? "ring" : "direct");
  if (!s.algorithm) throw Error(ErrorCode::Internal, comm->where() + ": no algorithm for " + collName(t.kind));
  size_t bytes = t.count * kern::dtypeSize(t.type);
  s.nchannels = int(std::clamp<size_t>((bytes + kMinBytesPerChannel - 1) / kMinBytesPerChannel, 1, size_t(comm->settings.nchannels)));
  return s;
}

// The algorithm and channel count for a task: a test's forced algorithm, else the selector's
// choice by the cost model (within NCCL_ALGO and TUTTI_DETERMINISTIC). Point-to-point calls
// are always direct.
Selection chooseAlgorithm(ncclComm* comm, const Task& t) {
  plan::Coll coll = toColl(t.kind);
  if (!comm->planning.forcedAlgorithm.empty()) {
    const plan::Algorithm* forced = comm->planning.algorithms.find(comm->planning.forcedAlgorithm);
    if (forced && forced->serves(coll)) {
      Selection s = defaultSelection(comm, t);
      s.algorithm = forced;
      return s;
    }
  }
  if (coll == plan::Coll::Send || coll == plan::Coll::Recv || !comm->planning.selector) return defaultSelection(comm, t);
  return comm->planning.selector->select(coll, modelBytes(coll, t.count, kern::dtypeSize(t.type), comm->identity.nranks));
}

struct BoundLane {
  kern::Lane lane;
  std::vector<ConnKey> sendKeys, recvKeys;
};

// One communicator's share of a group: its tasks bound to lanes, per worker.
struct CommLaunch {
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<Task> tasks;
  std::optional<Selection> selection;  // a single operation's, chosen before binding
  std::vector<std::shared_ptr<const plan::RankPlan>> plans;  // from the communicator's cache
  std::deque<kern::OpBinding> bindings;
  std::vector<std::vector<kern::LaneQueue>> queues;  // [worker][queue]
  // Between binding and connecting: each worker's lanes and the connections they need.
  std::vector<std::vector<BoundLane>> lanes;
  std::vector<ConnKey> keys;
  // An in-place all-to-all reads its input from a copy, taken when the launch runs (in stream
  // order), because every block is both sent and overwritten.
  std::deque<std::vector<char>> inputCopies;
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> prologue;
  // Scratch: taken from the communicator's pool when the launch runs (not at bind, so launches
  // queued on a stream hold none), and given back when it has run.
  struct ScratchUse {
    int worker;
    size_t queue, lane;
    size_t offset;  // in the launch's scratch block
  };
  std::vector<ScratchUse> scratchUses;
  size_t scratchBytes = 0;
  ScratchPool::Lease scratch;
  // A one-shot all-reduce run through the mailboxes (kernels/mailbox.h): no lanes, no connections.
  bool mailbox = false;
};

// A lane being bound, with the connections it uses.
// Groups one worker's lanes into queues: lanes that share a connection (directly or through
// other lanes) form one queue, in plan order; the queues are ordered by their first lane.
std::vector<kern::LaneQueue> formQueues(std::vector<BoundLane>& lanes) {
  std::vector<size_t> parent(lanes.size());
  for (size_t i = 0; i < lanes.size(); i++) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::map<ConnKey, size_t> user;  // a lane using each connection
  for (size_t i = 0; i < lanes.size(); i++)
    for (const auto* keys : {&lanes[i].sendKeys, &lanes[i].recvKeys})
      for (const ConnKey& k : *keys) {
        auto [it, fresh] = user.try_emplace(k, i);
        if (!fresh) {
          size_t a = find(it->second), b = find(i);
          // The smaller index stays the root, so a queue's root is its first lane.
          if (a != b) parent[std::max(a, b)] = std::min(a, b);
        }
      }
  std::vector<kern::LaneQueue> queues;
  std::vector<size_t> queueOfRoot(lanes.size(), size_t(-1));
  for (size_t i = 0; i < lanes.size(); i++) {
    size_t root = find(i);
    if (queueOfRoot[root] == size_t(-1)) {
      queueOfRoot[root] = queues.size();
      queues.emplace_back();
    }
    queues[queueOfRoot[root]].lanes.push_back(std::move(lanes[i].lane));
  }
  return queues;
}

// Gives each queue its own part of the launch's scratch: lanes of one queue run one after
// another, so they share it.
void layOutScratch(CommLaunch& L) {
  constexpr size_t kAlign = 64;
  for (size_t w = 0; w < L.queues.size(); w++)
    for (size_t q = 0; q < L.queues[w].size(); q++) {
      size_t need = 0;
      const auto& lanes = L.queues[w][q].lanes;
      for (size_t l = 0; l < lanes.size(); l++) {
        size_t bytes = size_t(lanes[l].spec->scratchChunks) * lanes[l].chunkElems * lanes[l].op->eltSize;
        if (bytes == 0) continue;
        need = std::max(need, (bytes + kAlign - 1) / kAlign * kAlign);
        L.scratchUses.push_back({int(w), q, l, L.scratchBytes});
      }
      L.scratchBytes += need;
    }
}

// A self send and its receive become one local copy.
void pairSelfSends(CommLaunch& L) {
  std::vector<Task> kept;
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < L.tasks.size(); i++) {
    const Task& t = L.tasks[i];
    if (t.kind == CollKind::Send && t.root == L.comm->identity.rank) sends.push_back(i);
    else if (t.kind == CollKind::Recv && t.root == L.comm->identity.rank) recvs.push_back(i);
  }
  if (sends.size() != recvs.size())
    throw Error(ErrorCode::InvalidUsage, L.comm->where() + ": " + std::to_string(sends.size()) + " ncclSend and " +
                                             std::to_string(recvs.size()) +
                                             " ncclRecv to/from itself in one group; each self send needs its receive in the same group");
  for (size_t k = 0; k < sends.size(); k++) {
    Task& s = L.tasks[sends[k]];
    const Task& r = L.tasks[recvs[k]];
    if (s.count != r.count || s.type != r.type)
      throw Error(ErrorCode::InvalidUsage, L.comm->where() + ": a self ncclSend of " + std::to_string(s.count) +
                                               " elements is paired with a self ncclRecv of " + std::to_string(r.count));
    s.out = r.out;  // the send's plan is then a local copy into the receive buffer
  }
  for (size_t i = 0; i < L.tasks.size(); i++)
    if (std::find(recvs.begin(), recvs.end(), i) == recvs.end()) kept.push_back(L.tasks[i]);
  L.tasks = std::move(kept);
}

// The plan of a task on this rank for one channel, from the communicator's cache (plans depend
// only on the algorithm, the collective, its root or peer, and the ring and trees the channel
// follows).
std::shared_ptr<const plan::RankPlan> planFor(ncclComm* comm, const Task& t, const plan::Algorithm& algorithm, int channel = 0) {
  auto key = std::make_tuple(algorithm.name, int(t.kind), t.root, ringIndexOf(comm->planning.topology.get(), channel),
                             treeIndexOf(comm->planning.topology.get(), channel));
  auto cached = comm->planning.planCache.find(key);
  if (cached == comm->planning.planCache.end()) {
    plan::PlanRequest request{toColl(t.kind), comm->identity.rank, comm->identity.nranks, t.root};
    request.ranksPerNode = comm->planning.ranksPerNode;
    request.ring = ringOrderOf(comm->planning.topology.get(), channel);
    request.trees = treesOf(comm->planning.topology.get(), channel);
    auto made = std::make_shared<const plan::RankPlan>(algorithm.build(request));
    kern::checkPlanBounds(*made, comm->identity.rank, comm->identity.nranks);
    cached = comm->planning.planCache.emplace(key, std::move(made)).first;
  }
  return cached->second;
}

kern::OpBinding bindingFor(CommLaunch& L, const Task& t) {
  ncclComm* comm = L.comm;
  kern::OpBinding b;
  b.name = collName(t.kind);
  b.seq = comm->executor.opSeq++;
  b.in = t.in;
  if (t.kind == CollKind::AlltoAll && t.in != nullptr && t.in == t.out) {
    size_t bytes = t.count * kern::dtypeSize(t.type) * size_t(comm->identity.nranks);
    L.inputCopies.emplace_back(bytes);
    L.prologue.push_back({L.inputCopies.back().data(), t.in, bytes});
    b.in = L.inputCopies.back().data();
  }
  b.out = t.out;
  b.count = t.count;
  b.type = t.type;
  b.eltSize = kern::dtypeSize(t.type);
  b.nranks = comm->identity.nranks;
  bool reducing = t.kind == CollKind::AllReduce || t.kind == CollKind::ReduceScatter || t.kind == CollKind::Reduce;
  if (reducing) b.redop = resolveRedOp(comm, t.type, t.op);
  return b;
}

// Points a lane's FIFO ends at its connections.
void connectLane(ncclComm* comm, int worker, BoundLane& bound) {
  auto end = [&](const ConnKey& k) {
    const Connection& conn = *comm->links.connections.at(k);
    // The connection knows its FIFO and whom to wake: the peer's worker, or the proxy.
    return kern::FifoEnd{conn.fifo(), conn.bellFor(worker), k.peer};
  };
  for (const ConnKey& k : bound.sendKeys) bound.lane.sends.push_back(end(k));
  for (const ConnKey& k : bound.recvKeys) bound.lane.recvs.push_back(end(k));
}

// Whether a launch of this one task runs through the mailboxes: a one-shot all-reduce that
// fits them, with every rank on this host.
bool viaMailbox(const ncclComm* comm, const Task& t, const Selection& selection) {
  return t.kind == CollKind::AllReduce && comm->control.mailboxesMapped && selection.algorithm->name == "oneshot" &&
         t.count * kern::dtypeSize(t.type) <= kern::kMailboxBytes;
}

// Binds the launch's tasks to plans and lanes and lists the connections they need; connect()
// finishes once every launch of the group has its connections.
void bind(CommLaunch& L) {
  ncclComm* comm = L.comm;
  pairSelfSends(L);
  std::vector<std::vector<BoundLane>>& lanes = L.lanes;
  std::vector<ConnKey>& keys = L.keys;
  lanes.assign(size_t(comm->settings.nworkers), {});

  if (L.tasks.size() == 1) {
    const Task& t = L.tasks.front();
    Selection selection = L.selection ? *L.selection : chooseAlgorithm(comm, t);
    if (viaMailbox(comm, t, selection)) {
      L.selection = selection;
      L.mailbox = true;
      L.bindings.push_back(bindingFor(L, t));
      TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes", comm->where().c_str(),
                  L.bindings.back().name, (unsigned long long)L.bindings.back().seq, t.count, kern::dtypeName(t.type), int(t.op));
      return;
    }
  }

  for (const Task& t : L.tasks) {
    Selection selection = L.selection ? *L.selection : chooseAlgorithm(comm, t);
    try {
      L.plans.push_back(planFor(comm, t, *selection.algorithm));
    } catch (const Error& e) {
      // A plan file's algorithm serves only the rank count and root it was written for; the
      // selector estimated it for root 0. Every rank fails alike, so every rank falls back.
      if (selection.algorithm->origin == "built-in" || e.code() != ErrorCode::InvalidUsage || !comm->planning.forcedAlgorithm.empty()) throw;
      selection = defaultSelection(comm, t);
      TUTTI_WARN("%s: %s; using %s instead", comm->where().c_str(), e.what(), selection.algorithm->name.c_str());
      L.plans.push_back(planFor(comm, t, *selection.algorithm));
    }
    const plan::RankPlan& p = *L.plans.back();
    L.bindings.push_back(bindingFor(L, t));
    const kern::OpBinding& binding = L.bindings.back();
    const int nch = std::clamp(selection.nchannels, 1, comm->settings.nchannels);
    TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d root %d: %d channel(s), %s", comm->where().c_str(), binding.name,
                (unsigned long long)binding.seq, t.count, kern::dtypeName(t.type), int(t.op), t.root, nch,
                plan::describe(p).c_str());
    // Every rank cuts the operation alike: the chunk follows from the count all of them pass, and
    // from the plan's widest joined run (the same on every rank), which must fit one such chunk,
    // as both cost models cut it.
    const size_t width = plan::joinWidth(p);
    const size_t chunkBytes = plan::joinedChunkBytes(
        sim::chunkBytesFor(comm->settings.slotBytes, modelBytes(toColl(t.kind), t.count, binding.eltSize, comm->identity.nranks)), width);
    if (chunkBytes < binding.eltSize)
      throw Error(ErrorCode::InvalidUsage, comm->where() + ": " + binding.name + " with algorithm " + p.algorithm + " joins " +
                                               std::to_string(width) + " steps into one message, more than a FIFO slot of " +
                                               std::to_string(comm->settings.slotBytes) + " bytes holds (raise NCCL_BUFFSIZE or choose another algorithm)");
    size_t per = (t.count + size_t(nch) - 1) / size_t(nch);
    per = (per + 15) / 16 * 16;
    for (int c = 0; c < nch; c++) {
      size_t begin = std::min(t.count, size_t(c) * per), end = std::min(t.count, begin + per);
      int w = workerOfChannel(comm, c);
      if (c > 0) L.plans.push_back(planFor(comm, t, *selection.algorithm, c));  // its channel's ring
      for (const plan::LaneSpec& spec : L.plans.back()->lanes) {
        bool whole = false;  // a spread lane: on one channel, over the whole buffer
        if (!plan::laneRunsOn(spec, c, nch, comm->identity.nranks, &whole)) continue;
        BoundLane bound;
        kern::Lane& lane = bound.lane;
        lane.spec = &spec;
        lane.op = &binding;
        lane.channel = c;
        lane.begin = whole ? 0 : begin;
        lane.end = whole ? t.count : end;
        lane.chunkElems = std::max<size_t>(1, chunkBytes / binding.eltSize);
        kern::prepareLane(lane);
        for (int peer : spec.sendPeers) bound.sendKeys.push_back(ConnKey{peer, c, spec.kind, spec.tag, true});
        for (int peer : spec.recvPeers) bound.recvKeys.push_back(ConnKey{peer, c, spec.kind, spec.tag, false});
        keys.insert(keys.end(), bound.sendKeys.begin(), bound.sendKeys.end());
        keys.insert(keys.end(), bound.recvKeys.begin(), bound.recvKeys.end());
        lanes[size_t(w)].push_back(std::move(bound));
      }
    }
  }

}

// Points the lanes at their connections and forms the queues.
void connect(CommLaunch& L) {
  ncclComm* comm = L.comm;
  L.queues.assign(size_t(comm->settings.nworkers), {});
  for (int w = 0; w < comm->settings.nworkers; w++) {
    for (BoundLane& bound : L.lanes[size_t(w)]) connectLane(comm, w, bound);
    L.queues[size_t(w)] = formQueues(L.lanes[size_t(w)]);
  }
  L.lanes.clear();
  layOutScratch(L);
}

// Takes the launch's scratch and points its lanes at their parts.
void takeScratch(CommLaunch& L) {
  if (L.scratchBytes == 0) return;
  L.scratch = L.comm->executor.scratch->take(L.scratchBytes);
  for (const CommLaunch::ScratchUse& u : L.scratchUses)
    L.queues[size_t(u.worker)][u.queue].lanes[u.lane].scratch = L.scratch.data() + u.offset;
}

kern::ExecutionContext contextFor(ncclComm* comm, int worker, bool driveNetwork = false) {
  kern::ExecutionContext ctx;
  ctx.bell = &comm->control.own->bells[worker];
  ctx.abortFlag = &comm->error.abortFlag;
  ctx.timeoutSeconds = comm->settings.timeoutSeconds;
  ctx.spin = comm->settings.spin;
  ctx.yields = comm->settings.yields;
  ctx.rank = comm->identity.rank;
  ctx.peerNamer = [](const void* owner, int peer) { return static_cast<const ncclComm*>(owner)->describePeer(peer); };
  ctx.peerNamerArg = comm;
  ctx.waitSlot = &comm->executor.waits[size_t(worker)];
  if (comm->links.proxy() && driveNetwork) {
    ctx.pollNetwork = [](void* proxy) { return static_cast<TransportProxy*>(proxy)->tryProgress(); };
    ctx.networkSendsWaiting = [](void* proxy) { return static_cast<TransportProxy*>(proxy)->sendsWaiting(); };
    ctx.driveNetwork = [](void* proxy, kern::ExecutionContext::Drive change) {
      auto* p = static_cast<TransportProxy*>(proxy);
      switch (change) {
        case kern::ExecutionContext::Drive::Start: p->startDriving(); break;
        case kern::ExecutionContext::Drive::Stop: p->stopDriving(); break;
        case kern::ExecutionContext::Drive::Release: p->releaseDriving(); break;
      }
    };
    ctx.networkArg = comm->links.proxy();
  }
  return ctx;
}

// Whether the launch's workers move the network FIFOs themselves while they wait (see
// NetProxy::tryProgress) rather than leave them to the proxy thread: when each has a core to
// itself (comm->settings.drivingWorkers, set at init).
bool workersDriveNetwork(const CommLaunch& L) {
  int active = 0;
  for (const auto& queues : L.queues) active += queues.empty() ? 0 : 1;
  return active <= L.comm->settings.drivingWorkers;
}

// A worker that stopped because the communicator failed elsewhere (the proxy saw the peer die)
// reports Aborted; the caller should get the cause instead: throws the communicator's recorded
// error if it is another.
void throwRecordedCause(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->error.mutex);
  if (comm->error.asyncError.load() != ncclSuccess && comm->error.code != ErrorCode::Aborted)
    throw Error(comm->error.code, comm->error.message);
}

// Runs one all-reduce through the mailboxes on this thread, which must be the one of the
// communicator's worker 0 (it sleeps on that worker's bell). Takes the next mailbox number.
void runMailboxAllReduce(ncclComm* comm, const Task& t, const kern::RedOp& redop, const char* name, uint64_t opSeq) {
  kern::MailboxAllReduce op;
  op.seq = ++comm->executor.mailboxSeq;
  op.rank = comm->identity.rank;
  op.nranks = comm->identity.nranks;
  op.boxes = comm->control.mailboxes[op.seq % 2].data();
  op.bells = comm->control.mailboxBells.data();
  op.in = t.in;
  op.out = t.out;
  op.count = t.count;
  op.type = t.type;
  op.redop = redop;
  op.name = name;
  op.opSeq = opSeq;
  kern::runMailboxAllReduce(op, contextFor(comm, 0));
}

// A mailbox launch's one all-reduce, on the thread of the communicator's worker 0.
void runMailbox(CommLaunch& L) {
  const kern::OpBinding& b = L.bindings.front();
  runMailboxAllReduce(L.comm, L.tasks.front(), b.redop, b.name, b.seq);
}

// Runs the launches to completion. With one launch, worker 0 runs on this thread.
void execute(std::span<CommLaunch* const> launches) {
  const bool inlineFirst = launches.size() == 1;
  struct GiveBackScratch {
    std::span<CommLaunch* const> launches;
    ~GiveBackScratch() {
      for (CommLaunch* L : launches) L->scratch.release();
    }
  } giveBack{launches};
  for (CommLaunch* L : launches) takeScratch(*L);
  for (CommLaunch* L : launches)
    for (const CommLaunch::Copy& c : L->prologue)
      if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);  // a count of 0 may come with null buffers
  for (CommLaunch* L : launches) {
    // Workers that leave the sockets to the proxy thread need it awake, not sleeping out sockets
    // a previous operation's worker released (NetProxy::releaseDriving).
    if (TransportProxy* proxy = L->comm->links.proxy(); proxy != nullptr && !workersDriveNetwork(*L)) proxy->wake();
    if (L->mailbox && !inlineFirst) L->comm->executor.workers->start(0, [L] { runMailbox(*L); });
    for (int w = inlineFirst ? 1 : 0; w < L->comm->settings.nworkers; w++)
      if (!L->queues[size_t(w)].empty())
        L->comm->executor.workers->start(w, [L, w] { kern::runQueues(L->queues[size_t(w)], contextFor(L->comm, w, workersDriveNetwork(*L))); });
  }
  std::exception_ptr first;
  if (inlineFirst) {
    try {
      if (launches[0]->mailbox) runMailbox(*launches[0]);
      else kern::runQueues(launches[0]->queues[0], contextFor(launches[0]->comm, 0, workersDriveNetwork(*launches[0])));
    } catch (const Error& e) {
      launches[0]->comm->fail(e);
      first = std::current_exception();
    }
  }
  for (CommLaunch* L : launches) {
    try {
      L->comm->executor.workers->wait();
    } catch (const Error& e) {
      L->comm->fail(e);
      if (!first) first = std::current_exception();
    }
  }
  if (first) {
    try {
      std::rethrow_exception(first);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Aborted) throw;
      for (CommLaunch* L : launches) throwRecordedCause(L->comm);
      throw;
    }
  }
}

void launchGroup(std::vector<Task> tasks) {
  // One launch per communicator, in order of first appearance.
  std::vector<std::shared_ptr<CommLaunch>> launches;
  for (const Task& t : tasks) {
    auto it = std::find_if(launches.begin(), launches.end(), [&](auto& L) { return L->comm == t.comm; });
    if (it == launches.end()) {
      launches.push_back(std::make_shared<CommLaunch>());
      launches.back()->comm = t.comm;
      launches.back()->stream = t.stream;
      it = launches.end() - 1;
    }
    if ((*it)->stream != t.stream)
      throw Error(ErrorCode::InvalidUsage, t.comm->where() + ": operations on one communicator in one group use different streams; "
                                                            "the host backend needs them on one stream (not supported yet)");
    (*it)->tasks.push_back(t);
  }
  // ncclCommAbort from another thread waits for this count to drop before freeing the comm.
  struct Active {
    const std::vector<std::shared_ptr<CommLaunch>>& launches;
    explicit Active(const std::vector<std::shared_ptr<CommLaunch>>& l) : launches(l) {
      for (auto& L : launches) L->comm->executor.activeLaunches++;
    }
    ~Active() {
      for (auto& L : launches) L->comm->executor.activeLaunches--;
    }
  } active(launches);
  std::vector<std::pair<ncclComm*, std::vector<ConnKey>>> wanted;
  for (auto& L : launches) {
    // The same check as at the call: the comm may have failed or been destroyed since.
    checkUsableComm("ncclGroupEnd", L->comm);
    bind(*L);
    wanted.emplace_back(L->comm, std::move(L->keys));
  }
  // New connections for every communicator of the group together, phase by phase: one thread
  // may hold several ranks of one job.
  try {
    ensureConnections(wanted);
  } catch (const Error& e) {
    // A connection half made leaves its communicator unusable, as a failed operation does.
    for (auto& L : launches) L->comm->fail(Error(e.code() == ErrorCode::Timeout ? ErrorCode::Remote : e.code(), e.message()));
    throw;
  }
  for (auto& L : launches) connect(*L);
  // Streams: NULL runs now; each host stream gets its launches as one job.
  std::map<cudaStream_t, std::vector<std::shared_ptr<CommLaunch>>> byStream;
  for (auto& L : launches) byStream[L->stream].push_back(L);
  for (auto& [stream, group] : byStream) {
    if (stream == nullptr) continue;
    HostStream* hs = HostStream::fromHandle(stream);
    for (auto& L : group) L->comm->executor.pendingStreamJobs++;
    hs->enqueue([group] {
      std::vector<CommLaunch*> raw;
      for (auto& L : group) raw.push_back(L.get());
      struct Done {
        const std::vector<std::shared_ptr<CommLaunch>>& group;
        ~Done() {
          for (auto& L : group) L->comm->executor.pendingStreamJobs--;
        }
      } done{group};
      execute(raw);
    });
  }
  if (byStream.count(nullptr)) {
    std::vector<CommLaunch*> raw;
    for (auto& L : byStream[nullptr]) raw.push_back(L.get());
    execute(raw);
  }
}

// What a bound launch of one operation depends on besides its buffers: a later call of the same
// shape binds to the same lanes, plans, connections and scratch layout.
struct LaunchShape {
  CollKind kind;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  cudaStream_t stream;
  const plan::Algorithm* algorithm;
  int nchannels;
  bool operator==(const LaunchShape&) const = default;
};

struct IdleLaunch {
  LaunchShape shape;
  std::unique_ptr<CommLaunch> launch;
};

}  // namespace

// A communicator's finished single-operation launches, newest last. Taken by the caller's thread,
// given back by whichever thread ran the launch.
struct LaunchCache {
  // A loop of calls on one stream has up to a queue's worth in flight; all of them come back.
  static constexpr size_t kMaxIdle = HostStream::kCapacity + 16;
  std::mutex mutex;
  std::vector<IdleLaunch> idle;

  // Mailbox all-reduces queued on host streams need no launch: the caller fills a slot, the
  // stream's job (which captures only the communicator and the slot, so queueing it allocates
  // nothing) runs it and frees the slot. Taken in turn by the caller's thread; a slot still busy
  // (jobs on several streams finish out of order) sends the call down the launch path.
  static constexpr size_t kMailboxSlots = 2 * HostStream::kCapacity + 8;
  struct MailboxJob {
    Task task;
    kern::RedOp redop;
    uint64_t opSeq = 0;
    std::atomic<bool> busy{false};
  };
  MailboxJob mailboxJobs[kMailboxSlots];
  size_t mailboxJobsTaken = 0;
};

namespace {

LaunchCache& launchCacheOf(ncclComm* comm) {
  // Made by the caller's thread on the first launch, before any stream job can use it.
  if (!comm->executor.launchCache) {
    comm->executor.launchCache = std::make_shared<LaunchCache>();
    comm->executor.launchCache->idle.reserve(LaunchCache::kMaxIdle + 1);
  }
  return *comm->executor.launchCache;
}

std::unique_ptr<CommLaunch> takeIdleLaunch(ncclComm* comm, const LaunchShape& shape) {
  LaunchCache& cache = launchCacheOf(comm);
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (size_t i = cache.idle.size(); i-- > 0;)
    if (cache.idle[i].shape == shape) {
      std::unique_ptr<CommLaunch> L = std::move(cache.idle[i].launch);
      cache.idle.erase(cache.idle.begin() + std::ptrdiff_t(i));
      return L;
    }
  return nullptr;
}

void giveBackLaunch(ncclComm* comm, const LaunchShape& shape, std::unique_ptr<CommLaunch> L) {
  LaunchCache& cache = *comm->executor.launchCache;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.idle.size() == LaunchCache::kMaxIdle) cache.idle.erase(cache.idle.begin());  // the oldest
  cache.idle.push_back({shape, std::move(L)});
}

// Points a finished launch of the same shape at a new call's buffers and rewinds its lanes.
void rebind(CommLaunch& L, const Task& t) {
  ncclComm* comm = L.comm;
  L.tasks.front() = t;
  kern::OpBinding& b = L.bindings.front();
  b.seq = comm->executor.opSeq++;
  b.in = t.in;
  b.out = t.out;
  bool reducing = t.kind == CollKind::AllReduce || t.kind == CollKind::ReduceScatter || t.kind == CollKind::Reduce;
  if (reducing) b.redop = resolveRedOp(comm, t.type, t.op);
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d root %d: %d channel(s), %s (bound before)", comm->where().c_str(),
              b.name, (unsigned long long)b.seq, t.count, kern::dtypeName(t.type), int(t.op), t.root, std::clamp(L.selection->nchannels, 1, comm->settings.nchannels),
              L.mailbox ? "oneshot through the mailboxes" : plan::describe(*L.plans.front()).c_str());
  for (std::vector<kern::LaneQueue>& queues : L.queues)
    for (kern::LaneQueue& q : queues) {
      q.current = 0;
      for (kern::Lane& lane : q.lanes) kern::prepareLane(lane);
    }
}

// Whether the selector sends this call through the mailboxes (remembered per size).
bool mailboxChosen(ncclComm* comm, const Task& t) {
  const size_t bytes = t.count * kern::dtypeSize(t.type);
  if (t.kind != CollKind::AllReduce || !comm->control.mailboxesMapped || bytes > kern::kMailboxBytes) return false;
  if (!comm->planning.forcedAlgorithm.empty()) return viaMailbox(comm, t, chooseAlgorithm(comm, t));
  if (comm->planning.mailboxChoiceBytes != bytes) {
    comm->planning.mailboxChoice = viaMailbox(comm, t, chooseAlgorithm(comm, t));
    comm->planning.mailboxChoiceBytes = bytes;
  }
  return comm->planning.mailboxChoice;
}

// Records a mailbox operation's failure on its communicator and throws its cause.
[[noreturn]] void failMailbox(ncclComm* comm, const Error& e) {
  comm->fail(e);
  if (e.code() == ErrorCode::Aborted) throwRecordedCause(comm);
  throw e;
}

// A blocking all-reduce that the selector sends through the mailboxes runs here and now, without
// a launch: nothing is bound, so a loop of them costs only the exchange. Returns false when the
// call is not one.
bool mailboxNow(ncclComm* comm, const Task& t) {
  if (!mailboxChosen(comm, t)) return false;
  const uint64_t opSeq = comm->executor.opSeq++;
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes", comm->where().c_str(),
              collName(t.kind), (unsigned long long)opSeq, t.count, kern::dtypeName(t.type), int(t.op));
  try {
    runMailboxAllReduce(comm, t, resolveRedOp(comm, t.type, t.op), collName(t.kind), opSeq);
  } catch (const Error& e) {
    failMailbox(comm, e);
  }
  return true;
}

// A mailbox all-reduce on a host stream, queued without a launch (LaunchCache::MailboxJob).
// Returns false when the call is not one, or its slot is still busy.
bool queueMailbox(ncclComm* comm, const Task& t) {
  if (!mailboxChosen(comm, t)) return false;
  LaunchCache& cache = launchCacheOf(comm);
  LaunchCache::MailboxJob& job = cache.mailboxJobs[cache.mailboxJobsTaken % LaunchCache::kMailboxSlots];
  if (job.busy.load(std::memory_order_acquire)) return false;
  job.task = t;
  job.redop = resolveRedOp(comm, t.type, t.op);
  job.opSeq = comm->executor.opSeq++;
  job.busy.store(true, std::memory_order_relaxed);
  cache.mailboxJobsTaken++;
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes, queued", comm->where().c_str(),
              collName(t.kind), (unsigned long long)job.opSeq, t.count, kern::dtypeName(t.type), int(t.op));
  comm->executor.pendingStreamJobs++;
  LaunchCache::MailboxJob* slot = &job;
  HostStream::fromHandle(t.stream)->enqueue([comm, slot] {
    struct Done {
      ncclComm* comm;
      LaunchCache::MailboxJob* slot;
      ~Done() {
        slot->busy.store(false, std::memory_order_release);
        comm->executor.pendingStreamJobs--;
      }
    } done{comm, slot};
    try {
      runMailboxAllReduce(comm, slot->task, slot->redop, collName(slot->task.kind), slot->opSeq);
    } catch (const Error& e) {
      failMailbox(comm, e);
    }
  });
  return true;
}

// A launch of one operation outside a group (or a group of one): reuses a finished launch of
// the same shape when there is one, so a loop of identical calls allocates nothing per call.
// Self sends and in-place all-to-all (which copies its input per call) take the general path.
// checked: the caller has just checked that the communicator is usable.
void launchSingle(const Task& t, bool checked) {
  ncclComm* comm = t.comm;
  if (t.kind == CollKind::Send || t.kind == CollKind::Recv || (t.kind == CollKind::AlltoAll && t.in != nullptr && t.in == t.out)) {
    launchGroup({t});
    return;
  }
  if (!checked) checkUsableComm("ncclGroupEnd", comm);
  struct Active {
    ncclComm* comm;
    explicit Active(ncclComm* c) : comm(c) { comm->executor.activeLaunches++; }
    ~Active() { comm->executor.activeLaunches--; }
  } active(comm);
  if (t.stream == nullptr ? mailboxNow(comm, t) : queueMailbox(comm, t)) return;
  Selection selection = chooseAlgorithm(comm, t);
  LaunchShape shape{t.kind, t.count, t.type, t.op, t.root, t.stream, selection.algorithm, selection.nchannels};
  std::unique_ptr<CommLaunch> L = takeIdleLaunch(comm, shape);
  if (L) {
    rebind(*L, t);
  } else {
    L = std::make_unique<CommLaunch>();
    L->comm = comm;
    L->stream = t.stream;
    L->tasks.push_back(t);
    L->selection = selection;
    bind(*L);
    std::vector<std::pair<ncclComm*, std::vector<ConnKey>>> wanted;
    wanted.emplace_back(comm, std::move(L->keys));
    try {
      ensureConnections(wanted);
    } catch (const Error& e) {
      comm->fail(Error(e.code() == ErrorCode::Timeout ? ErrorCode::Remote : e.code(), e.message()));
      throw;
    }
    connect(*L);
  }
  if (t.stream == nullptr) {
    CommLaunch* one[] = {L.get()};
    execute(one);
    giveBackLaunch(comm, shape, std::move(L));
    return;
  }
  // The job captures one pointer, which std::function keeps without allocating.
  comm->executor.pendingStreamJobs++;
  CommLaunch* raw = L.release();
  HostStream::fromHandle(t.stream)->enqueue([raw] {
    ncclComm* owner = raw->comm;
    struct Done {
      ncclComm* comm;
      ~Done() { comm->executor.pendingStreamJobs--; }
    } done{owner};
    std::unique_ptr<CommLaunch> own(raw);
    CommLaunch* one[] = {raw};
    execute(one);
    const Task& task = own->tasks.front();
    const LaunchShape shape{task.kind, task.count, task.type, task.op, task.root, task.stream, own->selection->algorithm,
                            own->selection->nchannels};
    giveBackLaunch(owner, shape, std::move(own));
  });
}

}  // namespace

const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce: return "AllReduce";
    case CollKind::AllGather: return "AllGather";
    case CollKind::ReduceScatter: return "ReduceScatter";
    case CollKind::Broadcast: return "Broadcast";
    case CollKind::Reduce: return "Reduce";
    case CollKind::AlltoAll: return "AlltoAll";
    case CollKind::Gather: return "Gather";
    case CollKind::Scatter: return "Scatter";
    case CollKind::Send: return "Send";
    case CollKind::Recv: return "Recv";
  }
  return "?";
}

std::pair<std::string, int> algorithmFor(const Task& task) {
  Selection s = chooseAlgorithm(task.comm, task);
  return {s.algorithm->name, std::clamp(s.nchannels, 1, task.comm->settings.nchannels)};
}

void enqueueTask(const Task& task) {
  if (tGroup.depth > 0) {
    tGroup.tasks.push_back(task);
    return;
  }
  launchSingle(task, true);  // the call has just checked the communicator
}

void groupStart() { tGroup.depth++; }

void groupEnd() {
  if (tGroup.depth == 0) throw Error(ErrorCode::InvalidUsage, "ncclGroupEnd: not inside a group (no matching ncclGroupStart)");
  if (--tGroup.depth > 0) return;
  std::vector<Task> tasks = std::move(tGroup.tasks);
  tGroup.tasks.clear();
  int error = tGroup.error;
  tGroup.error = ncclSuccess;
  if (error != ncclSuccess)
    throw Error(ErrorCode::InvalidUsage, "ncclGroupEnd: a call inside the group failed (see the earlier error); the group's " +
                                             std::to_string(tasks.size()) + " other operations were dropped");
  if (tasks.size() == 1) launchSingle(tasks.front(), false);
  else if (!tasks.empty()) launchGroup(std::move(tasks));
}

double groupSimulateEnd() {
  if (tGroup.depth == 0)
    throw Error(ErrorCode::InvalidUsage, "ncclGroupSimulateEnd: not inside a group (no matching ncclGroupStart)");
  if (tGroup.depth > 1) {
    tGroup.depth--;
    throw Error(ErrorCode::InvalidUsage, "ncclGroupSimulateEnd: called inside a nested group; it must end the outermost one "
                                         "(the inner group was ended, nothing was simulated)");
  }
  tGroup.depth = 0;
  std::vector<Task> tasks = std::move(tGroup.tasks);
  tGroup.tasks.clear();
  int error = tGroup.error;
  tGroup.error = ncclSuccess;
  if (error != ncclSuccess)
    throw Error(ErrorCode::InvalidUsage, "ncclGroupSimulateEnd: a call inside the group failed (see the earlier error)");
  // A communicator's operations run one after another; communicators run side by side.
  std::map<ncclComm*, double> perComm;
  for (const Task& t : tasks) {
    checkUsableComm("ncclGroupSimulateEnd", t.comm);
    plan::Coll coll = toColl(t.kind);
    perComm[t.comm] += t.comm->planning.selector->estimate(coll, modelBytes(coll, t.count, kern::dtypeSize(t.type), t.comm->identity.nranks));
  }
  double longest = 0;
  for (auto& [comm, us] : perComm) longest = std::max(longest, us);
  return longest;
}

void groupRecordError(int result) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess) tGroup.error = result;
}

int groupDepth() { return tGroup.depth; }

}  // namespace tutti
