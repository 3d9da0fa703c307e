// The plan verifier's checks before the symbolic run: tiling, joined-run widths, size, steps'
// buffers and connections, lane queues, and lanes that may run at once touching the same memory.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "algorithms/verify_checker.h"

namespace tutti::plan::verifier {

std::string Checker::geometry() {
  bool found = false;
  for (int r = 0; r < n_; r++)
    for (size_t l = 0; l < plans_[size_t(r)].lanes.size(); l++) {
      const LaneSpec& lane = plans_[size_t(r)].lanes[l];
      if (lane.steps.empty()) continue;
      if (lane.tileChunks < 0)
        return "rank " + std::to_string(r) + " lane " + std::to_string(l) + " has negative tileChunks";
      int chunks = lane.layout == Layout::Split ? (lane.tileChunks ? lane.tileChunks : n_) : 1;
      if (!found) {
        found = true;
        layout_ = lane.layout;
        chunks_ = chunks;
      } else if (lane.layout != layout_ || chunks != chunks_) {
        return "rank " + std::to_string(r) + " lane " + std::to_string(l) +
               " cuts tiles differently from the first lane with steps (layout or tileChunks differ)";
      }
    }
  if (chunks_ > 65536) return "tileChunks " + std::to_string(chunks_) + " is too large";
  for (Buf b : {Buf::In, Buf::Out})
    if (multiBlock(q_.coll, b) && layout_ != Layout::Blocks && found)
      return std::string(collName(q_.coll)) + " needs the Blocks layout (its " + bufName(b) +
             " buffer has one block per rank)";
  return "";
}

std::string Checker::checkJoinWidths() const {
  const size_t first = std::max<size_t>(1, joinWidth(plans_[0]));
  for (int r = 1; r < n_; r++) {
    size_t mine = std::max<size_t>(1, joinWidth(plans_[size_t(r)]));
    if (mine != first)
      return "rank " + std::to_string(r) + "'s widest joined run has " + std::to_string(mine) + " steps and rank 0's " +
             std::to_string(first) +
             ": chunks are cut so that the widest run fits one FIFO slot, so every rank's must be as wide";
  }
  return "";
}

std::string Checker::checkSize() const {
  int64_t cells = int64_t(n_) * std::max(indices(Buf::In), indices(Buf::Out)) * q_.tiles;
  for (const LaneRun& l : lanes_) cells += l.spec->scratchChunks;
  if (cells * int64_t(words_ + 1) > (int64_t(1) << 24))
    return "the plans are too large to verify (" + std::to_string(cells) + " chunks of " + std::to_string(n_) +
           "-rank values)";
  return "";
}

Where Checker::alias(int rank, Where w) const {
  if (!q_.inPlace) return w;
  switch (q_.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
      if (w.buf == Buf::Out && hasBuffer(q_.coll, Buf::In, rank, q_.root)) w.buf = Buf::In;
      return w;
    case Coll::AllGather: return w.buf == Buf::In ? Where{Buf::Out, rank} : w;
    case Coll::ReduceScatter: return w.buf == Buf::Out ? Where{Buf::In, rank} : w;
    case Coll::Gather: return w.buf == Buf::In && rank == q_.root ? Where{Buf::Out, rank} : w;
    case Coll::Scatter: return w.buf == Buf::Out && rank == q_.root ? Where{Buf::In, rank} : w;
    default: return w;
  }
}

std::string Checker::locate(int rank, const LaneSpec& lane, BufRef ref, bool write, Where& w) const {
  if (ref.buf == Buf::Scratch) {
    if (ref.chunk < 0 || ref.chunk >= lane.scratchChunks)
      return "scratch[" + std::to_string(ref.chunk) + "] is outside the lane's " + std::to_string(lane.scratchChunks) +
             " scratch chunks";
    w = {Buf::Scratch, ref.chunk};
    return "";
  }
  if (ref.buf != Buf::In && ref.buf != Buf::Out) return "refers to no buffer where it needs one";
  if (!hasBuffer(q_.coll, ref.buf, rank, q_.root))
    return std::string("refers to ") + bufName(ref.buf) + ", which " + collName(q_.coll) + " does not give rank " +
           std::to_string(rank) + " (null)";
  if (write && ref.buf == Buf::In) return "writes the input buffer";
  int count = indices(ref.buf), index = 0;
  if (layout_ == Layout::Split || (layout_ == Layout::Blocks && count > 1)) {
    if (ref.chunk < 0 || ref.chunk >= count)
      return std::string(bufName(ref.buf)) + "[" + std::to_string(ref.chunk) + "] is outside the tile's " +
             std::to_string(count) + (layout_ == Layout::Split ? " chunks" : " blocks");
    index = ref.chunk;
  } else if (ref.chunk != -1 && ref.chunk != 0) {
    return std::string(bufName(ref.buf)) + "[" + std::to_string(ref.chunk) + "]: " + bufName(ref.buf) + " of " +
           collName(q_.coll) + " is a single block (use chunk -1)";
  }
  w = alias(rank, {ref.buf, index});
  return "";
}

std::string Checker::checkStep(const LaneRun& l, size_t s, Where& src, Where& dst) const {
  const Step& step = l.spec->steps[s];
  const LaneSpec& lane = *l.spec;
  if (opSends(step.op) && step.sendConn >= lane.sendPeers.size())
    return "sends on connection " + std::to_string(step.sendConn) + " of a lane with " +
           std::to_string(lane.sendPeers.size()) + " send peers";
  if (opReceives(step.op) && step.recvConn >= lane.recvPeers.size())
    return "receives on connection " + std::to_string(step.recvConn) + " of a lane with " +
           std::to_string(lane.recvPeers.size()) + " receive peers";
  if (reduces(step.op) && !reducing(q_.coll))
    return std::string("reduces, but ") + collName(q_.coll) + " has no reduction";
  if (step.flags & ~(kPre | kPost | kJoin | kDirect)) return "has unknown flags";
  if (step.flags & kDirect) {
    if (!directSendable(step.op))
      return std::string("sets kDirect on ") + opName(step.op) + ", which sends no user buffer";
    const BufRef& sent = step.op == Op::Send ? step.src : step.dst;
    if (sent.buf != Buf::In && sent.buf != Buf::Out)
      return "sets kDirect on a step whose sent span is not in the input or output";
  }
  if ((step.flags & (kPre | kPost)) && !reducing(q_.coll))
    return std::string("sets kPre/kPost, but ") + collName(q_.coll) + " has no reduction";
  if ((step.flags & kPre) && !readsSrc(step.op)) return "sets kPre on a step without a source";
  if ((step.flags & kPost) && !appliesPost(step.op))
    return "sets kPost, which this op does not apply (it writes no result)";
  std::string err;
  if (readsSrc(step.op) && !(err = locate(l.rank, lane, step.src, false, src)).empty()) return "source " + err;
  if (!readsSrc(step.op) && step.src.buf != Buf::None) return "has a source that the op ignores";
  bool wantsDst = writesDst(step.op) || (step.op == Op::RecvSend && step.dst.buf != Buf::None);
  if (wantsDst && !(err = locate(l.rank, lane, step.dst, true, dst)).empty()) return "destination " + err;
  if (!wantsDst && step.dst.buf != Buf::None) return "has a destination that the op ignores";
  return "";
}

int Checker::fifoOf(int from, int to, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& index) {
  auto key = std::make_tuple(from, to, int(lane.kind), lane.tag);
  auto it = index.find(key);
  if (it != index.end()) return it->second;
  fifos_.push_back(Fifo{{}, 0, {}, from, to, lane.kind, lane.tag});
  index[key] = int(fifos_.size() - 1);
  return int(fifos_.size() - 1);
}

std::string Checker::checkPeers(int r, size_t l, const LaneSpec& lane) const {
  std::string where = "rank " + std::to_string(r) + " lane " + std::to_string(l);
  if (lane.kind == ConnKind::None && (!lane.sendPeers.empty() || !lane.recvPeers.empty()))
    return where + " has peers but connection kind none";
  for (const auto* peers : {&lane.sendPeers, &lane.recvPeers}) {
    if (peers->size() > 256) return where + " has more than 256 peers on one side (steps index them with 8 bits)";
    for (int p : *peers)
      if (p < 0 || p >= n_ || p == r)
        return where + " names peer " + std::to_string(p) + ", which is not another rank of " + std::to_string(n_);
  }
  if (lane.scratchChunks < 0 || lane.scratchChunks > 65536) return where + " has an invalid scratchChunks";
  return "";
}

std::string Checker::bindLanes() {
  std::map<std::tuple<int, int, int, int>, int> fifoIndex;
  groups_.assign(size_t(n_), {});
  groupHead_.assign(size_t(n_), {});
  for (int r = 0; r < n_; r++) {
    base_.push_back(int(lanes_.size()));
    const RankPlan& plan = plans_[size_t(r)];
    std::map<std::tuple<int, int, int, int>, int> connGroup;  // (peer, kind, tag, direction) -> queue
    for (size_t l = 0; l < plan.lanes.size(); l++) {
      const LaneSpec& lane = plan.lanes[l];
      std::string err = checkPeers(r, l, lane);
      if (!err.empty()) return err;
      LaneRun run;
      run.rank = r;
      run.lane = int(l);
      run.spec = &lane;
      for (int p : lane.sendPeers) run.sendFifo.push_back(fifoOf(r, p, lane, fifoIndex));
      for (int p : lane.recvPeers) run.recvFifo.push_back(fifoOf(p, r, lane, fifoIndex));
      run.src.resize(lane.steps.size());
      run.dst.resize(lane.steps.size());
      for (size_t s = 0; s < lane.steps.size(); s++) {
        err = checkStep(run, s, run.src[s], run.dst[s]);
        if (!err.empty()) return stepName(run, s, false) + ": " + err;
      }
      size_t bad = 0;
      if (!(err = joinProblem(lane, &bad)).empty()) return stepName(run, bad, false) + ": " + err;
      run.group = queueOf(r, lane, connGroup);
      groups_[size_t(r)][size_t(run.group)].push_back(int(lanes_.size()));
      lanes_.push_back(std::move(run));
    }
    groupHead_[size_t(r)].assign(groups_[size_t(r)].size(), 0);
  }
  return "";
}

int Checker::queueOf(int r, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& connGroup) {
  auto& groups = groups_[size_t(r)];
  int g = -1;
  auto visit = [&](int peer, int dir) {
    auto key = std::make_tuple(peer, int(lane.kind), lane.tag, dir);
    auto it = connGroup.find(key);
    if (it == connGroup.end()) return;
    int h = it->second;
    if (g < 0 || g == h) {
      g = h;
      return;
    }
    // Merge queue h into g, keeping plan order (lane ids grow with plan order).
    auto& a = groups[size_t(g)];
    a.insert(a.end(), groups[size_t(h)].begin(), groups[size_t(h)].end());
    std::sort(a.begin(), a.end());
    groups[size_t(h)].clear();
    for (int id : a) lanes_[size_t(id)].group = g;
    for (auto& [k, v] : connGroup)
      if (v == h) v = g;
  };
  for (int p : lane.sendPeers) visit(p, 0);
  for (int p : lane.recvPeers) visit(p, 1);
  if (g < 0) {
    g = int(groups.size());
    groups.emplace_back();
  }
  for (int p : lane.sendPeers) connGroup[std::make_tuple(p, int(lane.kind), lane.tag, 0)] = g;
  for (int p : lane.recvPeers) connGroup[std::make_tuple(p, int(lane.kind), lane.tag, 1)] = g;
  return g;
}

std::string Checker::checkConflicts() const {
  for (int r = 0; r < n_; r++) {
    struct Touch {
      int lane;
      bool write;
    };
    std::unordered_map<int, std::vector<Touch>> slots;
    size_t end = r + 1 < n_ ? size_t(base_[size_t(r) + 1]) : lanes_.size();
    for (size_t id = size_t(base_[size_t(r)]); id < end; id++) {
      const LaneRun& l = lanes_[id];
      for (size_t s = 0; s < l.spec->steps.size(); s++) {
        const Step& step = l.spec->steps[s];
        bool skipped =
            step.op == Op::Copy && !step.flags && l.src[s].buf == l.dst[s].buf && l.src[s].index == l.dst[s].index;
        if (skipped) continue;
        if (readsSrc(step.op) && l.src[s].buf != Buf::Scratch)
          slots[int(l.src[s].buf) * 65536 + l.src[s].index].push_back({l.lane, false});
        if (l.dst[s].buf == Buf::In || l.dst[s].buf == Buf::Out)
          slots[int(l.dst[s].buf) * 65536 + l.dst[s].index].push_back({l.lane, true});
      }
    }
    int base = laneBase(r);
    for (auto& [slot, touches] : slots)
      for (const Touch& w : touches) {
        if (!w.write) continue;
        for (const Touch& t : touches)
          if (lanes_[size_t(base + t.lane)].group != lanes_[size_t(base + w.lane)].group)
            return "rank " + std::to_string(r) + " lanes " + std::to_string(w.lane) + " and " + std::to_string(t.lane) +
                   " may run at the same time, and lane " + std::to_string(w.lane) + " writes " +
                   bufName(Buf(slot / 65536)) + "[" + std::to_string(slot % 65536) + "] that lane " +
                   std::to_string(t.lane) + (t.write ? " writes" : " reads") + " (put dependent phases in one lane)";
        break;
      }
  }
  return "";
}

}  // namespace tutti::plan::verifier
