// The plan verifier: a symbolic run of every rank's plan (see verify.h for the model).
#include "algorithms/verify.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

#include "base/error.h"

namespace tutti::plan {
namespace {

// A set of ranks. Up to 256 ranks it lives inline: values are copied at every step.
class Bits {
 public:
  Bits() : words_(0) {}
  explicit Bits(size_t words) : words_(words) {
    if (words > kInline) large_.assign(words, 0);
  }
  size_t size() const { return words_; }
  uint64_t* data() { return words_ > kInline ? large_.data() : small_.data(); }
  const uint64_t* data() const { return words_ > kInline ? large_.data() : small_.data(); }
  uint64_t& operator[](size_t i) { return data()[i]; }
  uint64_t operator[](size_t i) const { return data()[i]; }
  bool operator==(const Bits& o) const { return words_ == o.words_ && std::equal(data(), data() + words_, o.data()); }

 private:
  static constexpr size_t kInline = 4;
  std::array<uint64_t, kInline> small_{};
  std::vector<uint64_t> large_;
  size_t words_;
};

bool test(const Bits& b, int i) { return (b[size_t(i) / 64] >> (i % 64)) & 1; }
void set(Bits& b, int i) { b[size_t(i) / 64] |= uint64_t(1) << (i % 64); }
bool intersects(const Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); i++)
    if (a[i] & b[i]) return true;
  return false;
}
void unite(Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); i++) a[i] |= b[i];
}

// "{0-3,5}"
std::string rankSet(const Bits& b, int n) {
  std::string s;
  for (int i = 0; i < n;) {
    if (!test(b, i)) { i++; continue; }
    int j = i;
    while (j + 1 < n && test(b, j + 1)) j++;
    s += (s.empty() ? "" : ",") + std::to_string(i) + (j > i + 1 ? "-" : j > i ? "," : "") + (j > i ? std::to_string(j) : "");
    i = j + 1;
  }
  return "{" + s + "}";
}

// One chunk's symbolic content. tile < 0: nothing was written there.
struct Value {
  int tile = -1;
  int index = 0;  // chunk (Split) or block (Blocks) of the tile that the contributions come from
  Bits ranks;     // whose contributions it holds
  Bits pre;       // on which of them the pre-operation was applied
  bool post = false;
};

bool samePiece(const Value& a, const Value& b) { return a.tile == b.tile && a.index == b.index; }

bool reducing(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }
bool pointToPoint(Coll c) { return c == Coll::Send || c == Coll::Recv; }

bool multiBlock(Coll c, Buf b) {
  switch (c) {
    case Coll::AllGather: case Coll::Gather: return b == Buf::Out;
    case Coll::ReduceScatter: case Coll::Scatter: return b == Buf::In;
    case Coll::AlltoAll: return true;
    default: return false;
  }
}

bool hasBuffer(Coll c, Buf b, int rank, int root) {
  switch (c) {
    case Coll::Reduce: case Coll::Gather: return b == Buf::In || rank == root;
    case Coll::Broadcast: case Coll::Scatter: return b == Buf::Out || rank == root;
    default: return true;
  }
}

bool needsRecv(Op op) { return op != Op::Send && op != Op::Copy && op != Op::Reduce; }
bool needsSend(Op op) { return op == Op::Send || op == Op::RecvSend || op == Op::RecvReduceSend || op == Op::RecvReduceCopySend; }
bool reduces(Op op) { return op == Op::RecvReduceSend || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Reduce; }
bool readsSrc(Op op) { return op == Op::Send || op == Op::Copy || reduces(op); }
bool writesDst(Op op) { return op == Op::Recv || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Copy || op == Op::Reduce; }
bool appliesPost(Op op) { return op == Op::Copy || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Reduce; }

const char* bufName(Buf b) { return b == Buf::In ? "in" : b == Buf::Out ? "out" : b == Buf::Scratch ? "scratch" : "none"; }
const char* kindName(ConnKind k) { return k == ConnKind::Ring ? "ring" : k == ConnKind::Direct ? "direct" : "none"; }

// A buffer location within a tile, after in-place aliasing.
struct Where {
  Buf buf = Buf::None;
  int index = 0;
};

// A value in a FIFO. The first value of a message says how many parts (joined steps) it has and
// which step sent it; the others have parts 0.
struct Entry {
  Value value;
  int parts = 0;
  int rank = 0, lane = 0;
  size_t step = 0;
};

