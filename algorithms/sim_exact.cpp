// The exact cost model: every rank's plan run step by step as an event-driven simulation.
//
// The model, kept simple on purpose so that the analytic model can follow it:
// - Lanes of one rank and channel that share a connection form one queue and run one after the
//   other (entire lane, all tiles); queues run concurrently. Steps of a queue run in order.
// - A rank's queues of one channel share that channel's worker, which issues one step at a time:
//   a ready step's overhead starts once the worker has finished the previous step's overhead
//   (its transfer then proceeds on its own). A direct all-to-all at n ranks so pays 2(n - 1)
//   overheads per tile on each rank, not one, shared among the channels when its lanes spread
//   over them (LaneSpec::spread).
// - A step is ready when its queue's previous step has finished, the chunk it receives has
//   arrived, and the FIFO it sends into has a free slot (the slot's release reaches the sender
//   one link latency after the receiver consumed it).
// - A ready step costs the step overhead; then, if it sends, its transfer: the transfer's rate
//   is capped by the channel's executor and by the link (one NIC for inter-node), and every port
//   it crosses (the sender's local out and the receiver's local in for a node-local link; the two
//   nodes' NIC pools for a network link) is a fluid resource: each transfer reserves
//   bytes / capacity of the port's time, after what was reserved before it, and ends when the
//   slowest of its ports is through. The step finishes when its transfer ends; the chunk reaches
//   the receiver one link latency later. A Copy step costs bytes / copy bandwidth; receiving
//   costs only the step overhead.
// - A joined run of steps (plan.h) is one message: one step overhead, one transfer of all its
//   parts' bytes (the table is not counted), one FIFO slot. The lane's chunk is cut so that its
//   plan's widest run fits the slot, taken to be the pipeline's chunk (joinedChunkBytes).
// Events are processed in time order, so ports are reserved in start order.
#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "algorithms/sim.h"
#include "base/error.h"

namespace tutti::sim {
namespace {

using plan::Op;
using plan::opReceives;
using plan::opSends;

struct Port {
  double free = 0;
  double bytesPerUs = 0;
  double reserve(double start, double bytes) {
    free = std::max(free, start) + bytes / bytesPerUs;
    return free;
  }
};

struct Fifo {
  std::vector<double> arrivals;  // when chunk i reaches the receiver
  std::vector<double> released;  // when the sender sees chunk i's slot free again
  double latencyUs = 0;
  int waitingSender = -1;    // queue blocked on a free slot
  int waitingReceiver = -1;  // queue blocked on a chunk
};

struct LaneRun {
  const plan::LaneSpec* spec = nullptr;
  int rank = 0;
  tiling::Tiles tiles;
  std::vector<int> sendFifo, recvFifo;  // by the lane's sendPeers / recvPeers
};

struct Queue {
  int worker = 0;  // rank * channels + channel
  std::vector<int> lanes;
  size_t lane = 0, tile = 0, step = 0;
  double lastFinish = 0;
  bool done() const { return lane >= lanes.size(); }
};

class ExactSim {
 public:
  ExactSim(const std::vector<plan::RankPlan>& plans, plan::Coll coll, size_t bytes, const Fabric& fabric,
           const Pipeline& pipe)
      : plans_(plans), fabric_(fabric), pipe_(pipe) {
    if (int(plans.size()) != fabric.nranks)
      throw Error(ErrorCode::InvalidArgument, "sim: " + std::to_string(plans.size()) + " plans for a fabric of " +
                                                  std::to_string(fabric.nranks) + " ranks");
    for (int r = 0; r < fabric.nranks; r++) {
      localOut_.push_back({0, fabric.local.gbps * kBytesPerUsPerGBps});
      localIn_.push_back({0, fabric.local.gbps * kBytesPerUsPerGBps});
    }
    for (int n = 0; n < fabric.nodes; n++) {
      nicOut_.push_back({0, fabric.network.gbps * fabric.nicsPerNode * kBytesPerUsPerGBps});
      nicIn_.push_back({0, fabric.network.gbps * fabric.nicsPerNode * kBytesPerUsPerGBps});
    }
    workerFree_.assign(size_t(fabric.nranks) * size_t(pipe.nchannels), 0.0);
    for (int c = 0; c < pipe.nchannels; c++)
      for (int r = 0; r < fabric.nranks; r++) addRank(r, c, coll, bytes);
  }

  ExactResult run() {
    for (size_t q = 0; q < queues_.size(); q++) tryReady(int(q));
    while (!ready_.empty()) {
      auto [t, seq, q] = ready_.top();
      ready_.pop();
      (void)seq;
      execute(q, t);
    }
    ExactResult result;
    for (size_t q = 0; q < queues_.size(); q++) {
      if (!queues_[q].done()) throw Error(ErrorCode::Internal, "sim: the plans deadlock: " + describeStuck(int(q)));
      result.us = std::max(result.us, queues_[q].lastFinish);
    }
    result.steps = steps_;
    result.transfers = transfers_;
    return result;
  }

