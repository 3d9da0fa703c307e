// The ring algorithm: its plans and its analytic cost (registry entry "ring").
//
// Ring algorithms: all-reduce, all-gather, reduce-scatter, and chains for broadcast and reduce.
//
// Cost with m bytes (all-gather, reduce-scatter: m bytes per block) cut into tiles of n chunks of
// c bytes: all-reduce 2(n-1) steps per tile, 2(n-1)(alpha) + 2(n-1)/n m beta (+ (n-1)/n m gamma)
// once the pipeline is full; all-gather and reduce-scatter (n-1) alpha + (n-1) m beta; broadcast
// and reduce are chains, (n-1)(alpha + c beta) + (m/c - 1)(alpha + c beta): bandwidth-optimal,
// latency linear in n.
//
// Every generator walks a RingOrder: "next" is the rank after this one in the order, and chunk
// and block indices that depend on the rank's place use its position in the order (a Split
// chunk is only a piece of the tile, so any agreed numbering works; a block belongs to a rank).
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"
#include "algorithms/ring_order.h"

namespace tutti::plan {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

BufRef in(int chunk = -1) { return BufRef{Buf::In, chunk}; }
BufRef out(int chunk = -1) { return BufRef{Buf::Out, chunk}; }
BufRef none() { return BufRef{}; }

LaneSpec ringLane(int rank, const RingOrder& ring, Layout layout) {
  LaneSpec lane;
  lane.kind = ConnKind::Ring;
  lane.sendPeers = {ring.step(rank, 1)};
  lane.recvPeers = {ring.step(rank, -1)};
  lane.layout = layout;
  return lane;
}

RankPlan single(const char* algorithm, Layout layout, Step step) {
  LaneSpec lane;
  lane.layout = layout;
  lane.steps.push_back(step);
  return RankPlan{algorithm, {lane}};
}

}  // namespace

// Chunk k of every tile goes round the ring twice: the first lap reduces it (ending at position
// k - 1), the second carries the finished sum to everyone.
RankPlan ringAllReduce(int r, const RingOrder& ring) {
  const int n = ring.size(), p = ring.positionOf(r);
  if (n == 1) return single("ring", Layout::Split, {Op::Copy, kPre | kPost, in(0), out(0)});
  LaneSpec lane = ringLane(r, ring, Layout::Split);
  auto& s = lane.steps;
  s.push_back({Op::Send, kPre, in(p), none()});
  for (int k = 1; k < n - 1; k++) s.push_back({Op::RecvReduceSend, kPre, in(mod(p - k, n)), none()});
  int done = mod(p + 1, n);
  // The finished chunks are final where they are written: the second lap may send them directly
  // (plan.h, "Direct sends"). The first lap's sends are partial sums, or an input that in place
  // is overwritten later: copied.
  s.push_back({Op::RecvReduceCopySend, kPre | kPost | kDirect, in(done), out(done)});
  for (int j = 1; j < n - 1; j++) s.push_back({Op::RecvSend, kDirect, none(), out(mod(p + 1 - j, n))});
  s.push_back({Op::Recv, 0, none(), out(mod(p + 2 - n, n))});
  return RankPlan{"ring", {lane}};
}

RankPlan ringAllGather(int r, const RingOrder& ring) {
  const int n = ring.size();
  LaneSpec lane = ringLane(r, ring, Layout::Blocks);
  auto& s = lane.steps;
  s.push_back({Op::Copy, 0, in(-1), out(r)});  // skipped by the executor when in place
  if (n == 1) {
    lane.kind = ConnKind::None;
    lane.sendPeers.clear();
    lane.recvPeers.clear();
    return RankPlan{"ring", {lane}};
  }
  // Every block is written once: each send may be direct.
  s.push_back({Op::Send, kDirect, in(-1), none()});
  for (int j = 1; j < n - 1; j++) s.push_back({Op::RecvSend, kDirect, none(), out(ring.step(r, -j))});
  s.push_back({Op::Recv, 0, none(), out(ring.step(r, 1))});
  return RankPlan{"ring", {lane}};
}

// The partial sum of rank b's block starts at the rank after b and finishes at b.
RankPlan ringReduceScatter(int r, const RingOrder& ring) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Blocks, {Op::Copy, kPre | kPost, in(0), out(-1)});
  LaneSpec lane = ringLane(r, ring, Layout::Blocks);
  auto& s = lane.steps;
  s.push_back({Op::Send, kPre, in(ring.step(r, -1)), none()});
  for (int k = 1; k < n - 1; k++) s.push_back({Op::RecvReduceSend, kPre, in(ring.step(r, -1 - k)), none()});
  s.push_back({Op::RecvReduceCopy, kPre | kPost, in(r), out(-1)});
  return RankPlan{"ring", {lane}};
}

