// The analytic cost model: an alpha-beta estimate per algorithm name, pipelined by chunks, in
// O(log nranks) work (the tree across nodes: O(nodes); Bruck and PAT across nodes: O(g log n),
// or O(n log n) to 4096 ranks) so that 100,000-rank sweeps take milliseconds.
//
// Notation: o = step overhead, a = link latency, x(c) = c / rate, the time to push a chunk of c
// bytes. A flow's rate is the least of the channel's executor rate, the link (one NIC), and its
// share of the port it crosses (a rank's local port, or the node's NIC pool) with the flows that
// cross it at the same time. Ring and direct follow the exact model's behaviour step for step
// (sim_exact.cpp); the others follow their plans (algorithms/<name>.cpp): a tile costs the
// dependency chain of its steps, bounded below by what its ports must carry (documented per
// function). Ranks are placed on nodes as the fabric says; the closed forms probe a few ranks'
// nodes (Fabric::sameNode) rather than walk them all.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/builtin.h"
#include "algorithms/sim.h"
#include "algorithms/tiling.h"
#include "topology/channels.h"

namespace tutti::sim {
namespace {

using plan::Coll;
using plan::Layout;
using tiling::Tiles;
using tiling::tilesOf;

constexpr double kBytesPerUsPerGBps = 1e3;

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
  int channels;  // the operation's channels, as the launch cuts it (and their threads)
  int nch;       // those that move bytes (busyChannels): the flows that share ports
  double o;

  Coll coll;

  Model(const Fabric& fabric, const Pipeline& pipe, Coll c, size_t b)
      : f(fabric),
        p(pipe),
        bytes(b),
        n(fabric.nranks),
        channels(std::max(1, pipe.nchannels)),
        nch(busyChannels(laneBytes(c, Layout::Blocks, b, fabric.nranks), channels)),
        o(fabric.stepOverheadUs),
        coll(c) {}

  bool multiNode() const { return f.nodes > 1; }
  int perNode() const { return std::min(f.ranksPerNode, n); }

  double latency(bool local) const { return local ? f.local.latencyUs : f.network.latencyUs; }
  double copy(double c) const { return c / (f.copyGBps * kBytesPerUsPerGBps); }

  size_t range(Layout layout) const { return channelBytes(coll, layout, bytes, n, channels); }

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
    double steps = overTiles(t, [&](double c) { return double(r.sends) * ringStep(c, r, &localHop, &netHop) + o + extra(c); });
    double c = double(t.chunk);
    double portTime = overTiles(t, [&](double ch) { return double(r.sends) * ports(ch); }) + extra(c) + 2 * o +
                      latency(!r.spansNodes);
    double total = std::max(steps, portTime);
    if (r.reduces && t.count == 1 && !r.spansNodes) total += kLockstepWait * (1 - f.threadShare(channels)) * double(r.sends) * c / capRate(true);
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
    double localPort = s.localPortBytes * nch / portRate(true);
    double nicPool = s.nicPoolBytes * nch / portRate(false);
    return o + std::max({streamLane(s), localPort, nicPool}) + latency(local) + o;
  }
  // One stream's own pace over its tiles, with its FIFO, from its first step's overhead on.
  double streamLane(const Stream& s) const {
    bool local = !s.anyNetwork;
    double push = o + double(s.tiles.chunk) / capRate(local);
    double lane = overTiles(s.tiles, [&](double c) { return o + c / capRate(local); }) - o;
    if (s.tiles.count > size_t(p.fifoSlots)) {
      double roundTrip = push + o + 2 * latency(local);
      lane = std::max(lane, double((s.tiles.count - 1) / size_t(p.fifoSlots)) * roundTrip + push - o);
    }
    return lane;
  }

  // ---- the algorithms ----

