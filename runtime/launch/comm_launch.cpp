// Binding one communicator's tasks into a work arena (comm_launch.h): algorithm choice, compiled
// plans, the tiling of each operation over channels (algorithms/tiling.h), lanes, connections,
// queues and scratch.
#include "runtime/launch/comm_launch.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "algorithms/registry.h"
#include "algorithms/sim.h"
#include "algorithms/tiling.h"
#include "base/log.h"
#include "kernels/dtypes.h"
#include "kernels/exec_fault.h"
#include "kernels/host_reduce.h"
#include "kernels/plan_bounds.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/comm/peer_buffers.h"
#include "runtime/comm/topo_init.h"
#include "runtime/diagnostics/flight_recorder_dump.h"
#include "runtime/launch/mailbox_path.h"
#include "runtime/launch/redop.h"
#include "transports/transport.h"

namespace tutti {
namespace {

// Below this many bytes per channel, fewer channels are used (each costs a lap of latency).
constexpr size_t kMinBytesPerChannel = 256 * 1024;

// The default when nothing else decides: rings for the reducing and gathering collectives,
// direct exchanges for the rest, and a channel per kMinBytesPerChannel.
Selection defaultSelection(ncclComm* comm, const Task& t) {
  const plan::Coll coll = t.coll;
  bool ring = coll == plan::Coll::AllReduce || coll == plan::Coll::AllGather || coll == plan::Coll::ReduceScatter ||
              coll == plan::Coll::Broadcast || coll == plan::Coll::Reduce;
  Selection s;
  s.algorithm = comm->planning.algorithms.find(ring ? "ring" : "direct");
  if (!s.algorithm) throw Error(ErrorCode::Internal, comm->where() + ": no algorithm for " + plan::collTitle(t.coll));
  s.nchannels = channelsForBytes(t.count * kern::dtypeSize(t.type), comm->settings.nchannels);
  return s;
}

// The compiled plan of a task on this rank for one channel, from the communicator's cache (plans
// depend only on the algorithm, the collective, its root or peer, and the ring and trees the
// channel follows).
std::shared_ptr<const CompiledPlan> planFor(ncclComm* comm, const Task& t, const plan::Algorithm& algorithm,
                                            int channel = 0) {
  auto key = std::make_tuple(algorithm.name, int(t.coll), t.root, ringIndexOf(comm->planning.topology.get(), channel),
                             treeIndexOf(comm->planning.topology.get(), channel));
  auto cached = comm->planning.planCache.find(key);
  if (cached == comm->planning.planCache.end()) {
    plan::PlanRequest request{t.coll, comm->identity.rank, comm->identity.nranks, t.root};
    request.ranksPerNode = comm->planning.ranksPerNode;
    request.ring = ringOrderOf(comm->planning.topology.get(), channel);
    request.trees = treesOf(comm->planning.topology.get(), channel);
    auto made = std::make_shared<CompiledPlan>();
    made->plan = algorithm.build(request);
    kern::checkPlanBounds(made->plan, comm->identity.rank, comm->identity.nranks);
    made->flat = plan::compilePlan(made->plan);
    made->resident = &plan::flatPlanOf(made->flat);
    kern::DeviceMemory* memory = &comm->executor.backend->memory();
    if (memory->memorySpace() == kern::MemorySpace::Device) {
      const size_t bytes = made->flat.size() * sizeof(uint64_t);
      void* copy = memory->allocate(
          bytes, comm->where() + ": the " + algorithm.name + " plan (" + std::to_string(bytes) + " bytes)");
      made->residentCopy = std::shared_ptr<void>(copy, [memory](void* p) { memory->release(p); });
      memory->copyIn(copy, made->flat.data(), bytes);
      made->resident = static_cast<const plan::FlatPlan*>(copy);
    }
    cached = comm->planning.planCache.emplace(key, std::move(made)).first;
  }
  return cached->second;
}

// The trace's words for OpWork::direct (the steps marked * in a plan's description may then go
// by address).
std::string directNote(uint8_t direct) {
  auto buffers = [](bool in, bool out) {
    return in && out ? std::string("input and output") : in ? std::string("input") : std::string("output");
  };
  std::string note;
  const bool in = direct & kern::kDirectIn, out = direct & kern::kDirectOut;
  if (in || out) note = "; zero-copy: peers read the " + buffers(in, out) + " in place";
  const bool inByAddress = (direct & kern::kDirectInByAddress) && !in;
  const bool outByAddress = (direct & kern::kDirectOutByAddress) && !out;
  if (inByAddress || outByAddress)
    note += "; zero-copy where peers reach this rank's memory: the " + buffers(inByAddress, outByAddress) +
            " (unregistered)";
  return note;
}

// Groups one worker's lanes into queues: lanes that share a connection (directly or through
// other lanes) form one queue, in plan order; the queues are ordered by their first lane.
// Returns each queue's lanes (indices into `lanes`).
template <typename Lane>
std::vector<std::vector<size_t>> formQueues(const std::vector<Lane>& lanes) {
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
  std::vector<std::vector<size_t>> queues;
  std::vector<size_t> queueOfRoot(lanes.size(), size_t(-1));
  for (size_t i = 0; i < lanes.size(); i++) {
    size_t root = find(i);
    if (queueOfRoot[root] == size_t(-1)) {
      queueOfRoot[root] = queues.size();
      queues.emplace_back();
    }
    queues[queueOfRoot[root]].push_back(i);
  }
  return queues;
}

// A self send and its receive become one local copy.
void pairSelfSends(ncclComm* comm, std::vector<Task>& tasks) {
  std::vector<Task> kept;
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < tasks.size(); i++) {
    const Task& t = tasks[i];
    if (t.coll == plan::Coll::Send && t.root == comm->identity.rank)
      sends.push_back(i);
    else if (t.coll == plan::Coll::Recv && t.root == comm->identity.rank)
      recvs.push_back(i);
  }
  if (sends.size() != recvs.size())
    throw Error(ErrorCode::InvalidUsage,
                comm->where() + ": " + std::to_string(sends.size()) + " ncclSend and " + std::to_string(recvs.size()) +
                    " ncclRecv to/from itself in one group; each self send needs its receive in the same group");
  for (size_t k = 0; k < sends.size(); k++) {
    Task& s = tasks[sends[k]];
    const Task& r = tasks[recvs[k]];
    if (s.count != r.count || s.type != r.type)
      throw Error(ErrorCode::InvalidUsage, comm->where() + ": a self ncclSend of " + std::to_string(s.count) +
                                               " elements is paired with a self ncclRecv of " +
                                               std::to_string(r.count));
    s.out = r.out;  // the send's plan is then a local copy into the receive buffer
  }
  for (size_t i = 0; i < tasks.size(); i++)
    if (std::find(recvs.begin(), recvs.end(), i) == recvs.end()) kept.push_back(tasks[i]);
  tasks = std::move(kept);
}

}  // namespace

