// The analytic cost model's shared part: one operation on a fabric as the model sees it, and the
// primitives every algorithm's cost (in the algorithm's own file, attached to its registry entry)
// is written with: link and port rates, hops, pair exchanges, tiles run one after another, and
// the rounds of joined messages.
//
// Notation: o = step overhead, a = link latency, x(c) = c / rate, the time to push a chunk of c
// bytes. A flow's rate is the least of the channel's executor rate, the link (one NIC), and its
// share of the port it crosses (a rank's local port, or the node's NIC pool) with the flows that
// cross it at the same time. Ring and direct follow the exact model's behaviour step for step
// (sim_exact.cpp); the others follow their plans (algorithms/<name>.cpp): a tile costs the
// dependency chain of its steps, bounded below by what its ports must carry (documented per
// algorithm). Ranks are placed on nodes as the fabric says; the closed forms probe a few ranks'
// nodes (Fabric::sameNode) rather than walk them all, so that 100,000-rank sweeps take
// milliseconds.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "algorithms/sim.h"
#include "algorithms/tiling.h"

namespace tutti::sim {

// An algorithm's cost derives from this (its own helpers beside its plan generator), reads the
// operation from its fields and cuts it with the tiling rule (tiling.h).
struct CostModel {
  using Tiles = tiling::Tiles;
  static Tiles tilesOf(size_t range, size_t chunkBytes, size_t perTile) {
    return tiling::tilesOf(range, chunkBytes, perTile);
  }

  const Fabric& f;
  const Pipeline& p;
  size_t bytes;
  int n;
  int channels;  // the operation's channels, as the launch cuts it (and their threads)
  int nch;       // those that move bytes (busyChannels): the flows that share ports
  double o;
  plan::Coll coll;

  // Costs must not outlive `fabric` and `pipe`.
  CostModel(const Fabric& fabric, const Pipeline& pipe, plan::Coll c, size_t b);

  bool multiNode() const { return f.nodes > 1; }
  int perNode() const;

  double latency(bool local) const { return local ? f.local.latencyUs : f.network.latencyUs; }
  double copy(double c) const { return c / (f.copyGBps * kBytesPerUsPerGBps); }

  // Channel 0's bytes of a lane of this layout (sim.h, channelBytes).
  size_t range(plan::Layout layout) const { return channelBytes(coll, layout, bytes, n, channels); }

  // Sums fn(chunk) over tiles: all full tiles cost the same.
  template <class Fn>
  double overTiles(const tiling::Tiles& t, Fn fn) const {
    if (t.count == 0) return 0;
    return double(t.count - 1) * fn(double(t.chunk)) + fn(double(t.lastChunk));
  }

  // Uncontended rate of one flow (channel and link caps) and a port's capacity, bytes/us.
  double capRate(bool local) const;
  double portRate(bool local) const;
  double hop(double c, bool local) const { return o + c / capRate(local) + latency(local); }

  // Channels are flows of their own: when their steps overlap on a port they share it, but a
  // channel's latency and overhead leave the port to the others. So a step costs its
  // uncontended hop, unless the port cannot carry every channel's chunk in that time.
  double portBound(double c, bool local, double flows) const { return flows * c / portRate(local); }

  // A single rank's local copy of the whole operation (any algorithm at one rank).
  double single(plan::Layout layout) const;

  // ---- the logarithmic and serial algorithms ----
  //
  // Their plans are one lane per rank (tree: one per tree) whose steps wait for the partner's
  // chunk before the next step is issued, and whose next tile starts only after the tile's last
  // step: so a tile costs the dependency chain of its steps, and tiles add up. Each algorithm's
  // cost follows its plan's step list (algorithms/<name>.cpp).

  // Whether ranks a and b (both < n) are on different nodes.
  bool crosses(long long a, long long b) const { return multiNode() && !f.sameNode(int(a), int(b)); }

