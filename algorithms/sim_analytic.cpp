// The analytic cost model: an alpha-beta estimate per algorithm name, pipelined by chunks, in
// O(log nranks) work so that 100,000-rank sweeps take milliseconds.
//
// Notation: o = step overhead, a = link latency, x(c) = c / rate, the time to push a chunk of c
// bytes. A flow's rate is the least of the channel's executor rate, the link (one NIC), and its
// share of the port it crosses (a rank's local port, or the node's NIC pool) with the flows that
// cross it at the same time. Ring and direct follow the exact model's behaviour step for step
// (sim_exact.cpp); the others are the textbook forms of their algorithms, pipelined by chunks
// the way the ir.md plans run (documented per function). Ranks are assumed placed on nodes in
// order (rank r on node r / ranksPerNode): a partner at distance d < ranksPerNode is local.
#include <algorithm>
#include <cmath>

#include "algorithms/sim.h"
#include "algorithms/sim_geometry.h"

namespace tutti::sim {
namespace {

using plan::Coll;
using plan::Layout;

constexpr double kBytesPerUsPerGBps = 1e3;

int ceilLog2(long long n) {
  int d = 0;
  while ((1LL << d) < n) d++;
  return d;
}

int floorLog2(long long n) {
  int d = 0;
  while ((2LL << d) <= n) d++;
  return d;
}

struct Model {
  const Fabric& f;
  const Pipeline& p;
  size_t bytes;
  int n;
  int nch;
  double o;

  Coll coll;

  Model(const Fabric& fabric, const Pipeline& pipe, Coll c, size_t b)
      : f(fabric), p(pipe), bytes(b), n(fabric.nranks), nch(std::max(1, pipe.nchannels)), o(fabric.stepOverheadUs), coll(c) {}

  bool multiNode() const { return f.nodes > 1; }
  int perNode() const { return std::min(f.ranksPerNode, n); }

  // Rate in bytes/us of one flow on a link class, with `sharers` flows on its port.
  double rate(bool local, double sharers) const {
    double r = std::min(f.channelGBps, local ? f.local.gbps : f.network.gbps);
    double port = local ? f.local.gbps : f.network.gbps * f.nicsPerNode;
    return std::min(r, port / std::max(1.0, sharers)) * kBytesPerUsPerGBps;
  }
  double latency(bool local) const { return local ? f.local.latencyUs : f.network.latencyUs; }
  double copy(double c) const { return c / (f.copyGBps * kBytesPerUsPerGBps); }
  bool localAt(long long distance) const { return !multiNode() || distance < perNode(); }

  size_t range(Layout layout) const { return channelRange(coll, layout, bytes, n, nch); }

  // Sums fn(chunk) over tiles: all full tiles cost the same.
  template <class Fn>
  double overTiles(const Tiles& t, Fn fn) const {
    if (t.count == 0) return 0;
    return double(t.count - 1) * fn(double(t.chunk)) + fn(double(t.lastChunk));
  }

  // Uncontended rate of one flow (channel and link caps) and a port's capacity, bytes/us.
  double capRate(bool local) const {
    return std::min(f.channelGBps, local ? f.local.gbps : f.network.gbps) * kBytesPerUsPerGBps;
  }
  double portRate(bool local) const {
    return (local ? f.local.gbps : f.network.gbps * f.nicsPerNode) * kBytesPerUsPerGBps;
  }
  double hop(double c, bool local) const { return o + c / capRate(local) + latency(local); }

  // Channels are flows of their own: when their steps overlap on a port they share it, but a
  // channel's latency and overhead leave the port to the others. So a step costs its
  // uncontended hop, unless the port cannot carry every channel's chunk in that time.
  double portBound(double c, bool local, double flows) const { return flows * c / portRate(local); }