int channelsForBytes(size_t bytes, int nchannels) {
  return int(
      std::clamp<size_t>((bytes + kMinBytesPerChannel - 1) / kMinBytesPerChannel, 1, size_t(std::max(1, nchannels))));
}

Selection chooseAlgorithm(ncclComm* comm, const Task& t) {
  if (!comm->planning.forcedAlgorithm.empty()) {
    const plan::Algorithm* forced = comm->planning.algorithms.find(comm->planning.forcedAlgorithm);
    if (forced && forced->serves(t.coll)) {
      Selection s = defaultSelection(comm, t);
      s.algorithm = forced;
      return s;
    }
  }
  if (t.coll == plan::Coll::Send || t.coll == plan::Coll::Recv || !comm->planning.selector)
    return defaultSelection(comm, t);
  return comm->planning.selector->select(t.coll,
                                         modelBytes(t.coll, t.count, kern::dtypeSize(t.type), comm->identity.nranks));
}

bool viaMailbox(const ncclComm* comm, const Task& t, const Selection& selection) {
  return t.coll == plan::Coll::AllReduce && comm->control.mailboxesMapped && selection.algorithm->name == "oneshot" &&
         t.count * kern::dtypeSize(t.type) <= kern::kMailboxBytes;
}

uint8_t directBuffers(ncclComm* comm, const Task& t) {
  const BufferUse use = bufferUse(t.coll, t.count, comm->identity.nranks, t.root == comm->identity.rank);
  const bool readsIn = use.readsIn && use.inCount > 0 && t.in != nullptr;
  const bool writesOut = use.writesOut && use.outCount > 0 && t.out != nullptr;
  const kern::ExecutorBackend& backend = *comm->executor.backend;
  uint8_t direct = 0;
  // Any buffer, where a peer reaches every address of this rank (the connection decides: lane_engine.h).
  if (comm->settings.readInPlace && (backend.readsPeerBuffers() || backend.readsOtherProcesses())) {
    if (readsIn) direct |= kern::kDirectInByAddress;
    if (writesOut) direct |= kern::kDirectOutByAddress;
  }
  const Registrations& registered = comm->links.registrations;
  const bool mapped = comm->links.peerBuffers && comm->links.peerBuffers->table() != nullptr;
  if (registered.empty() || !(backend.readsPeerBuffers() || mapped)) return direct;
  const size_t eltSize = kern::dtypeSize(t.type);
  if (readsIn && registered.covers(t.in, use.inCount * eltSize)) direct |= kern::kDirectIn;
  if (writesOut && registered.covers(t.out, use.outCount * eltSize)) direct |= kern::kDirectOut;
  return direct;
}