  // A transfer of c bytes, `flows` of them (from different ranks) starting at once on one port:
  // they are served one after another, and a round waits for the last.
  double xfer(double c, bool local, double flows) const;
  // A send/receive pair in rounds that every channel runs in lockstep: the channels' transfers
  // queue on the port whenever a transfer takes longer than the step's overheads.
  double lockstepPair(double c, bool local, double flows) const;
  // A send step then the receiver seeing it: o + x + a.
  double hopOf(double c, bool local, double flows) const { return o + xfer(c, local, flows) + latency(local); }
  // A send followed by the receive of the partner's chunk, on one lane: 2o + x + a.
  double pairStep(double c, bool local, double flows) const { return hopOf(c, local, flows) + o; }

  // Flows on a port in a round where every rank sends once: a rank's own local port, or the
  // node's NIC pool that `crossing` of its ranks use at once. Channels are left out: they drift
  // apart by a transfer at their first shared port and then rarely overlap while steps are
  // latency bound; portFloor() keeps a tile no shorter than its ports need for every channel.
  double flowsOf(bool local, double crossing) const;

  // The time every channel's chunks of one tile need on the busiest rank's local port
  // (`localChunks` chunks) and the busiest node's NIC pool (`netChunks`).
  double portFloor(double c, double localChunks, double netChunks) const;

  // Sum over tiles of a per-tile cost when tiles run strictly one after the other.
  // perTile(c, first): the ranks and channels start the first tile together (a later channel
  // loses a transfer at each round's port); later tiles find them spread out.
  template <class Fn>
  double serialTiles(const tiling::Tiles& t, Fn perTile) const {
    if (t.count == 0) return 0;
    double first = perTile(double(t.chunkOf(0)), true);
    double rest =
        t.count > 1 ? double(t.count - 2) * perTile(double(t.chunk), false) + perTile(double(t.lastChunk), false) : 0;
    return first + rest;
  }

  // Channels start together and collide at their first port: each waits for the one before.
  double stagger(double c, bool local) const { return double(nch - 1) * c / portRate(local); }

  // `count` send/receive pairs in a row with `flows` ranks on the port: the first waits for
  // every rank's transfer; the others stream, each rank at its own pace, as far as the port's
  // bandwidth lets them.
  double pairs(double c, long long count, bool local, double flows) const;

  // Pair rounds of recursive doubling and Rabenseifner (recdoubling.cpp, rabenseifner.cpp), with
  // pw = 2^floor(log2 n) ranks in the doubling.
  // `count` chunk pairs with the partner r ^ mask among the first pw ranks.
  double xorRound(double c, long long count, long long mask, long long pw, bool first) const;
  // The extra ranks r >= pw exchange `count` chunks with r - pw, streamed: o + x per chunk.
  // Once the ranks are spread out (after the first tile), a folding rank waits on average for
  // half the others on the port, not all.
  double foldRound(double c, long long count, long long pw, bool first) const;
  // Ranks without an extra partner start a tile ahead of the folded ones, by the fold; rank 0
  // (folded) then finds the chunks of unfolded partners (mask >= n - pw) waiting for it and
  // saves their latency, up to the head start.
  double foldHead(double c, long long count, long long pw, bool first) const;

  // Up to this many ranks, the closed forms follow every rank's path (joinedRounds, the tree's
  // edge counts); beyond, a few representative ones.
  static constexpr long long kExactPathRanks = 4096;

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
  // sit in their nodes: the path is followed for every rank (to kExactPathRanks ranks), or for
  // every place in a node of perNode() ranks placed in order (beyond: exact for such fabrics,
  // near for others). A message across nodes shares the node's NIC pool with every channel's
  // and, as the ranks drift apart over the rounds, with half of the crossing ranks' on average;
  // node-local ones are charged no sharing (channels drift apart, as for the other pair
  // algorithms). Adds the tile's chunks to the port loads.
  double joinedRounds(double c, const std::vector<std::pair<long long, long long>>& rounds, int dir, Load& load) const;

  // The tiles of a plan whose widest joined run has `width` steps: its chunk is cut so that they
  // fit one slot (the exact model's rule).
  tiling::Tiles joinedTiles(plan::Layout layout, size_t width) const;
};

}  // namespace tutti::sim