// A queue of values; slots are allocated on the first send (most FIFOs of a large all-to-all are
// used once), `capacity` of them, more when joined messages need them.
class Queue {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  const Entry& front() const { return slots_[head_]; }
  void pop_front() {
    head_ = (head_ + 1) % slots_.size();
    count_--;
  }
  void push_back(const Entry& v, size_t capacity) {
    if (count_ == slots_.size()) {
      std::vector<Entry> grown(std::max(capacity, 2 * slots_.size()));
      for (size_t i = 0; i < count_; i++) grown[i] = slots_[(head_ + i) % slots_.size()];
      slots_ = std::move(grown);
      head_ = 0;
    }
    slots_[(head_ + count_++) % slots_.size()] = v;
  }

 private:
  std::vector<Entry> slots_;
  size_t head_ = 0, count_ = 0;
};

struct Fifo {
  Queue data;
  int messages = 0;  // in the queue; at most the FIFO's capacity (a joined run is one)
  std::vector<int> waiters;  // lanes to wake when the FIFO changes
  int from, to;
  ConnKind kind;
  int tag;
};

struct LaneRun {
  int rank = 0, lane = 0;
  const LaneSpec* spec = nullptr;
  std::vector<int> sendFifo, recvFifo;  // per peer index
  std::vector<Where> src, dst;          // per step
  std::vector<Value> scratch;
  int group = 0;  // the rank's queue of lanes sharing connections
  int tile = 0;
  size_t step = 0;
  bool done = false;
};

class Checker {
 public:
  explicit Checker(const VerifyRequest& q) : q_(q), n_(q.nranks), words_(size_t((q.nranks + 63) / 64)) {}

  std::string run() {
    if (n_ < 1) return "a collective needs at least one rank";
    if (q_.fifoCapacity < 1 || q_.tiles < 1) return "FIFO capacity and tiles must be at least 1";
    if (!pointToPoint(q_.coll) && (q_.root < 0 || q_.root >= n_))
      return "root " + std::to_string(q_.root) + " is not a rank of " + std::to_string(n_);
    plans_.resize(size_t(n_));
    for (int r = 0; r < n_; r++) plans_[size_t(r)] = q_.planOf(r);
    std::string err;
    if (!(err = geometry()).empty() || !(err = bindLanes()).empty() || !(err = checkJoinWidths()).empty() || !(err = checkSize()).empty() ||
        !(err = checkConflicts()).empty())
      return err;
    initBuffers();
    if (!(err = simulate()).empty() || !(err = checkDrained()).empty()) return err;
    return checkPostcondition();
  }

 private:
  const VerifyRequest& q_;
  int n_;
  size_t words_;
  std::vector<RankPlan> plans_;
  Layout layout_ = Layout::Whole;
  int chunks_ = 1;  // Split: chunks per tile
  std::vector<LaneRun> lanes_;
  std::vector<int> base_;  // rank -> id of its first lane
  std::vector<std::vector<std::vector<int>>> groups_;  // rank -> queue -> lane ids, in plan order
  std::vector<std::vector<size_t>> groupHead_;         // rank -> queue -> index of the running lane
  std::vector<Fifo> fifos_;
  std::vector<std::vector<Value>> in_, out_;  // per rank, tile * indices + index

  Bits none() const { return Bits(words_); }
  Bits everyone() const {
    Bits b = none();
    for (int i = 0; i < n_; i++) set(b, i);
    return b;
  }
  Bits only(int r) const {
    Bits b = none();
    set(b, r);
    return b;
  }

  int indices(Buf b) const {
    if (layout_ == Layout::Split) return chunks_;
    return layout_ == Layout::Blocks && multiBlock(q_.coll, b) ? n_ : 1;
  }

  std::string describeValue(const Value& v) const {
    if (v.tile < 0) return "nothing";
    std::string what = layout_ == Layout::Split ? "chunk " : layout_ == Layout::Blocks ? "block " : "piece ";
    std::string s = "(tile " + std::to_string(v.tile) + ", " + what + std::to_string(v.index) + ") of ranks " + rankSet(v.ranks, n_);
    if (reducing(q_.coll)) s += ", kPre on " + rankSet(v.pre, n_) + (v.post ? ", kPost applied" : ", no kPost");
    return s;
  }