uint64_t nextCallSignature(ncclComm* comm, const Task& t, kern::RedKind redKind) {
  if (t.coll == plan::Coll::Send || t.coll == plan::Coll::Recv)
    return t.partOfAllToAllv
               ? kern::callSignature(t.allToAllvSeq, uint32_t(plan::Coll::Send), 0, 0, kern::kPartOfAllToAllv)
               : kern::callSignature(0, uint32_t(plan::Coll::Send), 0, 0, 0);
  const uint32_t red = reduces(t.coll) ? uint32_t(redKind) : 0;
  const uint32_t root = plan::rootedColl(t.coll) ? uint32_t(t.root) : 0;
  const uint64_t signature =
      kern::callSignature(comm->executor.collSeq++, uint32_t(t.coll), uint32_t(t.type), red, root);
  if (comm->control.own != nullptr) comm->control.own->calls.record(kern::signatureSeq(signature), signature, t.count);
  return signature;
}

void throwRecordedCause(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->error.mutex);
  if (comm->error.asyncError.load() != ncclSuccess && comm->error.code != ErrorCode::Aborted)
    throw Error(comm->error.code, comm->error.message);
}

kern::ExecutionContext contextFor(ncclComm* comm, int worker, bool driveNetwork) {
  kern::ExecutionContext ctx;
  ctx.bell = &comm->control.own->bells[worker];
  ctx.abortFlag = &comm->error.abortFlag;
  ctx.timeoutSeconds = comm->settings.timeoutSeconds;
  ctx.spin = comm->settings.spin;
  ctx.yields = comm->settings.yields;
  ctx.rank = comm->identity.rank;
  ctx.hooks = driveNetwork ? &comm->executor.drivingWaitHooks : &comm->executor.waitHooks;
  ctx.waitSlot = &comm->executor.waits[size_t(worker)];
  ctx.directReads = &comm->executor.directReads;
  return ctx;
}

CommLaunch::~CommLaunch() {
  for (void* p : inputCopies_) comm->executor.backend->memory().release(p);
}

kern::OpWork CommLaunch::opFor(const Task& t, uint64_t seq) {
  kern::OpWork op{};
  op.in = t.in;
  op.out = t.out;
  op.count = t.count;
  op.seq = seq;
  op.nranks = comm->identity.nranks;
  op.dtype = uint8_t(t.type);
  op.eltSize = uint8_t(kern::dtypeSize(t.type));
  op.coll = uint8_t(t.coll);
  if (reduces(t.coll)) op.redop = resolveRedOp(comm, t.type, t.op, &op.scalar);
  op.signature = nextCallSignature(comm, t, op.redop.kind);
  op.direct = directBuffers(comm, t);
  op.directMinBytes = comm->settings.readInPlaceMinBytes;
  // Where the host's peer processes map this rank's registered buffers (runtime/comm/peer_buffers.h).
  op.mapped = (op.direct & (kern::kDirectIn | kern::kDirectOut)) != 0 && comm->links.peerBuffers
                  ? comm->links.peerBuffers->table()
                  : nullptr;
  return op;
}