 private:
  // (from, to, channel, kind, tag) packed into one key: ranks and channels below 2^20 and 2^8.
  static uint64_t connKey(int from, int to, int channel, const plan::LaneSpec& spec) {
    uint64_t key =
        (uint64_t(uint32_t(from)) << 44) | (uint64_t(uint32_t(to)) << 24) | (uint64_t(uint32_t(channel) & 0xff) << 16);
    return key | (uint64_t(spec.kind) << 12) | (uint64_t(uint32_t(spec.tag)) & 0xfff);
  }

  int fifoFor(int from, int to, int channel, const plan::LaneSpec& spec) {
    uint64_t key = connKey(from, to, channel, spec);
    auto [it, fresh] = fifoIndex_.try_emplace(key, int(fifos_.size()));
    if (fresh) {
      fifos_.emplace_back();
      fifos_.back().latencyUs = fabric_.linkBetween(from, to).latencyUs;
    }
    return it->second;
  }

  // Lanes of one rank and channel that share a connection become one queue, in plan order. (A
  // lane that shares connections with two earlier queues joins the later one; no plan does that.)
  void addRank(int rank, int channel, plan::Coll coll, size_t bytes) {
    const plan::RankPlan& plan = plans_[size_t(rank)];
    std::map<std::tuple<int, int, int, int>, int> queueOfConn;  // (peer, dir, kind, tag) -> queue
    for (const plan::LaneSpec& spec : plan.lanes) {
      bool whole = false;
      if (!plan::laneRunsOn(spec, channel, pipe_.nchannels, fabric_.nranks, &whole)) continue;
      LaneRun lane;
      lane.spec = &spec;
      lane.rank = rank;
      size_t perTile =
          spec.layout == plan::Layout::Split ? size_t(spec.tileChunks > 0 ? spec.tileChunks : fabric_.nranks) : 1;
      const size_t chunk = plan::joinedChunkBytes(pipe_.chunkBytes, plan::joinWidth(plan));
      if (chunk == 0)
        throw Error(ErrorCode::InvalidArgument, "sim: " + plan.algorithm + " joins more steps than a chunk of " +
                                                    std::to_string(pipe_.chunkBytes) + " bytes holds");
      // each channel its own range of the tiling rule; a spread lane takes the whole buffer
      const size_t range = whole ? laneBytes(coll, spec.layout, bytes, fabric_.nranks)
                                 : channelBytes(coll, spec.layout, bytes, fabric_.nranks, pipe_.nchannels, channel);
      lane.tiles = tiling::tilesOf(range, chunk, perTile);
      if (spec.steps.empty() || lane.tiles.count == 0) continue;
      int queue = -1;
      std::vector<std::tuple<int, int, int, int>> conns;
      for (int peer : spec.sendPeers) {
        lane.sendFifo.push_back(fifoFor(rank, peer, channel, spec));
        conns.emplace_back(peer, 0, int(spec.kind), spec.tag);
      }
      for (int peer : spec.recvPeers) {
        lane.recvFifo.push_back(fifoFor(peer, rank, channel, spec));
        conns.emplace_back(peer, 1, int(spec.kind), spec.tag);
      }
      if (spec.kind != plan::ConnKind::None)
        for (const auto& conn : conns)
          if (auto it = queueOfConn.find(conn); it != queueOfConn.end()) queue = it->second;
      if (queue < 0) {
        queue = int(queues_.size());
        queues_.emplace_back();
        queues_.back().worker = rank * pipe_.nchannels + channel;
      }
      for (const auto& conn : conns) queueOfConn.emplace(conn, queue);
      queues_[size_t(queue)].lanes.push_back(int(lanes_.size()));
      lanes_.push_back(std::move(lane));
    }
  }

  const plan::Step& currentStep(const Queue& q) const {
    const LaneRun& lane = lanes_[size_t(q.lanes[q.lane])];
    return lane.spec->steps[q.step];
  }

  // Queues the next step of `qi` if everything it needs is known; otherwise waits on a FIFO.
  void tryReady(int qi) {
    Queue& q = queues_[size_t(qi)];
    if (q.done()) return;
    const LaneRun& lane = lanes_[size_t(q.lanes[q.lane])];
    const plan::Step& step = currentStep(q);
    double t = q.lastFinish;
    if (opReceives(step.op)) {
      Fifo& f = fifos_[size_t(lane.recvFifo.at(step.recvConn))];
      size_t next = f.released.size();
      if (next >= f.arrivals.size()) {
        f.waitingReceiver = qi;
        return;
      }
      t = std::max(t, f.arrivals[next]);
    }
    if (opSends(step.op)) {
      Fifo& f = fifos_[size_t(lane.sendFifo.at(step.sendConn))];
      size_t sent = f.arrivals.size();
      if (sent >= size_t(pipe_.fifoSlots)) {
        size_t slot = sent - size_t(pipe_.fifoSlots);
        if (slot >= f.released.size()) {
          f.waitingSender = qi;
          return;
        }
        t = std::max(t, f.released[slot]);
      }
    }
    ready_.emplace(t, seq_++, qi);
  }