  std::optional<double> ringAlgo() const {
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

  // A direct exchange's lanes (one per peer and way, and the copy of the rank's own block) share
  // the rank's worker, which issues one step at a time (sim_exact.cpp): the busiest rank takes a
  // step overhead per lane and tile, and its last lane starts only once the worker has issued the
  // others' first steps. All-to-all and scatter issue the copy and their sends first (a receive
  // waits for data), so the last send's chunk still has its transfer, latency and receive to go;
  // a gather's root receives its node's peers while the network's chunks are on their way, then
  // those one after another.
  double directWorker(const Stream& s, Coll c, bool spread) const {
    const Tiles& t = s.tiles;
    // the peers one worker serves: all, or its channel's share of them
    auto served = [&](long long peers) { return spread ? double((peers + nch - 1) / nch) : double(peers); };
    double tiles = double(t.count), lanes = 1 + served(n - 1);  // the copy and the peers
    auto tail = [&](bool local) { return double(t.lastChunk) / capRate(local) + latency(local); };
    double lastLaneStarts = (lanes - 1) * o + o + streamLane(s) + latency(!s.anyNetwork) + o;
    switch (c) {
      case Coll::Gather: {
        long long remote = multiNode() ? n - perNode() : 0;
        double localPeers = served(n - 1 - remote), remotePeers = served(remote);
        // The ports serve transfers in start order, every channel's at once: the last channel's
        // chunks begin to arrive once the others' have crossed.
        double before = double(nch - 1) / double(nch), c1 = double(t.count > 1 ? t.chunk : t.lastChunk);
        auto firstArrival = [&](bool local, double portBytes) {
          return o + std::max(c1 / capRate(local), (before * portBytes * nch + c1) / portRate(local)) + latency(local);
        };
        double done = lanes * tiles * o;
        if (localPeers > 0) done = std::max(done, firstArrival(true, s.localPortBytes) + localPeers * tiles * o);
        if (remote > 0) done = std::max(done, firstArrival(false, s.nicPoolBytes) + remotePeers * tiles * o);
        return done;
      }
      case Coll::Scatter: return std::max(lastLaneStarts, lanes * tiles * o + tail(!s.anyNetwork) + o);
      default: return std::max({lastLaneStarts, (2 * lanes - 1) * tiles * o, lanes * tiles * o + tail(!s.anyNetwork) + o});
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
        // Spread lanes (direct.cpp) move whole blocks, each on one channel; a channel's ports
        // then carry its share of the peers' blocks.
        bool spread = coll != Coll::AllGather && plan::spreadsOverChannels(n, channels);
        if (spread && nch != channels) {  // whole blocks: every channel moves some
          Model every = *this;
          every.nch = channels;
          return every.directAlgo();
        }
        size_t blockBytes = spread ? channelBytes(coll, Layout::Blocks, bytes, n, 1) : range(Layout::Blocks);
        double block = double(blockBytes) / (spread ? double(nch) : 1.0);
        s.tiles = tilesOf(blockBytes, p.chunkBytes, 1);
        bool rooted = coll == Coll::Gather || coll == Coll::Scatter;
        s.localPortBytes = double(localPeers) * block;
        s.nicPoolBytes = double(remote) * block * (rooted ? 1.0 : double(g));
        double copyLane = overTiles(s.tiles, [&](double c) { return o + copy(c); });
        return std::max({stream(s), copyLane, directWorker(s, coll, spread)});
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

  // ---- the logarithmic and serial algorithms ----
  //
  // Their plans are one lane per rank (tree: one per tree) whose steps wait for the partner's
  // chunk before the next step is issued, and whose next tile starts only after the tile's last
  // step: so a tile costs the dependency chain of its steps, and tiles add up. The forms below
  // follow each plan's step list (algorithms/<name>.cpp).

  // Whether ranks a and b (both < n) are on different nodes.
  bool crosses(long long a, long long b) const { return multiNode() && !f.sameNode(int(a), int(b)); }

  // A transfer of c bytes, `flows` of them (from different ranks) starting at once on one port:
  // they are served one after another, and a round waits for the last.
  double xfer(double c, bool local, double flows) const {
    return std::max(c / capRate(local), flows * c / portRate(local));
  }
  // A send/receive pair in rounds that every channel runs in lockstep: the channels' transfers
  // queue on the port whenever a transfer takes longer than the step's overheads.
  double lockstepPair(double c, bool local, double flows) const {
    return std::max(pairStep(c, local, flows), nch * flows * c / portRate(local));
  }
  // A send step then the receiver seeing it: o + x + a.
  double hopOf(double c, bool local, double flows) const { return o + xfer(c, local, flows) + latency(local); }
  // A send followed by the receive of the partner's chunk, on one lane: 2o + x + a.
  double pairStep(double c, bool local, double flows) const { return hopOf(c, local, flows) + o; }

  // Flows on a port in a round where every rank sends once: a rank's own local port, or the
  // node's NIC pool that `crossing` of its ranks use at once. Channels are left out: they drift
  // apart by a transfer at their first shared port and then rarely overlap while steps are
  // latency bound; portFloor() keeps a tile no shorter than its ports need for every channel.
  double flowsOf(bool local, double crossing) const { return local ? 1.0 : std::max(1.0, crossing); }

  // The time every channel's chunks of one tile need on the busiest rank's local port
  // (`localChunks` chunks) and the busiest node's NIC pool (`netChunks`).
  double portFloor(double c, double localChunks, double netChunks) const {
    return nch * c * std::max(localChunks / portRate(true), multiNode() ? netChunks / portRate(false) : 0.0);
  }

  // Sum over tiles of a per-tile cost when tiles run strictly one after the other.
  // perTile(c, first): the ranks and channels start the first tile together (a later channel
  // loses a transfer at each round's port); later tiles find them spread out.
  template <class Fn>
  double serialTiles(const Tiles& t, Fn perTile) const {
    if (t.count == 0) return 0;
    double first = perTile(double(t.chunkOf(0)), true);
    double rest = t.count > 1 ? double(t.count - 2) * perTile(double(t.chunk), false) + perTile(double(t.lastChunk), false) : 0;
    return first + rest;
  }

  // Channels start together and collide at their first port: each waits for the one before.
  double stagger(double c, bool local) const { return double(nch - 1) * c / portRate(local); }

  // Tiles and channels in flight collide at the node's NIC pool; a transfer that finds the pool
  // busy waits, on average, for half of what the pool carries per tile (`netChunks` chunks).
  double nicQueueing(double c, double netChunks) const {
    return multiNode() ? 0.5 * portFloor(c, 0, netChunks) : 0;
  }

  // `count` send/receive pairs in a row with `flows` ranks on the port: the first waits for
  // every rank's transfer; the others stream, each rank at its own pace, as far as the port's
  // bandwidth lets them.
  double pairs(double c, long long count, bool local, double flows) const {
    if (count <= 0) return 0;
    double later = std::max(pairStep(c, local, 1), nch * flows * c / portRate(local));
    return lockstepPair(c, local, flows) + double(count - 1) * later;
  }

  // The same when the ranks spread out over the tile's pairs: only the first waits for the
  // other ranks' transfers (for half of them, on average); the tile's port floor (portFloor)
  // covers the bandwidth.
  double streamPairs(double c, long long count, bool local, double flows) const {
    if (count <= 0) return 0;
    return pairStep(c, local, (flows + 1) / 2) + double(count - 1) * pairStep(c, local, 1);
  }

  // A tile's chunks through the busiest rank's local port and the busiest node's NIC pool.
  struct Load {
    double localChunks = 0;
    double netChunks = 0;
  };
  // Rounds of joined messages (Bruck, PAT; plan.h): in round i every rank sends one message of
  // rounds[i].second blocks to the rank `dir` x rounds[i].first on (dir = +1 or -1) and receives
  // one from the rank as far the other way. A rank's receive finishes once its own send has and
  // its partner's message has arrived, so a tile's critical path picks, round by round, the
  // partner or the rank itself, and which rounds it pays across nodes depends on where the ranks
  // sit in their nodes: the path is followed for every rank (to 4096 ranks), or for every place
  // in a node of perNode() ranks placed in order (beyond: exact for such fabrics, near for
  // others). A message across nodes shares the node's NIC pool with every channel's and, as the
  // ranks drift apart over the rounds, with half of the crossing ranks' on average; node-local
  // ones are charged no sharing (channels drift apart, as for the other pair algorithms).
  // Adds the tile's chunks to the port loads.
  double joinedRounds(double c, const std::vector<std::pair<long long, long long>>& rounds, int dir, Load& load) const {
    // (on one node every rank's path is the same: one state)
    const bool byRank = multiNode() && n <= kExactTreeRanks;
    const long long g = perNode(), states = !multiNode() ? 1 : byRank ? n : g;
    std::vector<double> t(static_cast<size_t>(states), 0.0), next(static_cast<size_t>(states), 0.0);
    for (auto [d, count] : rounds) {
      if (count <= 0) continue;
      double crossing = multiNode() ? double(std::min({d, n - d, g})) : 0;
      load.localChunks += double(count) * (1 - crossing / double(g));
      load.netChunks += double(count) * crossing;
      const double message = double(count) * c;
      const double local = o + xfer(message, true, 1), net = o + xfer(message, false, nch * (flowsOf(false, crossing) + 1) / 2);
      for (long long r = 0; r < states; r++) {
        long long from = 0, to = 0;
        bool fromCrosses = false, toCrosses = false;
        if (!multiNode()) {
          from = to = r;
        } else if (byRank) {
          from = ((r - dir * d) % n + n) % n;
          to = ((r + dir * d) % n + n) % n;
          fromCrosses = crosses(from, r);
          toCrosses = crosses(r, to);
        } else {
          // r is a place in a node; a partner d away is on another node unless it stays in this one
          long long e = d % g;
          from = ((r - dir * e) % g + g) % g;
          to = ((r + dir * e) % g + g) % g;
          fromCrosses = d >= g || (dir > 0 ? r < e : r + e >= g);
          toCrosses = d >= g || (dir > 0 ? r + e >= g : r < e);
        }
        double own = t[size_t(r)] + (toCrosses ? net : local);
        double arrival = t[size_t(from)] + (fromCrosses ? net + latency(false) : local + latency(true));
        next[size_t(r)] = std::max(own, arrival) + o;
      }
      t.swap(next);
    }
    return *std::max_element(t.begin(), t.end());
  }

  // The tiles of a plan whose widest joined run has `width` steps: its chunk is cut so that they
  // fit one slot (the exact model's rule).
  Tiles joinedTiles(Layout layout, size_t width) const {
    return tilesOf(range(layout), plan::joinedChunkBytes(p.chunkBytes, width), 1);
  }

  // Double binary tree all-reduce (tree.cpp): two lanes (one per tree, each kTreeChunks chunks
  // of a tile), each reducing later chunks up the tree while earlier ones come down, and
  // finishing a tile before the next: a tile costs its first chunk's way up plus the way down,
  // then each further chunk at the pace of the busiest port or of the round trip that a rank's
  // lookahead shares out, unless the busiest rank's own steps take longer.
  // On one node the trees are in-order over positions [lo, hi) with the middle as root (tree 1's
  // position p is rank p + 1): every edge is local, so a subtree's times depend only on its size
  // and the recursion meets O(log n) distinct subtrees. Across nodes they are node trees
  // (registry.cpp, topo::treeOverChains): a binary tree of the nodes' heads, each head also
  // holding its own node's other ranks as an in-order tree; see nodeTree().
  static constexpr long long kExactTreeRanks = 4096;
  struct TreeTimes {
    double up = 0;    // from the tile's start until the subtree's root has its chunk's send
                      // issued (its parent adds the transfer and the latency)
    double down = 0;  // from the subtree's root holding the result until its last leaf has it
    double pace = 0;  // the busiest rank of the subtree: its steps' time per chunk
    int depth = 0;    // of its deepest leaf below its root
  };
  struct TreeKid {
    TreeTimes times;
    bool local;  // the edge to it stays inside a node
  };

  // A rank's times from its children's, served in the given order (tree.cpp): up, it receives
  // and reduces each child's chunk in turn, then sends (link `upLocal`) to its parent; down, it
  // receives from the parent and sends to each child in turn, the first in the same step. The
  // root's first send down is its last receive's step (RecvReduceCopySend).
  TreeTimes rankTimes(const std::vector<TreeKid>& kids, bool root, bool upLocal, double c) const {
    // both trees and every channel run the same steps at once: a transfer shares its port
    auto x = [&](bool local) { return xfer(c, local, (1.0 + nch) / 2); };
    TreeTimes result;
    // per chunk: a leaf sends up and receives; an inner rank takes a step per child each way;
    // the root, one per child and one more per child after the first. Transfers: up, and one
    // per child.
    double kidSends = 0;
    for (const TreeKid& k : kids) kidSends += x(k.local);
    double children = double(kids.size());
    double steps = root ? 2 * children - 1 : 2 * std::max(1.0, children);
    result.pace = steps * o + kidSends + (root ? 0 : x(upLocal));
    for (const TreeKid& k : kids) {
      result.pace = std::max(result.pace, k.times.pace);
      result.depth = std::max(result.depth, k.times.depth + 1);
    }
    if (kids.empty()) {
      result.up = o;
      result.down = o;
      return result;
    }
    double t = 0;  // receive from each child in turn
    for (const TreeKid& k : kids) t = std::max(t, k.times.up + x(k.local) + latency(k.local)) + o;
    result.up = t;
    double sent = root ? t : 0, done = 0;  // then pass the result to the children in turn
    for (size_t i = 0; i < kids.size(); i++) {
      const TreeKid& k = kids[i];
      sent += (root && i == 0 ? 0 : o) + x(k.local);
      done = std::max(done, sent + latency(k.local) + k.times.down);
    }
    result.down = root ? done - t : done;
    return result;
  }

  // The fabric's nodes in node order, as the node trees take them: blocks of perNode()
  // contiguous ranks, the last possibly short, or counted from the fabric's placement.
  struct NodeSizes {
    long long count = 1;
    long long full = 0;           // ranks of every node but the last
    long long last = 0;
    std::vector<long long> each;  // every node's, when they differ before the last
    long long of(long long node) const {
      return !each.empty() ? each[size_t(node)] : node + 1 == count ? last : full;
    }
  };
  NodeSizes nodeSizes() const {
    NodeSizes s;
    if (f.nodeOfRank.empty()) {
      s.full = perNode();
      s.count = (n + s.full - 1) / s.full;
      s.last = n - (s.count - 1) * s.full;
      return s;
    }
    std::vector<long long> counted(size_t(f.nodes), 0);
    for (int node : f.nodeOfRank) counted[size_t(node)]++;
    for (long long ranks : counted)
      if (ranks > 0) s.each.push_back(ranks);  // a node without ranks is not in the trees
    s.count = (long long)s.each.size();
    s.full = s.each.front();
    s.last = s.each.back();
    if (std::all_of(s.each.begin(), s.each.end() - 1, [&](long long r) { return r == s.full; })) s.each.clear();
    return s;
  }

  // Node x sits at position x + 1 of a binary tree over positions 1..N whose root in any range
  // of positions is the one divisible by the largest power of two (topo::nodeTreeParent); the
  // second tree mirrors the positions (N even) or shifts them by one (N odd), so that a node
  // inner in one tree is a leaf in the other.
  struct NodeOrder {
    long long count;
    bool mirrored;
    long long nodeAt(long long pos) const { return topo::nodeAtTreePosition(int(pos), int(count), mirrored); }
    long long positionOf(long long node) const { return topo::nodeTreePosition(int(node), int(count), mirrored); }
    static long long rootOf(long long lo, long long hi) {
      long long b = 1;
      while (2 * b <= hi) b *= 2;
      while (hi / b * b < lo) b /= 2;
      return hi / b * b;
    }
  };

  struct TreeWalk {
    double c;
    const NodeSizes& sizes;
    NodeOrder order;
    std::map<std::pair<long long, bool>, TreeTimes> local;
    std::map<std::tuple<long long, long long, int>, TreeTimes> nodes;
  };

  // An in-order tree of `size` ranks on one node: the whole tree on one node, or a node's ranks
  // below its head.
  TreeTimes localTree(TreeWalk& w, long long size, bool root) const {
    auto key = std::make_pair(size, root);
    if (auto it = w.local.find(key); it != w.local.end()) return it->second;
    std::vector<TreeKid> kids;
    for (long long kid : {size / 2, size - size / 2 - 1})
      if (kid > 0) kids.push_back({localTree(w, kid, false), true});
    TreeTimes result = rankTimes(kids, root, true, w.c);
    w.local.emplace(key, result);
    return result;
  }

  // The node tree over positions [lo, hi] (1-based): its root node's head has its own node's
  // ranks as first child (a local edge), then its child nodes' heads in node order (network
  // edges). A range is a full subtree of 2b - 1 positions around its root (b its lowest set bit),
  // cut at N on the right; when every node but the last is the same size, its times depend only
  // on b, its length right of the root and whether it holds position 1 or N (where the last node
  // sits, and where the mirrored trees' node order turns), so the walk meets O(log N) distinct
  // subtrees. Nodes of other sizes are keyed by the exact range: O(N).
  TreeTimes nodeTree(TreeWalk& w, long long lo, long long hi) const {
    const long long count = w.sizes.count;
    long long top = NodeOrder::rootOf(lo, hi);
    auto key = w.sizes.each.empty() ? std::make_tuple(top & -top, hi - top, 2 * (lo == 1) + (hi == count))
                                    : std::make_tuple(lo, hi, -1);
    if (auto it = w.nodes.find(key); it != w.nodes.end()) return it->second;
    std::vector<TreeKid> kids;
    long long ranks = w.sizes.of(w.order.nodeAt(top));
    if (ranks > 1) kids.push_back({localTree(w, ranks - 1, false), true});
    std::vector<std::pair<long long, long long>> below;
    if (lo < top) below.emplace_back(lo, top - 1);
    if (top < hi) below.emplace_back(top + 1, hi);
    auto nodeOf = [&](const std::pair<long long, long long>& r) { return w.order.nodeAt(NodeOrder::rootOf(r.first, r.second)); };
    if (below.size() == 2 && nodeOf(below[1]) < nodeOf(below[0])) std::swap(below[0], below[1]);
    for (auto [klo, khi] : below) kids.push_back({nodeTree(w, klo, khi), false});
    TreeTimes result = rankTimes(kids, lo == 1 && hi == count, false, w.c);
    w.nodes.emplace(key, result);
    return result;
  }

  // The most chunks one rank sends, and one node's NIC pool carries out, for each chunk of a
  // tree (both trees together): each tree edge carries a chunk up and one down. These bound a
  // full pipeline's pace. A chunk's way up leaves a node once per edge whose child is there and
  // whose parent is not, and its way down once per such edge the other way: every chunk that
  // leaves a node in one direction leaves at the same time (all trees and channels start
  // together) and shares that node's NIC pool, and the way down waits for the way up.
  struct TreeLoad {
    double rankSends = 5;
    double nodeNetSends = 4;
    double nodeUpSends = 2;    // the most chunks leaving one node on the way up
    double nodeDownSends = 2;  // and on the way down
  };
  // One node: the in-order trees counted edge by edge up to kExactTreeRanks ranks; above, the
  // counts of a large one (a rank inner in both trees).
  long long treeRank(long long pos, int tree) const { return (pos + tree) % n; }
  void countEdges(long long lo, long long hi, long long parent, int tree, std::vector<double>& sends) const {
    if (lo >= hi) return;
    long long mid = (lo + hi) / 2;
    if (parent >= 0) {
      sends[size_t(treeRank(mid, tree))]++;
      sends[size_t(treeRank(parent, tree))]++;
    }
    countEdges(lo, mid, mid, tree, sends);
    countEdges(mid + 1, hi, mid, tree, sends);
  }
  TreeLoad treeLoad() const {
    if (n > kExactTreeRanks) return {};
    std::vector<double> sends(size_t(n), 0);
    for (int tree = 0; tree < 2; tree++) countEdges(0, n, -1, tree, sends);
    return {*std::max_element(sends.begin(), sends.end()), 0, 0, 0};
  }
  // Node trees, node by node: a head's edges are its parent's (network, unless the root node),
  // its own node's ranks' (local) and up to two child nodes' (network); a node's other ranks
  // form the same in-order tree in both trees, whose ranks have at most 3 edges.
  TreeLoad nodeTreeLoad(const NodeSizes& sizes) const {
    TreeLoad load{0, 0, 0, 0};
    const long long count = sizes.count;
    const long long top = NodeOrder::rootOf(1, count);
    for (long long node = 0; node < count; node++) {
      long long below = sizes.of(node) - 1;
      double up = 0, down = 0;
      for (bool mirrored : {false, true}) {
        long long pos = NodeOrder{count, mirrored}.positionOf(node);
        long long b = pos & -pos;  // children at pos -+ b/2, the right one cut off at N
        up += pos != top ? 1 : 0;
        down += b == 1 ? 0 : pos < count ? 2 : 1;
      }
      double head = up + down + (below > 0 ? 2 : 0);
      load.rankSends = std::max({load.rankSends, head, 2.0 * double(std::min<long long>(below, 3))});
      load.nodeNetSends = std::max(load.nodeNetSends, up + down);  // every crossing edge, either way
      load.nodeUpSends = std::max(load.nodeUpSends, up);
      load.nodeDownSends = std::max(load.nodeDownSends, down);
    }
    return load;
  }

  std::optional<double> treeAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    const int k = plan::kTreeChunks;
    const NodeSizes sizes = multiNode() ? nodeSizes() : NodeSizes{};
    const TreeLoad load = multiNode() ? nodeTreeLoad(sizes) : treeLoad();
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(2 * k));
    auto perTile = [&](double c, bool first) {
      double worst = 0;
      for (bool mirrored : {false, true}) {
        TreeWalk w{c, sizes, {sizes.count, mirrored}, {}, {}};
        TreeTimes whole = multiNode() ? nodeTree(w, 1, sizes.count) : localTree(w, n, true);
        // The first chunk's way up and down, then the others at the pace of the busiest port or
        // of the round trip shared by the chunks a rank runs ahead (2 per level); or the busiest
        // rank's steps for all chunks, when they take longer.
        double fill = whole.up + whole.down;
        // The first tile's crossings: both trees go up together, and the chunks leaving a node
        // on the way up queue on its NIC pool before any comes down (the walk above charges one
        // crossing per hop): a floor, not a sum, since deeper crossings leave later. Later tiles
        // find the trees apart, one's way down beside the other's way up (portFloor below).
        if (first && multiNode())
          fill = std::max(fill, nch * c * (load.nodeUpSends + load.nodeDownSends) / portRate(false));
        double pace = std::max(fill / double(2 * whole.depth + 1), portFloor(c, load.rankSends, load.nodeNetSends));
        worst = std::max({worst, fill + double(k - 1) * pace, double(k) * whole.pace});
      }
      return std::max(worst, portFloor(c, load.rankSends * k, load.nodeNetSends * k));
    };
    return serialTiles(t, perTile);
  }

  // Recursive doubling (recdoubling.cpp): per tile log2(p) rounds of send + receive-reduce with
  // the partner r ^ mask (p = 2^floor(log2 n)); extra ranks fold in and get the result back:
  // two more rounds. Every round costs 2o + x + a and tiles run one after the other.
  std::optional<double> recDoublingAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    long long pw = 1LL << floorLog2(n);
    auto perTile = [&](double c, bool first) {
      double time = 0;
      for (long long mask = 1; mask < pw; mask <<= 1) time += xorRound(c, 1, mask, pw, first);
      if (pw < n) time += 2 * foldRound(c, 1, pw, first) - foldHead(c, 1, pw, first);
      return time;
    };
    return serialTiles(t, perTile);
  }