void CommLaunch::bind() {
  pairSelfSends(comm, tasks);
  lanes_.assign(size_t(comm->settings.nworkers), {});

  if (tasks.size() == 1) {
    const Task& t = tasks.front();
    Selection chosen = selection ? *selection : chooseAlgorithm(comm, t);
    if (viaMailbox(comm, t, chosen)) {
      selection = chosen;
      mailbox = true;
      const kern::OpWork op = opFor(t, comm->executor.opSeq++);
      builder_.addOp(op);
      recordFlightQueued(comm, op, t, chosen.algorithm->name.c_str(), 1);
      TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes",
                  comm->where().c_str(), plan::collTitle(t.coll), (unsigned long long)(comm->executor.opSeq - 1),
                  t.count, kern::dtypeName(t.type), int(t.op));
      return;
    }
  }

  for (const Task& t : tasks) {
    Selection chosen = selection ? *selection : chooseAlgorithm(comm, t);
    std::shared_ptr<const CompiledPlan> first;
    try {
      first = planFor(comm, t, *chosen.algorithm);
    } catch (const Error& e) {
      // A plan file's algorithm serves only the rank count and root it was written for; the
      // selector estimated it for root 0. Every rank fails alike, so every rank falls back.
      if (chosen.algorithm->origin == "built-in" || e.code() != ErrorCode::InvalidUsage ||
          !comm->planning.forcedAlgorithm.empty())
        throw;
      chosen = defaultSelection(comm, t);
      TUTTI_WARN("%s: %s; using %s instead", comm->where().c_str(), e.what(), chosen.algorithm->name.c_str());
      first = planFor(comm, t, *chosen.algorithm);
    }
    plans.push_back(first);
    Task bound = t;
    const size_t eltSize = kern::dtypeSize(t.type);
    if (t.coll == plan::Coll::AlltoAll && t.in != nullptr && t.in == t.out) {
      // Every block is both sent and overwritten: the launch reads its input from a copy, taken
      // when it runs (in stream order).
      const size_t bytes = t.count * eltSize * size_t(comm->identity.nranks);
      void* copy = comm->executor.backend->memory().allocate(
          bytes, comm->where() + ": a copy of an in-place all-to-all's input");
      inputCopies_.push_back(copy);
      prologue_.push_back(Copy{copy, t.in, bytes});
      bound.in = copy;
    }
    const kern::OpWork op = opFor(bound, comm->executor.opSeq++);
    const uint32_t opIndex = builder_.addOp(op);
    const int nch = std::clamp(chosen.nchannels, 1, comm->settings.nchannels);
    recordFlightQueued(comm, op, t, chosen.algorithm->name.c_str(), nch);
    TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d root %d: %d channel(s), %s%s", comm->where().c_str(),
                plan::collTitle(t.coll), (unsigned long long)(comm->executor.opSeq - 1), t.count,
                kern::dtypeName(t.type), int(t.op), t.root, nch, plan::describe(first->plan).c_str(),
                directNote(op.direct).c_str());
    // Every rank cuts the operation alike: the chunk follows from the count all of them pass, and
    // from the plan's widest joined run (the same on every rank), which must fit one such chunk,
    // as both cost models cut it.
    const size_t width = first->flat.empty() ? 1 : plan::flatPlanOf(first->flat).joinWidth;
    const size_t chunkBytes = plan::joinedChunkBytes(
        tiling::chunkBytesFor(comm->settings.slotBytes, modelBytes(t.coll, t.count, eltSize, comm->identity.nranks)),
        width);
    if (chunkBytes < eltSize)
      throw Error(ErrorCode::InvalidUsage, comm->where() + ": " + plan::collTitle(t.coll) + " with algorithm " +
                                               first->plan.algorithm + " joins " + std::to_string(width) +
                                               " steps into one message, more than a FIFO slot of " +
                                               std::to_string(comm->settings.slotBytes) +
                                               " bytes holds (raise NCCL_BUFFSIZE or choose another algorithm)");
    // A message never carries more than the operation's largest buffer: small operations may go
    // as LL lines where both ends of a connection take them (connect()).
    const size_t llBytes = llMessageBytes(comm, t);
    for (int c = 0; c < nch; c++) {
      const tiling::Range range = tiling::channelRange(t.count, nch, c);
      const int w = workerOfChannel(comm, c);
      std::shared_ptr<const CompiledPlan> compiled =
          c == 0 ? first : planFor(comm, t, *chosen.algorithm, c);  // its channel's ring
      if (c > 0) plans.push_back(compiled);
      for (size_t l = 0; l < compiled->plan.lanes.size(); l++) {
        const plan::LaneSpec& spec = compiled->plan.lanes[l];
        bool whole = false;  // a spread lane: on one channel, over the whole buffer
        if (!plan::laneRunsOn(spec, c, nch, comm->identity.nranks, &whole)) continue;
        BoundLane bound;
        kern::LaneWork& lane = bound.work;
        lane.plan = compiled->resident;
        lane.lane = uint32_t(l);
        lane.op = opIndex;
        lane.channel = c;
        lane.begin = whole ? 0 : range.begin;
        lane.end = whole ? t.count : range.end;
        lane.chunkElems = std::max<size_t>(1, chunkBytes / eltSize);
        bound.llMessageBytes = llBytes;
        for (int peer : spec.sendPeers) bound.sendKeys.push_back(ConnKey{peer, c, spec.kind, spec.tag, true});
        for (int peer : spec.recvPeers) bound.recvKeys.push_back(ConnKey{peer, c, spec.kind, spec.tag, false});
        keys_.insert(keys_.end(), bound.sendKeys.begin(), bound.sendKeys.end());
        keys_.insert(keys_.end(), bound.recvKeys.begin(), bound.recvKeys.end());
        lanes_[size_t(w)].push_back(std::move(bound));
      }
    }
  }
}

