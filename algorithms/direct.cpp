// The direct algorithm: its plans and its analytic cost (registry entry "direct").
//
// Direct exchanges: all-to-all, gather, scatter, send and receive, one lane per peer and way.
//
// Cost with m bytes per block: all-to-all sends n-1 blocks at once, alpha + (n-1) m beta when the
// links do not contend (every peer's lane runs concurrently); gather and scatter are bound by the
// root's link, alpha + (n-1) m beta; send/receive alpha + m beta.
#include <algorithm>
#include <optional>

#include "algorithms/builtin.h"
#include "algorithms/cost_model.h"

namespace tutti::plan {
namespace {

// `spread`: the peer's distance from this rank (the receiver counts it the same way), so that
// both ends of a connection put it on the same channel; -1 for a point-to-point send.
LaneSpec sendLane(int peer, BufRef src, int spread = -1) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.spread = spread;
  lane.sendPeers = {peer};
  lane.layout = Layout::Blocks;
  lane.steps.push_back({Op::Send, 0, src, BufRef{}});
  return lane;
}

LaneSpec recvLane(int peer, BufRef dst, int spread = -1) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.spread = spread;
  lane.recvPeers = {peer};
  lane.layout = Layout::Blocks;
  lane.steps.push_back({Op::Recv, 0, BufRef{}, dst});
  return lane;
}

LaneSpec copyLane(BufRef src, BufRef dst, int spread = -1) {
  LaneSpec lane;
  lane.layout = Layout::Blocks;
  lane.spread = spread;
  lane.steps.push_back({Op::Copy, 0, src, dst});
  return lane;
}

}  // namespace

// The exchanges with many peers spread their lanes over the channels by the peer's distance
// (LaneSpec::spread): the own block's copy at 0, the sends to rank + i and the receives from
// rank - i at i.
RankPlan directAlltoAll(int rank, int nranks) {
  RankPlan plan{"direct", {copyLane({Buf::In, rank}, {Buf::Out, rank}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int to = (rank + i) % nranks, from = (rank - i + nranks) % nranks;
    plan.lanes.push_back(sendLane(to, {Buf::In, to}, i));
    plan.lanes.push_back(recvLane(from, {Buf::Out, from}, i));
  }
  return plan;
}

RankPlan directGather(int rank, int nranks, int root) {
  if (rank != root) return RankPlan{"direct", {sendLane(root, {Buf::In, -1}, (rank - root + nranks) % nranks)}};
  RankPlan plan{"direct", {copyLane({Buf::In, -1}, {Buf::Out, rank}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int from = (rank + i) % nranks;
    plan.lanes.push_back(recvLane(from, {Buf::Out, from}, i));
  }
  return plan;
}

RankPlan directScatter(int rank, int nranks, int root) {
  if (rank != root) return RankPlan{"direct", {recvLane(root, {Buf::Out, -1}, (rank - root + nranks) % nranks)}};
  RankPlan plan{"direct", {copyLane({Buf::In, rank}, {Buf::Out, -1}, 0)}};
  for (int i = 1; i < nranks; i++) {
    int to = (rank + i) % nranks;
    plan.lanes.push_back(sendLane(to, {Buf::In, to}, i));
  }
  return plan;
}

RankPlan directSend(int rank, int peer) {
  // A self send is paired with its receive by the runtime, which binds the receive's buffer
  // as this send's output.
  if (peer == rank) return RankPlan{"direct", {copyLane({Buf::In, -1}, {Buf::Out, -1})}};
  return RankPlan{"direct", {sendLane(peer, {Buf::In, -1})}};
}

RankPlan directRecv(int rank, int peer) {
  if (peer == rank) return RankPlan{"direct", {}};  // done by the paired self send
  return RankPlan{"direct", {recvLane(peer, {Buf::Out, -1})}};
}

// ---- its analytic cost (sim.h, analyticUs; the shared primitives: cost_model.h) ----

namespace {

struct DirectModel : sim::CostModel {
  explicit DirectModel(const sim::CostModel& m) : CostModel(m) {
    if (spreads()) nch = channels;
  }

  // Spread lanes (LaneSpec::spread) move whole blocks, each on one channel, so every channel
  // moves bytes however short the blocks.
  bool spreads() const {
    return (coll == Coll::AlltoAll || coll == Coll::Gather || coll == Coll::Scatter) &&
           plan::spreadsOverChannels(n, channels);
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
      default:
        return std::max({lastLaneStarts, (2 * lanes - 1) * tiles * o, lanes * tiles * o + tail(!s.anyNetwork) + o});
    }
  }

  // Direct: one lane per peer and direction, all concurrent.
  std::optional<double> estimate() const {
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
        // Spread, a channel's ports carry its share of the peers' whole blocks.
        bool spread = spreads();
        size_t blockBytes = spread ? sim::laneBytes(coll, Layout::Blocks, bytes, n) : range(Layout::Blocks);
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
};

}  // namespace

std::optional<double> directCost(const sim::CostModel& model) { return DirectModel(model).estimate(); }

}  // namespace tutti::plan