  // `count` chunk pairs with the partner r ^ mask among the first pw ranks.
  double xorRound(double c, long long count, long long mask, long long pw, bool first) const {
    bool local = !crosses(0, mask) && !crosses(pw - 1, pw - 1 - mask);
    double crossing = local ? 0 : double(std::min<long long>(perNode(), mask));
    return pairs(c, count, local, flowsOf(local, crossing)) + (first && mask == 1 ? stagger(c, local) : 0);
  }
  // The extra ranks r >= pw exchange `count` chunks with r - pw, streamed: o + x per chunk.
  // Once the ranks are spread out (after the first tile), a folding rank waits on average for
  // half the others on the port, not all.
  double foldRound(double c, long long count, long long pw, bool first) const {
    bool local = !crosses(0, pw) && !crosses(n - 1 - pw, n - 1);
    double crossing = local ? 0 : double(std::min<long long>(perNode(), n - pw));
    double flows = flowsOf(local, crossing);
    // (across nodes, the other channels' folds share the NIC pool too)
    double x = xfer(c, local, first ? flows : (flows + (local ? 1 : nch)) / 2);
    // a stream of chunks keeps the port busy with every folding rank's chunks, and every
    // channel's, except that across nodes, once spread out, one channel folds in while the
    // other folds out (the two directions use different nodes' NIC pools)
    double channels = first || local ? nch : 1;
    double stream = std::max(double(count) * (o + x), count > 1 ? double(count) * flows * channels * c / portRate(local) : 0.0);
    return stream + latency(local) + o + (first ? stagger(c, local) : 0);
  }