void CommLaunch::connect() {
  const bool bells = comm->executor.backend->sleepsOnBells();  // other executors poll
  for (int w = 0; w < comm->settings.nworkers && !mailbox; w++) {
    builder_.beginWorker();
    const std::vector<BoundLane>& lanes = lanes_[size_t(w)];
    for (const std::vector<size_t>& queue : formQueues(lanes)) {
      builder_.beginQueue();
      for (size_t i : queue) {
        auto end = [&](const ConnKey& k) {
          const transport::Connection& conn = *comm->links.connections.at(k);
          // The connection knows its FIFO and whom to wake: the peer's worker, or the proxy. LL
          // where the message fits what both ends take, on a memory transport's FIFO (the
          // network proxy moves Simple slots): the same answer at both ends of the FIFO.
          const transport::TransportTraits& carrier = conn.carrier();
          const bool ll = llOnConnection(comm, k.peer, carrier, lanes[i].llMessageBytes);
          // Addresses in the sender's user buffers where both ends read them alike (fifo.h).
          // Between processes, where the receiver's probe found it may read the sender's (transports/shm),
          // or, on device backends, through the mappings of registered buffers (runtime/comm/peer_buffers.h)
          // on the FIFOs of memory transports.
          const kern::ExecutorBackend& backend = *comm->executor.backend;
          const bool mapped =
              comm->links.peerBuffers && comm->links.peerBuffers->mapsWith(k.peer) && carrier.mapsPeerBuffers;
          const kern::DirectKind direct = backend.readsPeerBuffers() && conn.sharesAddressSpace() ? kern::kDirectShared
                                          : backend.readsOtherProcesses() && conn.readsAcrossProcesses()
                                              ? kern::kDirectAcrossProcesses
                                          : mapped ? kern::kDirectMapped
                                                   : kern::kDirectNone;
          return kern::ConnEnd{conn.fifo(), conn.simpleSlots(),   bells ? static_cast<void*>(conn.bellFor(w)) : nullptr,
                               k.peer,      uint16_t(ll ? 1 : 0), uint16_t(direct)};
        };
        std::vector<kern::ConnEnd> sends, recvs;
        for (const ConnKey& k : lanes[i].sendKeys) sends.push_back(end(k));
        for (const ConnKey& k : lanes[i].recvKeys) recvs.push_back(end(k));
        builder_.addLane(lanes[i].work, sends, recvs);
      }
    }
  }
  lanes_.clear();
  scratchBytes_ = builder_.layOutScratch();
  arena_ = builder_.build();
}

size_t llMessageBytes(const ncclComm* comm, const Task& t) {
  const size_t largestBuffer =
      t.count * kern::dtypeSize(t.type) * (sim::countsBlocks(t.coll) ? size_t(comm->identity.nranks) : 1);
  const bool allowed = largestBuffer > 0 && comm->planning.selector && comm->planning.selector->llAllowed(t.coll);
  return allowed ? largestBuffer : 0;
}