RankPlan ringBroadcast(int r, const RingOrder& ring, int root) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Whole, {Op::Copy, 0, in(), out()});
  LaneSpec lane = ringLane(r, ring, Layout::Whole);
  int position = mod(ring.positionOf(r) - ring.positionOf(root), n);
  if (position == 0) {
    lane.recvPeers.clear();
    lane.steps.push_back({Op::Copy, 0, in(), out()});  // skipped when in place
    lane.steps.push_back({Op::Send, kDirect, in(), none()});
  } else if (position < n - 1) {
    lane.steps.push_back({Op::RecvSend, kDirect, none(), out()});
  } else {
    lane.sendPeers.clear();
    lane.steps.push_back({Op::Recv, 0, none(), out()});
  }
  return RankPlan{"ring", {lane}};
}

RankPlan ringReduce(int r, const RingOrder& ring, int root) {
  const int n = ring.size();
  if (n == 1) return single("ring", Layout::Whole, {Op::Copy, kPre | kPost, in(), out()});
  LaneSpec lane = ringLane(r, ring, Layout::Whole);
  int position = mod(ring.positionOf(r) - ring.positionOf(root) - 1, n);
  if (position == 0) {
    lane.recvPeers.clear();
    lane.steps.push_back({Op::Send, kPre, in(), none()});
  } else if (position < n - 1) {
    lane.steps.push_back({Op::RecvReduceSend, kPre, in(), none()});
  } else {
    lane.sendPeers.clear();
    lane.steps.push_back({Op::RecvReduceCopy, kPre | kPost, in(), out()});
  }
  return RankPlan{"ring", {lane}};
}

RankPlan ringAllReduce(int r, int n) { return ringAllReduce(r, RingOrder(n, {})); }
RankPlan ringAllGather(int r, int n) { return ringAllGather(r, RingOrder(n, {})); }
RankPlan ringReduceScatter(int r, int n) { return ringReduceScatter(r, RingOrder(n, {})); }
RankPlan ringBroadcast(int r, int n, int root) { return ringBroadcast(r, RingOrder(n, {}), root); }
RankPlan ringReduce(int r, int n, int root) { return ringReduce(r, RingOrder(n, {}), root); }

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

// With more worker threads than cores, a ring of one tile runs in lockstep from the operation's
// start: each step waits for its predecessor's previous step, and that thread, holding a share s
// of a core, is often the one descheduled, while a pair (recursive doubling, Rabenseifner) waits
// only for its partner. On the 2-core test VM, 4 ranks, one-tile rings (256 KiB-2 MiB) ran
// 1.10-1.25x Rabenseifner's time over the same number of chunk transfers (median 1.18; perf
// stat: the extra CPU is waiting), while with two tiles and more the ring was level or ahead
// (the pipeline's FIFO slots absorb it). So a one-tile ring's transfers are charged
// kLockstepWait x (1 - s) more (1.18x at s = 1/2). A calibrated form (timing both patterns at
// init) varied 1.00-1.58 between runs of the same host in a few milliseconds: not stable enough
// to choose by. Reducing rings only: reduce-scatter's ring ran 1.08-1.30x PAT's at 256 KiB-4 MiB,
// while all-gather's (copies, lighter steps) was level with PAT's or ahead at 1-2 MiB.
constexpr double kLockstepWait = 0.35;

struct RingModel : sim::CostModel {
  // A lockstep ring: step k of a rank waits for the chunk its predecessor sent in step k - 1.
  // On one node every hop costs the same. Across nodes the ring has one inter-node hop per
  // node; over many steps the pace is the average hop, and the slowest path adds the excess of
  // the worst window of the remaining (steps mod size) hops (the max-plus form of the ring).
  struct RingShape {
    int size;
    int sends;  // chunk sends per rank per tile
    bool spansNodes;
    double nicFlows;       // flows on a node's NIC pool at once
    bool reduces = false;  // steps reduce (all-reduce, reduce-scatter): see kLockstepWait
  };
  double ringStep(double c, const RingShape& r, double* localHop, double* netHop) const {
    *localHop = hop(c, true);
    *netHop = hop(c, false);
    double bound = credit(*localHop, true);
    if (!r.spansNodes) return std::max(*localHop, bound);
    double nodesInRing = double(f.nodes);
    double mean = ((double(r.size) - nodesInRing) * *localHop + nodesInRing * *netHop) / double(r.size);
    // the rank that sends across nodes cannot go faster than it pushes
    bound = std::max({bound, credit(*netHop, false), o + c / capRate(false)});
    return std::max(mean, bound);
  }