  // A lockstep ring: step k of a rank waits for the chunk its predecessor sent in step k - 1.
  // On one node every hop costs the same. Across nodes the ring has one inter-node hop per
  // node; over many steps the pace is the average hop, and the slowest path adds the excess of
  // the worst window of the remaining (steps mod size) hops (the max-plus form of the ring).
  struct RingShape {
    int size;
    int sends;         // chunk sends per rank per tile
    bool spansNodes;
    double nicFlows;   // flows on a node's NIC pool at once
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
    double steps = overTiles(t, [&](double c) { return double(r.sends) * ringStep(c, r, &localHop, &netHop) + o + extra(c); });
    double c = double(t.chunk);
    double portTime = overTiles(t, [&](double ch) { return double(r.sends) * ports(ch); }) + extra(c) + 2 * o +
                      latency(!r.spansNodes);
    double total = std::max(steps, portTime);
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

  // A single rank's local copy of the whole operation (any algorithm at one rank).
  double single(Layout layout) const {
    Tiles t = tilesOf(range(layout), p.chunkBytes, 1);
    return overTiles(t, [&](double c) { return o + copy(c); });
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

  // Many concurrent streams of chunks out of (or into) each rank: the slowest of the
  // per-stream pace (with its FIFO), each port's total bytes, then the last chunk's latency.
  struct Stream {
    Tiles tiles;
    double localPortBytes = 0;  // bytes through the busiest rank's local port (per channel)
    double nicPoolBytes = 0;    // bytes through the busiest node's NIC pool (per channel)
    bool anyNetwork = false;
  };
  double stream(const Stream& s) const {
    if (s.tiles.count == 0) return 0;
    bool local = !s.anyNetwork;
    double push = o + double(s.tiles.chunk) / capRate(local);
    double lane = overTiles(s.tiles, [&](double c) { return o + c / capRate(local); }) - o;
    if (s.tiles.count > size_t(p.fifoSlots)) {
      double roundTrip = push + o + 2 * latency(local);
      lane = std::max(lane, double((s.tiles.count - 1) / size_t(p.fifoSlots)) * roundTrip + push - o);
    }
    double localPort = s.localPortBytes * nch / portRate(true);
    double nicPool = s.nicPoolBytes * nch / portRate(false);
    return o + std::max({lane, localPort, nicPool}) + latency(local) + o;
  }

  // One exchange round of `roundBytes` per rank with a partner at `distance`, all ranks at once.
  double round(double roundBytes, long long distance) const {
    bool local = localAt(distance);
    Tiles t = tilesOf(size_t(roundBytes), p.chunkBytes, 1);
    double sharers = local ? nch : double(perNode()) * nch;
    double r = rate(local, sharers);
    return overTiles(t, [&](double c) { return o + c / r; }) + latency(local) + o;
  }

  // ---- the algorithms ----

  std::optional<double> ringAlgo() const {
    RingShape shape{n, n - 1, multiNode(), double(nch)};
    switch (coll) {
      case Coll::AllReduce: {
        Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(n));
        shape.sends = 2 * (n - 1);
        return ring(t, shape, [](double) { return 0.0; });
      }
      case Coll::AllGather: {
        Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
        return ring(t, shape, [&](double c) { return o + copy(c); });
      }
      case Coll::ReduceScatter: {
        Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
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

  // Direct: one lane per peer and direction, all concurrent.
  std::optional<double> directAlgo() const {
    Stream s;
    long long g = perNode();
    long long remote = multiNode() ? n - g : 0;
    long long localPeers = std::min<long long>(g, n) - 1;
    s.anyNetwork = remote > 0;
    switch (coll) {
      case Coll::AlltoAll:
      case Coll::AllGather:
      case Coll::Gather:
      case Coll::Scatter: {
        s.tiles = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
        double block = double(range(Layout::Blocks));
        bool rooted = coll == Coll::Gather || coll == Coll::Scatter;
        s.localPortBytes = double(localPeers) * block;
        s.nicPoolBytes = double(remote) * block * (rooted ? 1.0 : double(g));
        double copyLane = overTiles(s.tiles, [&](double c) { return o + copy(c); });
        return std::max(stream(s), copyLane);
      }
      case Coll::Send:
      case Coll::Recv: {
        s.tiles = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
        s.anyNetwork = multiNode();  // the peer is unknown: on another node if there are several
        (s.anyNetwork ? s.nicPoolBytes : s.localPortBytes) = double(range(Layout::Blocks));
        return stream(s);
      }
      default: return std::nullopt;
    }
  }

  // Double binary tree all-reduce: each tree carries half the data, up (reduce) and down
  // (broadcast) as two pipelined lanes; an inner rank's down lane sends every chunk twice.
  std::optional<double> treeAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(ceilDiv(range(Layout::Whole), 2), p.chunkBytes, 1);
    int depth = ceilLog2(n);
    auto latencyPath = [&](double c) {
      double sum = 0;
      for (int level = 0; level < depth; level++) {
        bool local = localAt(1LL << level);
        sum += o + c / rate(local, 2.0 * nch * (local ? 1 : perNode())) + latency(local);
      }
      return 2 * sum;
    };
    bool worstLocal = localAt(1LL << std::max(0, depth - 1));
    auto period = [&](double c) { return 2 * (o + c / rate(worstLocal, 2.0 * nch * (worstLocal ? 1 : perNode()))); };
    if (t.count == 0) return 0.0;
    return latencyPath(double(t.lastChunk)) + double(t.count - 1) * period(double(t.chunk)) + o;
  }

  // Recursive doubling: log2(p) rounds exchanging the whole vector (p = largest power of two
  // <= n); the ranks above p fold in before and out after (two more rounds).
  std::optional<double> recDoublingAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    double S = double(range(Layout::Whole));
    int k = floorLog2(n);
    double time = 0;
    for (int i = 0; i < k; i++) time += round(S, 1LL << i);
    return time + foldRounds(S);
  }

  // The ranks above the largest power of two fold their data in before and take it back after.
  double foldRounds(double S) const {
    long long pw = 1LL << floorLog2(n);
    return pw == n ? 0 : 2 * round(S, pw);
  }

  // Rabenseifner: recursive halving reduce-scatter then recursive doubling all-gather.
  std::optional<double> rabenseifnerAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    double S = double(range(Layout::Whole));
    int k = floorLog2(n);
    long long pw = 1LL << k;
    double time = 0;
    for (int i = 0; i < k; i++) time += 2 * round(S / double(2LL << i), pw >> (i + 1));
    return time + foldRounds(S);
  }