bool llOnConnection(const ncclComm* comm, int peer, const transport::TransportTraits& carrier, size_t messageBytes) {
  const size_t both =
      std::min(comm->identity.peers[size_t(comm->identity.rank)].llBytes, comm->identity.peers[size_t(peer)].llBytes);
  return messageBytes > 0 && messageBytes <= both && carrier.carriesLL;
}

std::string protocolFor(const ncclComm* comm, const Task& t) {
  const size_t bytes = llMessageBytes(comm, t);
  bool ll = false, simple = false;
  for (int p = 0; p < comm->identity.nranks; p++) {
    if (p == comm->identity.rank) continue;
    (llOnConnection(comm, p, transportTo(comm, p).traits(), bytes) ? ll : simple) = true;
  }
  return ll && simple ? "LL+Simple" : ll ? "LL" : "Simple";
}

void CommLaunch::rebind(const Task& t) {
  tasks.front() = t;
  kern::OpWork& op = work().ops()[0];
  op = opFor(t, comm->executor.opSeq++);
  recordFlightQueued(comm, op, t, selection->algorithm->name.c_str(),
                     mailbox ? 1 : std::clamp(selection->nchannels, 1, comm->settings.nchannels));
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d root %d: %d channel(s), %s%s (bound before)",
              comm->where().c_str(), plan::collTitle(t.coll), (unsigned long long)op.seq, t.count,
              kern::dtypeName(t.type), int(t.op), t.root, std::clamp(selection->nchannels, 1, comm->settings.nchannels),
              mailbox ? "oneshot through the mailboxes" : plan::describe(plans.front()->plan).c_str(),
              directNote(op.direct).c_str());
}

void CommLaunch::beforeRun() {
  recordFlightRunning(comm, work());
  // Workers that leave the sockets to the proxy thread need it awake, not sleeping out sockets a
  // previous operation's worker released (TransportProxy::releaseDriving).
  if (transport::TransportProxy* proxy = comm->links.proxy(); proxy && !workersDriveNetwork()) proxy->wake();
  // Taken when the launch runs, not when it binds, so that launches queued on a stream hold none.
  if (scratchBytes_ == 0) return;
  scratch_ = comm->executor.scratch->take(scratchBytes_);
  work().scratch = scratch_.data();
}

void CommLaunch::afterRun() {
  recordFlightEnded(comm, work());  // done, unless failed() came first
  scratch_.release();
  work().scratch = nullptr;
}

// A device launch: the network proxy polls from its submission to its end (a kernel rings no
// bell), and the flight recorder follows the device, not the queue.
void CommLaunch::queued() {
  if (transport::TransportProxy* proxy = comm->links.proxy()) proxy->holdPolling();
}

void CommLaunch::started() { recordFlightRunning(comm, work()); }

void CommLaunch::ended() {
  recordFlightEnded(comm, work());  // done, unless failed() came first
  if (transport::TransportProxy* proxy = comm->links.proxy()) proxy->releasePolling();
}

bool CommLaunch::workersDriveNetwork() const {
  // When each of the launch's workers has a core to itself (comm->settings.drivingWorkers, set at init).
  int active = 0;
  const kern::LaunchWork& w = const_cast<CommLaunch*>(this)->work();
  for (uint32_t i = 0; i < w.nworkers; i++) active += w.workers()[i].nqueues > 0 ? 1 : 0;
  return active <= comm->settings.drivingWorkers;
}

kern::ExecutionContext CommLaunch::context(int worker) { return contextFor(comm, worker, workersDriveNetwork()); }

void CommLaunch::runAlone() {
  const kern::OpWork& op = work().ops()[0];
  runMailboxAllReduce(comm, tasks.front(), op.redop, plan::collTitle(tasks.front().coll), op.seq, op.signature);
}

void CommLaunch::failed(const Error& error) {
  recordFlightFailed(comm, work());
  comm->fail(error);
}

void CommLaunch::raise(const Error& error) {
  // A timeout's recorded error leads with the root cause its diagnosis found (runtime/diagnostics/wait_diagnosis.h).
  if (error.code() == ErrorCode::Aborted || error.code() == ErrorCode::Timeout) throwRecordedCause(comm);
  throw error;
}

}  // namespace tutti