  // A sender runs at most fifoSlots chunks ahead of its receiver: a slot comes back a hop, the
  // receiver's step and a latency after it was filled.
  double credit(double hopTime, bool local) const { return (hopTime + o + latency(local)) / p.fifoSlots; }

  // A tile costs its steps, or the time its ports need for every channel's chunks, whichever
  // is longer (local work such as the all-gather's copy overlaps other channels' transfers).
  template <class Extra>
  double ring(const Tiles& t, const RingShape& r, Extra extra) const {
    if (t.count == 0) return 0;
    double localHop = 0, netHop = 0;
    auto ports = [&](double c) {
      double b = portBound(c, true, nch);
      return r.spansNodes ? std::max(b, portBound(c, false, r.nicFlows)) : b;
    };
    double steps =
        overTiles(t, [&](double c) { return double(r.sends) * ringStep(c, r, &localHop, &netHop) + o + extra(c); });
    double c = double(t.chunk);
    double portTime = overTiles(t, [&](double ch) { return double(r.sends) * ports(ch); }) + extra(c) + 2 * o +
                      latency(!r.spansNodes);
    double total = std::max(steps, portTime);
    if (r.reduces && t.count == 1 && !r.spansNodes)
      total += kLockstepWait * (1 - f.threadShare(channels)) * double(r.sends) * c / capRate(true);
    double step = ringStep(c, r, &localHop, &netHop);
    bool hopBound = steps > portTime;
    if (hopBound) total += double(nch - 1) * c / portRate(true);  // channels leave the first port one after another
    double mean = r.spansNodes ? ((double(r.size) - f.nodes) * localHop + f.nodes * netHop) / double(r.size) : localHop;
    if (r.spansNodes && hopBound && step <= mean) {
      long long g = perNode();
      long long w = (static_cast<long long>(t.count) * r.sends) % r.size;
      long long k = std::min<long long>(f.nodes, (w + g - 1) / g);
      double worst = double(k) * netHop + double(w - k) * localHop;
      total += std::max(0.0, worst - double(w) * step);
    }
    return total;
  }

  // The time a sender waits, per chunk, for FIFO slots: a slot comes back after the chunk's
  // push, its latency, the receiver's step and the release's latency; `slots` chunks share it.
  double slotPace(double push, bool local) const { return (push + o + 2 * latency(local)) / p.fifoSlots; }

  // A chain (pipelined store and forward) through `localHops` node-local and `netHops`
  // inter-node hops; `headExtra` is the head's own work per tile (broadcast's copy).
  double chain(const Tiles& t, long long localHops, long long netHops, double headExtra) const {
    if (t.count == 0) return 0;
    bool worstLocal = netHops == 0;
    bool firstLocal = localHops > 0;
    auto period = [&](double c) {
      double push = o + c / capRate(worstLocal);
      double pace = std::max({push, headExtra + o + c / capRate(firstLocal), portBound(c, true, nch)});
      if (netHops > 0) pace = std::max(pace, portBound(c, false, nch));
      if (t.count > size_t(p.fifoSlots)) pace = std::max(pace, slotPace(push, worstLocal));
      return pace;
    };
    double c = double(t.lastChunk);
    double fill = headExtra + double(localHops) * hop(c, true) + double(netHops) * hop(c, false) + o +
                  double(nch - 1) * c / portRate(worstLocal);
    return double(t.count - 1) * period(double(t.chunk)) + fill;
  }

  std::optional<double> estimate() const {
    RingShape shape{n, n - 1, multiNode(), double(nch)};
    switch (coll) {
      case Coll::AllReduce: {
        Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(n));
        shape.sends = 2 * (n - 1);
        shape.reduces = true;
        return ring(t, shape, [](double) { return 0.0; });
      }
      case Coll::AllGather: {
        Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
        return ring(t, shape, [&](double c) { return o + copy(c); });
      }
      case Coll::ReduceScatter: {
        Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
        shape.reduces = true;
        return ring(t, shape, [](double) { return 0.0; });
      }
      case Coll::Broadcast: {
        Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
        return chain(t, n - f.nodes, f.nodes - 1, o + copy(double(t.chunk)));
      }
      case Coll::Reduce: {
        Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
        // root 0: the chain 1 -> ... -> n-1 -> 0 crosses every node boundary and wraps round
        long long net = f.nodes > 1 ? std::min<long long>(n - 1, f.nodes) : 0;
        return chain(t, n - 1 - net, net, 0);
      }
      default: return std::nullopt;
    }
  }
};

}  // namespace

std::optional<double> ringCost(const sim::CostModel& model) { return RingModel{model}.estimate(); }

}  // namespace tutti::plan