  // Ranks without an extra partner start a tile ahead of the folded ones, by the fold; rank 0
  // (folded) then finds the chunks of unfolded partners (mask >= n - pw) waiting for it and
  // saves their latency, up to the head start.
  double foldHead(double c, long long count, long long pw, bool first) const {
    double saved = 0;
    for (long long mask = 1; mask < pw; mask <<= 1)
      if (mask >= n - pw) saved += latency(!crosses(0, mask));
    return std::min(saved, foldRound(c, count, pw, first));
  }

  // Rabenseifner (rabenseifner.cpp): a tile is p chunks; recursive halving sends mask chunks in
  // round mask (p/2 .. 1), recursive doubling mask chunks in round mask (1 .. p/2), each chunk a
  // send then the partner's receive (2o + x + a); extra ranks stream p chunks in and out.
  std::optional<double> rabenseifnerAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    long long pw = 1LL << floorLog2(n);
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(pw));
    auto perTile = [&](double c, bool first) {
      double time = 0;
      for (long long mask = 1; mask < pw; mask <<= 1) time += 2 * xorRound(c, mask, mask, pw, first);
      if (pw < n) time += 2 * foldRound(c, pw, pw, first);
      return time;
    };
    return serialTiles(t, perTile);
  }

  // Hierarchical (hierarchical.cpp): a tile is n chunks. Inside the node, a ring reduce-scatter
  // then all-gather, one column of g - 1 hops per node; across nodes, a ring all-reduce of
  // 2(N - 1) hops with every rank of a node crossing at once. Unequal nodes, one node or one
  // rank per node: the plan is the ring's.
  std::optional<double> hierarchicalAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    long long g = f.ranksPerNode;
    if (g <= 1 || g >= n || n % g != 0) return ringAlgo();
    long long nodes = n / g;
    Tiles t = tilesOf(range(Layout::Split), p.chunkBytes, size_t(n));
    auto perTile = [&](double c, bool) {
      double column = double(g - 1) * hopOf(c, true, flowsOf(true, 0)) + o;
      double hops = double(2 * (nodes - 1));
      double inter = std::max(hops * hopOf(c, false, flowsOf(false, double(g))), portFloor(c, 0, hops * double(g))) + o;
      return 2 * double(nodes) * column + inter;
    };
    return serialTiles(t, perTile);
  }

  // Bruck (bruck.cpp): a local copy, then rounds at distance 1, 2, 4, ..., each one joined
  // message: all-to-all sends the blocks whose index has the round's bit, all-gather
  // min(d, n - d) blocks.
  std::optional<double> bruckAlgo() const {
    if (coll != Coll::AlltoAll && coll != Coll::AllGather) return std::nullopt;
    auto blocks = [&](long long d) { return coll == Coll::AlltoAll ? withBit(d) : std::min<long long>(d, n - d); };
    long long width = 1;
    for (long long d = 1; d < n; d <<= 1) width = std::max(width, blocks(d));
    if (plan::joinedChunkBytes(p.chunkBytes, size_t(width)) == 0) return std::nullopt;  // a round does not fit a slot
    std::vector<std::pair<long long, long long>> rounds;  // (distance, blocks): to r + d, from r - d (all-gather: the reverse)
    for (long long d = 1; d < n; d <<= 1) rounds.emplace_back(d, blocks(d));
    Tiles t = joinedTiles(Layout::Blocks, size_t(width));
    auto perTile = [&](double c, bool first) {
      double time = o + copy(c) + (first ? stagger(c, true) : 0);
      Load load;
      time += joinedRounds(c, rounds, coll == Coll::AlltoAll ? 1 : -1, load);
      return std::max(time, portFloor(c, load.localChunks, load.netChunks));
    };
    return serialTiles(t, perTile);
  }

  // How many i in [1, n) have bit d set.
  long long withBit(long long d) const { return (n / (2 * d)) * d + std::max<long long>(0, n % (2 * d) - d); }

  // PAT (pat.cpp): rounds at distance 2^k, each one joined message of the ceil((n - d) / 2d)
  // blocks whose distance has lowest bit k; all-gather starts with a local copy.
  std::optional<double> patAlgo() const {
    if (coll != Coll::AllGather && coll != Coll::ReduceScatter) return std::nullopt;
    auto blocks = [&](long long d) { return (n - d + 2 * d - 1) / (2 * d); };
    const long long width = std::max(1LL, blocks(1));
    if (plan::joinedChunkBytes(p.chunkBytes, size_t(width)) == 0) return std::nullopt;  // a round does not fit a slot
    // all-gather from the largest distance down, from r + d to r - d; reduce-scatter the reverse
    std::vector<std::pair<long long, long long>> rounds;
    for (long long d = 1; d < n; d <<= 1) rounds.emplace_back(d, blocks(d));
    if (coll == Coll::AllGather) std::reverse(rounds.begin(), rounds.end());
    Tiles t = joinedTiles(Layout::Blocks, size_t(width));
    auto perTile = [&](double c, bool first) {
      double time = (coll == Coll::AllGather ? o + copy(c) : 0) + (first ? stagger(c, true) : 0);
      Load load;
      time += joinedRounds(c, rounds, coll == Coll::AllGather ? -1 : 1, load);
      return std::max(time, portFloor(c, load.localChunks, load.netChunks));
    };
    return serialTiles(t, perTile);
  }

  // Pairwise all-to-all (pairwise.cpp): a local copy, then n - 1 send/receive pairs, one per
  // peer; a rank has g - 1 peers on its node and n - g across.
  std::optional<double> pairwiseAlgo() const {
    if (coll != Coll::AlltoAll) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Blocks), p.chunkBytes, 1);
    // the smallest node's ranks have the most peers across nodes
    long long g = multiNode() ? n - (f.nodes - 1) * perNode() : n;
    if (g <= 0) g = perNode();
    auto perTile = [&](double c, bool first) {
      double local = streamPairs(c, g - 1, true, flowsOf(true, 0));
      double net = streamPairs(c, n - g, false, flowsOf(false, double(perNode())));
      double steps = o + copy(c) + local + net + (first ? stagger(c, true) : 0);
      return std::max(steps, portFloor(c, double(g - 1), double(perNode() * (n - perNode()))));
    };
    return serialTiles(t, perTile);
  }

  // Binomial broadcast / reduce (binomial.cpp), root 0: relative rank v's children are
  // v + 2^j for j above v's highest bit. The critical path is the chain 0 -> 1 -> 3 -> 7 ...
  // of the largest subtrees; tiles pipeline down the tree at the pace of the busiest rank.
  std::optional<double> binomialAlgo() const {
    if (coll != Coll::Broadcast && coll != Coll::Reduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    if (t.count == 0) return 0.0;
    bool broadcast = coll == Coll::Broadcast;
    // the root's port carries a chunk per child, node 0's NIC pool one per child off the node
    double rootChunks = double(childCount(0, -1));
    auto floor = [&](double c) { return portFloor(c, rootChunks, double(nicChildren())); };
    auto path = [&](double c) {
      double bound = floor(c) + 2 * o + latency(!multiNode());  // the ports, then the last chunk's way
      return std::max((broadcast ? broadcastPath(c) : reducePath(c)) + stagger(c, true), bound);
    };
    auto period = [&](double c) { return std::max(busiest(c, broadcast), floor(c)); };
    return double(t.count - 1) * period(double(t.chunk)) + path(double(t.lastChunk));
  }

  // A rank's work per tile along the chain of largest subtrees (the root has the most
  // children): broadcast sends to every child; reduce receives from each and sends up.
  double busiest(double c, bool broadcast) const {
    double most = 0;
    long long v = 0;
    for (int h = -1;; h++) {
      long long kids = childCount(v, h);
      double work = 0;
      if (broadcast) {
        work = (v == 0 ? o + copy(c) : 0) + sendsTo(c, v, h);
      } else {
        work = double(std::max<long long>(kids, 1)) * o;
        if (v != 0) work += xfer(c, !crosses(v, v - (1LL << std::max(0, h))), 1.0);
      }
      most = std::max(most, work);
      if (kids == 0) return most;
      v += 1LL << (h + 1);
    }
  }

  // The children of node 0's ranks that sit on other nodes (ranks are placed in order, so
  // they are the children v + 2^j with 2^j >= ranks per node).
  long long nicChildren() const {
    if (!multiNode()) return 0;
    long long g = perNode(), count = 0;
    for (long long d = 1; d < n; d <<= 1)
      if (d >= g) count += std::min(g, n - d);
    return count;
  }

  // One send per child of v, each o + x on its own link.
  double sendsTo(double c, long long v, int h) const {
    double time = 0;
    for (int j = h + 1; v + (1LL << j) < n; j++) time += o + xfer(c, !crosses(v, v + (1LL << j)), 1.0);
    return time;
  }

  // Children of relative rank v (highest bit h, or -1 for the root): v + 2^j < n, j > h.
  long long childCount(long long v, int h) const {
    long long count = 0;
    for (int j = h + 1; v + (1LL << j) < n; j++) count++;
    return count;
  }

  // Broadcast, from the moment relative rank v (highest bit h) holds a chunk: v sends to its
  // children largest distance first, so the largest subtree (v + 2^(h+1)) is served last and
  // carries the critical chain; the other children are taken as leaves (their subtrees are
  // small), which keeps this O(log^2 n).
  double broadcastFrom(double c, long long v, int h) const {
    double sent = 0, done = o;
    for (int j = 62; j > h; j--) {
      long long kid = v + (1LL << j);
      if ((1LL << j) >= n || kid >= n) continue;
      bool local = !crosses(v, kid);
      sent += o + xfer(c, local, 1.0);
      double below = j == h + 1 ? broadcastFrom(c, kid, j) : o;
      done = std::max(done, sent + latency(local) + below);
    }
    return done;
  }
  double broadcastPath(double c) const { return o + copy(c) + broadcastFrom(c, 0, -1); }

  // Reduce: v receives from its children smallest distance (largest subtree) first, then sends
  // up; returns when v's send is through (the root: its last receive). Children other than
  // the first are taken as leaves.
  double reduceUp(double c, long long v, int h) const {
    double t = 0;
    bool any = false;
    for (int j = h + 1; (1LL << j) < n && v + (1LL << j) < n; j++) {
      long long kid = v + (1LL << j);
      bool local = !crosses(kid, v);
      double sent = j == h + 1 ? reduceUp(c, kid, j) : o + xfer(c, local, 1.0);
      t = std::max(t, sent + latency(local)) + o;
      any = true;
    }
    if (v == 0) return t;
    long long parent = v - (1LL << std::max(0, h));
    double x = xfer(c, !crosses(v, parent), 1.0);
    return any ? t + x : o + x;
  }
  double reducePath(double c) const { return reduceUp(c, 0, -1); }

  // Chain all-reduce (chain.cpp): per tile the partial sum walks 0 -> ... -> n-1 and the result
  // on round to n-2: 2n - 2 hops. Rank 0 starts the next tile when the result has come round
  // to it and it has passed it on, so tiles overlap by n - 2 hops.
  // One-shot (oneshot.cpp). Through the mailboxes (one node, small enough): every rank's
  // write is seen by all the others after one handoff, then each rank pulls the n-1 other
  // inputs through its port and folds n inputs. As a plan:
  // n-1 sends through the rank's port, a hop, then n-1 receive-and-reduce steps per tile.
  std::optional<double> oneshotAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    if (!multiNode() && f.mailboxBytes > 0 && bytes <= f.mailboxBytes)
      return latency(true) + double(n - 1) * double(bytes) / portRate(true) + double(n) * copy(double(bytes));
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    long long remote = multiNode() ? n - perNode() : 0;
    // Rank 0 is the slowest: its fold starts with a copy and its first receive (from rank 1) is
    // the last chunk rank 1 sends; every rank sends to its successors in turn, so in each round
    // the ranks of a node that send across share the NIC pool, and the channels share every port.
    auto perTile = [&](double c, bool) {
      double sends = double(n - 1 - remote) * (o + xfer(c, true, n > 2 ? double(nch) : 0.5 * (1 + nch))) +
                     double(remote) * (o + xfer(c, false, double(perNode() * nch)));
      double firstWait = std::max(2 * (o + copy(c)), latency(remote == 0));
      return sends + firstWait + double(n - 1) * (2 * o + copy(c));
    };
    return serialTiles(t, perTile);
  }

  std::optional<double> chainAlgo() const {
    if (coll != Coll::AllReduce) return std::nullopt;
    Tiles t = tilesOf(range(Layout::Whole), p.chunkBytes, 1);
    if (t.count == 0) return 0.0;
    long long netInRing = multiNode() ? f.nodes : 0;
    long long netInTile = multiNode() ? 2 * (f.nodes - 1) + 1 - (crosses(n - 2, n - 1) ? 1 : 0) : 0;
    auto hops = [&](double c, long long count, long long net) {
      return double(count - net) * hopOf(c, true, 1.0) + double(net) * hopOf(c, false, 1.0);
    };
    double sends = n > 2 ? 2 : 1;  // chunks a rank sends per tile
    auto period = [&](double c) {
      double pass = n > 2 ? o + xfer(c, !crosses(0, 1), 1.0) : o;
      return std::max(hops(c, n, netInRing) + pass, portFloor(c, sends, sends)) + nicQueueing(c, sends);
    };
    double last = double(t.lastChunk);
    return double(t.count - 1) * period(double(t.chunk)) + hops(last, 2 * n - 2, netInTile) + o + stagger(last, true);
  }
};

}  // namespace

const std::vector<std::string>& modelledAlgorithms() {
  static const std::vector<std::string> names = {"ring",         "direct", "tree",     "recdoubling", "rabenseifner", "hierarchical",
                                                 "bruck",        "pairwise", "pat",    "binomial",    "chain",
                                                 "oneshot"};
  return names;
}

std::optional<double> analyticUs(const std::string& algorithm, Coll coll, size_t bytes, const Fabric& fabric,
                                 const Pipeline& pipeline) {
  std::optional<Fabric> crowded;  // copied only when threads outnumber cores (fabrics can be large)
  if (fabric.threadShare(pipeline.nchannels) < fabric.threadShare(1)) crowded = fabric.atChannels(pipeline.nchannels);
  Model m(crowded ? *crowded : fabric, pipeline, coll, bytes);
  if (fabric.nranks <= 1) {
    if (std::find(modelledAlgorithms().begin(), modelledAlgorithms().end(), algorithm) == modelledAlgorithms().end())
      return std::nullopt;
    return m.single(countsBlocks(coll) ? Layout::Blocks : Layout::Whole);
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
  if (algorithm == "oneshot") return m.oneshotAlgo();
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