  std::string stepName(const LaneRun& l, size_t s, bool withTile) const {
    const Step& step = l.spec->steps[s];
    std::string name = "rank " + std::to_string(l.rank) + " lane " + std::to_string(l.lane);
    if (withTile) name += " tile " + std::to_string(l.tile);
    name += " step " + std::to_string(s) + " (" + opName(step.op);
    if (needsRecv(step.op) && step.recvConn < l.spec->recvPeers.size())
      name += " from " + std::to_string(l.spec->recvPeers[step.recvConn]);
    if (needsSend(step.op) && step.sendConn < l.spec->sendPeers.size())
      name += " to " + std::to_string(l.spec->sendPeers[step.sendConn]);
    return name + ")";
  }

  // Every lane with steps must cut tiles the same way, or chunks would not line up.
  std::string geometry() {
    bool found = false;
    for (int r = 0; r < n_; r++)
      for (size_t l = 0; l < plans_[size_t(r)].lanes.size(); l++) {
        const LaneSpec& lane = plans_[size_t(r)].lanes[l];
        if (lane.steps.empty()) continue;
        if (lane.tileChunks < 0) return "rank " + std::to_string(r) + " lane " + std::to_string(l) + " has negative tileChunks";
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
        return std::string(collName(q_.coll)) + " needs the Blocks layout (its " + bufName(b) + " buffer has one block per rank)";
    return "";
  }

  // A rank cuts its chunk so that its widest joined run fits one FIFO slot: peers must agree.
  std::string checkJoinWidths() const {
    const size_t first = std::max<size_t>(1, joinWidth(plans_[0]));
    for (int r = 1; r < n_; r++) {
      size_t mine = std::max<size_t>(1, joinWidth(plans_[size_t(r)]));
      if (mine != first)
        return "rank " + std::to_string(r) + "'s widest joined run has " + std::to_string(mine) + " steps and rank 0's " +
               std::to_string(first) + ": chunks are cut so that the widest run fits one FIFO slot, so every rank's must be as wide";
    }
    return "";
  }

  // Symbolic values cost a bit per rank each: refuse what would not fit in memory.
  std::string checkSize() const {
    int64_t cells = int64_t(n_) * std::max(indices(Buf::In), indices(Buf::Out)) * q_.tiles;
    for (const LaneRun& l : lanes_) cells += l.spec->scratchChunks;
    if (cells * int64_t(words_ + 1) > (int64_t(1) << 24))
      return "the plans are too large to verify (" + std::to_string(cells) + " chunks of " + std::to_string(n_) + "-rank values)";
    return "";
  }

  Where alias(int rank, Where w) const {
    if (!q_.inPlace) return w;
    switch (q_.coll) {
      case Coll::AllReduce: case Coll::Broadcast: case Coll::Reduce:
        if (w.buf == Buf::Out && hasBuffer(q_.coll, Buf::In, rank, q_.root)) w.buf = Buf::In;
        return w;
      case Coll::AllGather: return w.buf == Buf::In ? Where{Buf::Out, rank} : w;
      case Coll::ReduceScatter: return w.buf == Buf::Out ? Where{Buf::In, rank} : w;
      case Coll::Gather: return w.buf == Buf::In && rank == q_.root ? Where{Buf::Out, rank} : w;
      case Coll::Scatter: return w.buf == Buf::Out && rank == q_.root ? Where{Buf::In, rank} : w;
      default: return w;
    }
  }

  // Where a reference points, or why it cannot be used.
  std::string locate(int rank, const LaneSpec& lane, BufRef ref, bool write, Where& w) const {
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

  std::string checkStep(const LaneRun& l, size_t s, Where& src, Where& dst) const {
    const Step& step = l.spec->steps[s];
    const LaneSpec& lane = *l.spec;
    if (needsSend(step.op) && step.sendConn >= lane.sendPeers.size())
      return "sends on connection " + std::to_string(step.sendConn) + " of a lane with " + std::to_string(lane.sendPeers.size()) + " send peers";
    if (needsRecv(step.op) && step.recvConn >= lane.recvPeers.size())
      return "receives on connection " + std::to_string(step.recvConn) + " of a lane with " + std::to_string(lane.recvPeers.size()) +
             " receive peers";
    if (reduces(step.op) && !reducing(q_.coll)) return std::string("reduces, but ") + collName(q_.coll) + " has no reduction";
    if (step.flags & ~(kPre | kPost | kJoin)) return "has unknown flags";
    if ((step.flags & (kPre | kPost)) && !reducing(q_.coll))
      return std::string("sets kPre/kPost, but ") + collName(q_.coll) + " has no reduction";
    if ((step.flags & kPre) && !readsSrc(step.op)) return "sets kPre on a step without a source";
    if ((step.flags & kPost) && !appliesPost(step.op)) return "sets kPost, which this op does not apply (it writes no result)";
    std::string err;
    if (readsSrc(step.op) && !(err = locate(l.rank, lane, step.src, false, src)).empty()) return "source " + err;
    if (!readsSrc(step.op) && step.src.buf != Buf::None) return "has a source that the op ignores";
    bool wantsDst = writesDst(step.op) || (step.op == Op::RecvSend && step.dst.buf != Buf::None);
    if (wantsDst && !(err = locate(l.rank, lane, step.dst, true, dst)).empty()) return "destination " + err;
    if (!wantsDst && step.dst.buf != Buf::None) return "has a destination that the op ignores";
    return "";
  }

  int fifoOf(int from, int to, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& index) {
    auto key = std::make_tuple(from, to, int(lane.kind), lane.tag);
    auto it = index.find(key);
    if (it != index.end()) return it->second;
    fifos_.push_back(Fifo{{}, 0, {}, from, to, lane.kind, lane.tag});
    index[key] = int(fifos_.size() - 1);
    return int(fifos_.size() - 1);
  }

  std::string checkPeers(int r, size_t l, const LaneSpec& lane) const {
    std::string where = "rank " + std::to_string(r) + " lane " + std::to_string(l);
    if (lane.kind == ConnKind::None && (!lane.sendPeers.empty() || !lane.recvPeers.empty()))
      return where + " has peers but connection kind none";
    for (const auto* peers : {&lane.sendPeers, &lane.recvPeers}) {
      if (peers->size() > 256) return where + " has more than 256 peers on one side (steps index them with 8 bits)";
      for (int p : *peers)
        if (p < 0 || p >= n_ || p == r) return where + " names peer " + std::to_string(p) + ", which is not another rank of " + std::to_string(n_);
    }
    if (lane.scratchChunks < 0 || lane.scratchChunks > 65536) return where + " has an invalid scratchChunks";
    return "";
  }

  // Lanes, their FIFOs and their static checks; queues of lanes that share a connection.
  std::string bindLanes() {
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

  // Lanes sharing any connection run one after another: merge their queues.
  int queueOf(int r, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& connGroup) {
    auto& groups = groups_[size_t(r)];
    int g = -1;
    auto visit = [&](int peer, int dir) {
      auto key = std::make_tuple(peer, int(lane.kind), lane.tag, dir);
      auto it = connGroup.find(key);
      if (it == connGroup.end()) return;
      int h = it->second;
      if (g < 0 || g == h) { g = h; return; }
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

  // Lanes that may run at the same time must not touch the same memory when one of them writes.
  std::string checkConflicts() const {
    for (int r = 0; r < n_; r++) {
      struct Touch { int lane; bool write; };
      std::unordered_map<int, std::vector<Touch>> slots;
      size_t end = r + 1 < n_ ? size_t(base_[size_t(r) + 1]) : lanes_.size();
      for (size_t id = size_t(base_[size_t(r)]); id < end; id++) {
        const LaneRun& l = lanes_[id];
        for (size_t s = 0; s < l.spec->steps.size(); s++) {
          const Step& step = l.spec->steps[s];
          bool skipped = step.op == Op::Copy && !step.flags && l.src[s].buf == l.dst[s].buf && l.src[s].index == l.dst[s].index;
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
                     " may run at the same time, and lane " + std::to_string(w.lane) + " writes " + bufName(Buf(slot / 65536)) +
                     "[" + std::to_string(slot % 65536) + "] that lane " + std::to_string(t.lane) + (t.write ? " writes" : " reads") +
                     " (put dependent phases in one lane)";
          break;
        }
    }
    return "";
  }

  int laneBase(int r) const { return base_[size_t(r)]; }

  std::vector<Value>& storage(int rank, Buf b) { return b == Buf::In ? in_[size_t(rank)] : out_[size_t(rank)]; }

  void initBuffers() {
    in_.assign(size_t(n_), {});
    out_.assign(size_t(n_), {});
    int tiles = q_.tiles;
    for (int r = 0; r < n_; r++) {
      for (Buf b : {Buf::In, Buf::Out})
        if (hasBuffer(q_.coll, b, r, q_.root)) storage(r, b).assign(size_t(tiles * indices(b)), Value{});
      if (!hasBuffer(q_.coll, Buf::In, r, q_.root)) continue;
      for (int t = 0; t < tiles; t++)
        for (int i = 0; i < indices(Buf::In); i++) {
          Where w = alias(r, {Buf::In, i});
          storage(r, w.buf)[size_t(t * indices(w.buf) + w.index)] = Value{t, i, only(r), none(), false};
        }
    }
  }

  Value& at(LaneRun& l, Where w) {
    if (w.buf == Buf::Scratch) return l.scratch[size_t(w.index)];
    return storage(l.rank, w.buf)[size_t(l.tile * indices(w.buf) + w.index)];
  }

  static std::string refName(Where w) { return std::string(bufName(w.buf)) + "[" + std::to_string(w.index) + "]"; }

  std::string combine(const Value& got, const Value& own, Value& result) const {
    if (!samePiece(got, own)) return "combines " + describeValue(got) + " with " + describeValue(own);
    if (got.post || own.post) return "reduces a value whose kPost was already applied";
    if (intersects(got.ranks, own.ranks)) {
      Bits both = got.ranks;
      for (size_t i = 0; i < both.size(); i++) both[i] &= own.ranks[i];
      return "reduces the contribution of ranks " + rankSet(both, n_) + " twice (" + describeValue(got) + " with " + describeValue(own) + ")";
    }
    result = got;
    unite(result.ranks, own.ranks);
    unite(result.pre, own.pre);
    return "";
  }

  // Runs one step of the lane's current tile, whose FIFOs have data and room; a send starts a
  // message of `parts` values, or continues one (0).
  std::string execute(LaneRun& l, int parts) {
    const Step& step = l.spec->steps[l.step];
    Where sw = l.src[l.step], dw = l.dst[l.step];
    if (step.op == Op::Copy && !step.flags && sw.buf == dw.buf && sw.index == dw.index) return "";  // skipped in place
    Fifo* rf = needsRecv(step.op) ? &fifos_[size_t(l.recvFifo[step.recvConn])] : nullptr;
    Value own;
    if (readsSrc(step.op)) {
      own = at(l, sw);
      if (own.tile < 0)
        return "reads " + refName(sw) + " before anything was written to it" + (sw.buf == Buf::Scratch ? " in this tile" : "");
    }
    if (step.flags & kPre) {
      if (own.ranks != only(l.rank))
        return "applies kPre to " + describeValue(own) + ", which is not rank " + std::to_string(l.rank) + "'s own contribution";
      if (intersects(own.pre, own.ranks)) return "applies kPre twice to rank " + std::to_string(l.rank) + "'s contribution";
      unite(own.pre, own.ranks);
    }
    Value result;
    switch (step.op) {
      case Op::Send: case Op::Copy: result = own; break;
      case Op::Recv: case Op::RecvSend: result = rf->data.front().value; break;
      case Op::Reduce: {
        // the accumulator in dst, then the source: dst = dst (op) src
        const Value acc = at(l, dw);
        if (acc.tile < 0) return "reduces into " + refName(dw) + " before anything was written to it";
        std::string err = combine(acc, own, result);
        if (!err.empty()) return err;
        break;
      }
      default: {
        std::string err = combine(rf->data.front().value, own, result);
        if (!err.empty()) return err;
      }
    }
    if (step.flags & kPost) {
      if (result.post) return "applies kPost twice";
      if (result.ranks != everyone()) return "applies kPost to a partial result, " + describeValue(result);
      result.post = true;
    }
    if (rf) {
      if (rf->data.front().parts > 0) rf->messages--;
      rf->data.pop_front();
      wake(*rf);
    }
    if (needsSend(step.op)) {
      Fifo& sf = fifos_[size_t(l.sendFifo[step.sendConn])];
      if (parts > 0) sf.messages++;
      sf.data.push_back(Entry{result, parts, l.rank, l.lane, l.step}, size_t(q_.fifoCapacity));
      wake(sf);
    }
    if (dw.buf != Buf::None) at(l, dw) = result;
    return "";
  }

  std::deque<int> work_;
  void wake(Fifo& f) {
    for (int id : f.waiters) work_.push_back(id);
    f.waiters.clear();
  }

  bool isHead(const LaneRun& l) const {
    const auto& queue = groups_[size_t(l.rank)][size_t(l.group)];
    return queue[groupHead_[size_t(l.rank)][size_t(l.group)]] == int(&l - lanes_.data());
  }

  void finish(LaneRun& l) {
    l.done = true;
    size_t& head = groupHead_[size_t(l.rank)][size_t(l.group)];
    const auto& queue = groups_[size_t(l.rank)][size_t(l.group)];
    if (++head < queue.size()) work_.push_back(queue[head]);
  }

  // Runs the lane until it blocks or ends.
  std::string advance(int id) {
    LaneRun& l = lanes_[size_t(id)];
    if (l.done || !isHead(l)) return "";
    if (l.spec->steps.empty()) {
      finish(l);
      return "";
    }
    if (l.scratch.empty() && l.spec->scratchChunks > 0) l.scratch.assign(size_t(l.spec->scratchChunks), Value{});
    for (;;) {
      // A joined run is one message: it waits for one whole message and one free slot, and runs
      // whole (as the executor does).
      const Step& step = l.spec->steps[l.step];
      const size_t parts = joinedRunLength(l.spec->steps, l.step);
      if (needsRecv(step.op)) {
        Fifo& f = fifos_[size_t(l.recvFifo[step.recvConn])];
        if (f.data.empty()) { f.waiters.push_back(id); return ""; }
        const Entry& m = f.data.front();
        if (size_t(m.parts) != parts)
          return stepName(l, l.step, true) + ": receives as " + std::to_string(parts) + " joined step(s) a message of " +
                 std::to_string(m.parts) + " part(s) that rank " + std::to_string(m.rank) + " lane " + std::to_string(m.lane) +
                 " step " + std::to_string(m.step) + " sent (message boundaries must match between sender and receiver)";
      }
      if (needsSend(step.op)) {
        Fifo& f = fifos_[size_t(l.sendFifo[step.sendConn])];
        if (f.messages >= q_.fifoCapacity) { f.waiters.push_back(id); return ""; }
      }
      for (size_t j = 0; j < parts; j++, l.step++) {
        std::string err = execute(l, j == 0 ? int(parts) : 0);
        if (!err.empty()) return stepName(l, l.step, true) + ": " + err;
      }
      if (l.step < l.spec->steps.size()) continue;
      l.step = 0;
      l.scratch.assign(l.scratch.size(), Value{});  // scratch does not outlive a tile
      if (++l.tile == q_.tiles) {
        finish(l);
        return "";
      }
    }
  }

  std::string simulate() {
    for (size_t r = 0; r < groups_.size(); r++)
      for (const auto& queue : groups_[r])
        if (!queue.empty()) work_.push_back(queue[0]);
    while (!work_.empty()) {
      int id = work_.front();
      work_.pop_front();
      std::string err = advance(id);
      if (!err.empty()) return err;
    }
    return stuckReport();
  }

  std::string stuckReport() const {
    int stuck = 0;
    const LaneRun* first = nullptr;
    for (const LaneRun& l : lanes_)
      if (!l.done) {
        stuck++;
        if (!first && isHead(l)) first = &l;
      }
    if (!stuck) return "";
    const LaneRun& l = *first;
    const Step& step = l.spec->steps[l.step];
    std::string why;
    if (needsRecv(step.op) && fifos_[size_t(l.recvFifo[step.recvConn])].data.empty())
      why = "waits for data from rank " + std::to_string(l.spec->recvPeers[step.recvConn]);
    else
      why = "waits for room in its FIFO to rank " + std::to_string(l.spec->sendPeers[step.sendConn]);
    return stepName(l, l.step, true) + " is stuck: it " + why + " (" + kindName(l.spec->kind) + " tag " + std::to_string(l.spec->tag) +
           "); " + std::to_string(stuck) + " lane(s) stuck in all (deadlock, or a send nobody receives)";
  }

  std::string checkDrained() const {
    for (const Fifo& f : fifos_)
      if (!f.data.empty())
        return "rank " + std::to_string(f.from) + " sent " + std::to_string(f.data.size()) + " chunk(s) to rank " + std::to_string(f.to) +
               " (" + kindName(f.kind) + " tag " + std::to_string(f.tag) + ") that nobody received";
    return "";
  }

  // What out[index] of the rank must hold at the end (tile < 0: unspecified).
  Value expected(int r, int tile, int index) const {
    Value v{tile, 0, none(), none(), false};
    switch (q_.coll) {
      case Coll::AllReduce: v.index = index; v.ranks = everyone(); break;
      case Coll::ReduceScatter: v.index = r; v.ranks = everyone(); break;
      case Coll::Reduce: v.ranks = everyone(); break;
      case Coll::AllGather: case Coll::Gather: v.ranks = only(index); break;
      case Coll::Broadcast: v.ranks = only(q_.root); break;
      case Coll::AlltoAll: v.index = r; v.ranks = only(index); break;
      case Coll::Scatter: v.index = r; v.ranks = only(q_.root); break;
      case Coll::Send: case Coll::Recv: v.ranks = only(((r - q_.root) % n_ + n_) % n_); break;
    }
    if (reducing(q_.coll)) {
      v.pre = v.ranks;
      v.post = true;
    }
    return v;
  }

  std::string checkPostcondition() {
    for (int r = 0; r < n_; r++) {
      if (!hasBuffer(q_.coll, Buf::Out, r, q_.root)) continue;
      for (int t = 0; t < q_.tiles; t++)
        for (int i = 0; i < indices(Buf::Out); i++) {
          Where w = alias(r, {Buf::Out, i});
          const Value& got = storage(r, w.buf)[size_t(t * indices(w.buf) + w.index)];
          Value want = expected(r, t, i);
          if (samePiece(got, want) && got.ranks == want.ranks && got.pre == want.pre && got.post == want.post) continue;
          std::string where = "rank " + std::to_string(r) + " out[" + std::to_string(i) + "] of tile " + std::to_string(t);
          if (samePiece(got, want) && got.ranks == want.ranks && got.pre != want.pre)
            return where + " misses kPre: it was applied on " + rankSet(got.pre, n_) + " of " + rankSet(want.ranks, n_);
          if (samePiece(got, want) && got.ranks == want.ranks) return where + " never had kPost applied";
          return where + " holds " + describeValue(got) + " where it should hold " + describeValue(want);
        }
    }
    return "";
  }
};

RankPlan pairPlan(const Algorithm& a, int rank, int nranks, int shift, int ranksPerNode) {
  int to = (rank + shift) % nranks, from = ((rank - shift) % nranks + nranks) % nranks;
  RankPlan plan = a.build(PlanRequest{Coll::Send, rank, nranks, to, ranksPerNode});
  RankPlan recv = a.build(PlanRequest{Coll::Recv, rank, nranks, from, ranksPerNode});
  plan.lanes.insert(plan.lanes.end(), recv.lanes.begin(), recv.lanes.end());
  return plan;
}

}  // namespace

std::string verify(const VerifyRequest& request) {
  try {
    return Checker(request).run();
  } catch (const std::exception& e) {
    return std::string("building a plan failed: ") + e.what();
  }
}

std::string verifyAlgorithm(const Algorithm& algorithm, Coll coll, int nranks, int root, int ranksPerNode, int fifoCapacity) {
  VerifyRequest q;
  q.coll = coll;
  q.nranks = nranks;
  q.root = root;
  q.fifoCapacity = fifoCapacity;
  if (pointToPoint(coll))
    q.planOf = [&](int r) { return pairPlan(algorithm, r, nranks, root, ranksPerNode); };
  else
    q.planOf = [&](int r) { return algorithm.build(PlanRequest{coll, r, nranks, root, ranksPerNode}); };
  for (bool inPlace : {false, true}) {
    if (inPlace && pointToPoint(coll)) continue;
    q.inPlace = inPlace;
    std::string err = verify(q);
    if (!err.empty())
      return algorithm.name + " " + collName(coll) + " on " + std::to_string(nranks) + " ranks, root " + std::to_string(root) +
             (inPlace ? ", in place" : ", out of place") + ": " + err;
  }
  return "";
}

}  // namespace tutti::plan