  // Hierarchical: ring reduce-scatter inside each node, ring all-reduce of 1/G of the data
  // across nodes (G rings at once sharing the NICs), ring all-gather inside the node.
  std::optional<double> hierarchicalAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    int g = perNode();
    Tiles intra = tilesOf(ceilDiv(range(Layout::Whole), size_t(g)), p.chunkBytes, 1);
    auto none = [](double) { return 0.0; };
    double time = 0;
    if (g > 1) {
      RingShape shape{g, g - 1, false, double(nch)};
      time += ring(intra, shape, none);
      time += ring(intra, shape, [&](double c) { return o + copy(c); });
    }
    if (multiNode()) {
      Tiles inter = tilesOf(ceilDiv(range(Layout::Whole), size_t(g)), p.chunkBytes, size_t(f.nodes));
      auto netStep = [&](double c) { return o + c / rate(false, double(g) * nch) + latency(false); };
      time += overTiles(inter, [&](double c) { return 2.0 * (f.nodes - 1) * netStep(c) + o; });
    }
    return time;
  }

  // Bruck: ceil(log2 n) rounds; all-to-all moves half the buffer each round and rotates it
  // locally twice; all-gather doubles what it forwards each round.
  std::optional<double> bruckAlgo() const {
    int k = ceilLog2(n);
    double block = double(range(Layout::Blocks));
    double time = 0;
    if (coll == Coll::AlltoAll) {
      for (int i = 0; i < k; i++) time += round(block * double(n) / 2, 1LL << i);
      return time + 2 * copy(block * double(n));
    }
    if (coll == Coll::AllGather) {
      for (int i = 0; i < k; i++) time += round(block * double(std::min<long long>(1LL << i, n - (1LL << i))), 1LL << i);
      return time + copy(block * double(n));
    }
    return std::nullopt;
  }