  double transfer(int from, int to, double bytes, double start) {
    bool local = fabric_.sameNode(from, to);
    const Link& link = local ? fabric_.local : fabric_.network;
    double cap = std::min(fabric_.channelGBps, link.gbps) * kBytesPerUsPerGBps;
    double end = start + bytes / cap;
    if (local) {
      end = std::max(end, localOut_[size_t(from)].reserve(start, bytes));
      end = std::max(end, localIn_[size_t(to)].reserve(start, bytes));
    } else {
      end = std::max(end, nicOut_[size_t(fabric_.nodeOf(from))].reserve(start, bytes));
      end = std::max(end, nicIn_[size_t(fabric_.nodeOf(to))].reserve(start, bytes));
    }
    transfers_++;
    return end;
  }

  void wake(int& waiting) {
    int qi = waiting;
    waiting = -1;
    if (qi >= 0) tryReady(qi);
  }

  void execute(int qi, double t0) {
    Queue& q = queues_[size_t(qi)];
    // The worker is still issuing another queue's step: this one waits for it (events stay in
    // time order, so ports are still reserved in start order).
    double& worker = workerFree_[size_t(q.worker)];
    if (worker > t0) {
      ready_.emplace(worker, seq_++, qi);
      return;
    }
    worker = t0 + fabric_.stepOverheadUs;
    const LaneRun& lane = lanes_[size_t(q.lanes[q.lane])];
    const plan::Step& step = currentStep(q);
    const size_t parts = plan::joinedRunLength(lane.spec->steps, q.step);
    double bytes = double(parts * lane.tiles.chunkOf(q.tile));
    double finish = t0 + fabric_.stepOverheadUs;
    if (step.op == Op::Copy || step.op == Op::Reduce) finish += bytes / (fabric_.copyGBps * kBytesPerUsPerGBps);
    if (opSends(step.op)) {
      int fi = lane.sendFifo.at(step.sendConn);
      finish = transfer(lane.rank, lane.spec->sendPeers.at(step.sendConn), bytes, finish);
      fifos_[size_t(fi)].arrivals.push_back(finish + fifos_[size_t(fi)].latencyUs);
      wake(fifos_[size_t(fi)].waitingReceiver);
    }
    if (opReceives(step.op)) {
      int fi = lane.recvFifo.at(step.recvConn);
      fifos_[size_t(fi)].released.push_back(finish + fifos_[size_t(fi)].latencyUs);
      wake(fifos_[size_t(fi)].waitingSender);
    }
    steps_++;
    q.lastFinish = finish;
    q.step += parts;
    if (q.step == lane.spec->steps.size()) {
      q.step = 0;
      if (++q.tile == lane.tiles.count) {
        q.tile = 0;
        q.lane++;
      }
    }
    tryReady(qi);
  }

  std::string describeStuck(int qi) const {
    const Queue& q = queues_[size_t(qi)];
    const LaneRun& lane = lanes_[size_t(q.lanes[q.lane])];
    const plan::Step& step = currentStep(q);
    return "rank " + std::to_string(lane.rank) + " (" + plans_[size_t(lane.rank)].algorithm + ") lane step " +
           std::to_string(q.step) + " (" + plan::opName(step.op) + ") of tile " + std::to_string(q.tile) + "/" +
           std::to_string(lane.tiles.count) + " never became ready";
  }

  const std::vector<plan::RankPlan>& plans_;
  const Fabric& fabric_;
  Pipeline pipe_;
  std::vector<Port> localOut_, localIn_, nicOut_, nicIn_;
  std::unordered_map<uint64_t, int> fifoIndex_;
  std::vector<Fifo> fifos_;
  std::vector<LaneRun> lanes_;
  std::vector<Queue> queues_;
  std::vector<double> workerFree_;  // per rank and channel: when its worker can issue a step
  using Event = std::tuple<double, uint64_t, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> ready_;
  uint64_t seq_ = 0;
  size_t steps_ = 0, transfers_ = 0;
};

}  // namespace

ExactResult timePlans(const std::vector<plan::RankPlan>& plans, plan::Coll coll, size_t bytes, const Fabric& fabric,
                      const Pipeline& pipeline) {
  if (pipeline.fifoSlots < 1 || pipeline.nchannels < 1 || pipeline.nchannels > 256 || pipeline.chunkBytes == 0)
    throw Error(ErrorCode::InvalidArgument, "sim: the pipeline needs a chunk size, FIFO slots and 1 to 256 channels");
  if (fabric.nranks >= (1 << 20))
    throw Error(ErrorCode::InvalidArgument, "sim: the exact simulator takes fewer than 2^20 ranks; use analyticUs()");
  for (const plan::RankPlan& p : plans)
    for (const plan::LaneSpec& lane : p.lanes)
      if (lane.tag < 0 || lane.tag >= 4096)
        throw Error(ErrorCode::InvalidArgument, "sim: lane tag " + std::to_string(lane.tag) + " outside 0..4095");
  const Fabric scaled = fabric.atChannels(pipeline.nchannels);
  ExactSim sim(plans, coll, bytes, scaled, pipeline);
  return sim.run();
}

}  // namespace tutti::sim