  // PAT: the logarithmic all-gather / reduce-scatter, Bruck's rounds without the rotation.
  std::optional<double> patAlgo() const {
    if (coll != Coll::AllGather && coll != Coll::ReduceScatter) return std::nullopt;
    int k = ceilLog2(n);
    double block = double(range(Layout::Blocks));
    double time = 0;
    for (int i = 0; i < k; i++) time += round(block * double(std::min<long long>(1LL << i, n - (1LL << i))), 1LL << i);
    return time;
  }

  // Pairwise all-to-all: n - 1 rounds, one block with the partner at distance i in round i.
  std::optional<double> pairwiseAlgo() const {
    if (coll != Coll::AlltoAll) return std::nullopt;
    double block = double(range(Layout::Blocks));
    long long localRounds = std::min<long long>(perNode(), n) - 1;
    long long netRounds = (n - 1) - localRounds;
    double time = double(localRounds) * round(block, 1) + double(netRounds) * round(block, perNode());
    return time + copy(block);
  }

  // Binomial tree broadcast / reduce: ceil(log2 n) rounds of the whole buffer.
  std::optional<double> binomialAlgo() const {
    if (coll != Coll::Broadcast && coll != Coll::Reduce) return std::nullopt;
    double S = double(range(Layout::Whole));
    int k = ceilLog2(n);
    double time = 0;
    for (int i = 0; i < k; i++) time += round(S, 1LL << i);
    return time;
  }

  // Chain all-reduce: a pipelined reduce along 0 -> ... -> n-1, then the result passed back.
  std::optional<double> chainAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    return 2 * chain(t, n - f.nodes, f.nodes - 1, 0);
  }
};

}  // namespace

const std::vector<std::string>& modelledAlgorithms() {
  static const std::vector<std::string> names = {"ring",         "direct", "tree",     "recdoubling", "rabenseifner", "hierarchical",
                                                 "bruck",        "pairwise", "pat",    "binomial",    "chain"};
  return names;
}

std::optional<double> analyticUs(const std::string& algorithm, Coll coll, size_t bytes, const Fabric& fabric,
                                 const Pipeline& pipeline) {
  Model m(fabric, pipeline, coll, bytes);
  if (fabric.nranks <= 1) {
    if (std::find(modelledAlgorithms().begin(), modelledAlgorithms().end(), algorithm) == modelledAlgorithms().end())
      return std::nullopt;
    bool blocks = coll == Coll::AllGather || coll == Coll::ReduceScatter || coll == Coll::AlltoAll || coll == Coll::Gather ||
                  coll == Coll::Scatter;
    return m.single(blocks ? Layout::Blocks : Layout::Whole);
  }
  if (algorithm == "ring") return m.ringAlgo();
  if (algorithm == "direct") return m.directAlgo();
  if (algorithm == "tree") return m.treeAlgo();
  if (algorithm == "recdoubling") return m.recDoublingAlgo();
  if (algorithm == "rabenseifner") return m.rabenseifnerAlgo();
  if (algorithm == "hierarchical") return m.hierarchicalAlgo();
  if (algorithm == "bruck") return m.bruckAlgo();
  if (algorithm == "pairwise") return m.pairwiseAlgo();
  if (algorithm == "pat") return m.patAlgo();
  if (algorithm == "binomial") return m.binomialAlgo();
  if (algorithm == "chain") return m.chainAlgo();
  return std::nullopt;
}

double busBandwidthFactor(Coll coll, int nranks) {
  double n = double(nranks);
  switch (coll) {
    case Coll::AllReduce: return 2 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter: return (n - 1) / n;
    default: return 1;
  }
}

}  // namespace tutti::sim
