// The plan verifier's inside: symbolic values (sets of contributions), FIFOs of them, lanes as
// they run, and the Checker that verify.cpp (the symbolic run) and verify_checks.cpp (the
// plans' well-formedness, before the run) share. See verify.h for the model.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/verify.h"

namespace tutti::plan::verifier {

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

inline bool test(const Bits& b, int i) { return (b[size_t(i) / 64] >> (i % 64)) & 1; }
inline void set(Bits& b, int i) { b[size_t(i) / 64] |= uint64_t(1) << (i % 64); }
inline bool intersects(const Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); i++)
    if (a[i] & b[i]) return true;
  return false;
}
inline void unite(Bits& a, const Bits& b) {
  for (size_t i = 0; i < a.size(); i++) a[i] |= b[i];
}

// "{0-3,5}"
inline std::string rankSet(const Bits& b, int n) {
  std::string s;
  for (int i = 0; i < n;) {
    if (!test(b, i)) {
      i++;
      continue;
    }
    int j = i;
    while (j + 1 < n && test(b, j + 1)) j++;
    s += (s.empty() ? "" : ",") + std::to_string(i) +
         (j > i + 1 ? "-"
          : j > i   ? ","
                    : "") +
         (j > i ? std::to_string(j) : "");
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
  bool sentDirect = false;  // in a buffer: a kDirect step sent it, so it may not be written again
};

inline bool samePiece(const Value& a, const Value& b) { return a.tile == b.tile && a.index == b.index; }

inline bool reducing(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }
inline bool pointToPoint(Coll c) { return c == Coll::Send || c == Coll::Recv; }

inline bool multiBlock(Coll c, Buf b) {
  switch (c) {
    case Coll::AllGather:
    case Coll::Gather: return b == Buf::Out;
    case Coll::ReduceScatter:
    case Coll::Scatter: return b == Buf::In;
    case Coll::AlltoAll: return true;
    default: return false;
  }
}

inline bool hasBuffer(Coll c, Buf b, int rank, int root) {
  switch (c) {
    case Coll::Reduce:
    case Coll::Gather: return b == Buf::In || rank == root;
    case Coll::Broadcast:
    case Coll::Scatter: return b == Buf::Out || rank == root;
    default: return true;
  }
}

inline bool reduces(Op op) {
  return op == Op::RecvReduceSend || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Reduce;
}
inline bool readsSrc(Op op) { return op == Op::Send || op == Op::Copy || reduces(op); }
inline bool writesDst(Op op) {
  return op == Op::Recv || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Copy ||
         op == Op::Reduce;
}
inline bool appliesPost(Op op) {
  return op == Op::Copy || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend || op == Op::Reduce;
}

inline const char* bufName(Buf b) {
  return b == Buf::In ? "in" : b == Buf::Out ? "out" : b == Buf::Scratch ? "scratch" : "none";
}
inline const char* kindName(ConnKind k) {
  return k == ConnKind::Ring ? "ring" : k == ConnKind::Direct ? "direct" : "none";
}

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
  int messages = 0;          // in the queue; at most the FIFO's capacity (a joined run is one)
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

  // "" when the plans are correct, else the first problem found.
  std::string run();

 private:
  const VerifyRequest& q_;
  int n_;
  size_t words_;
  std::vector<RankPlan> plans_;
  Layout layout_ = Layout::Whole;
  int chunks_ = 1;  // Split: chunks per tile
  std::vector<LaneRun> lanes_;
  std::vector<int> base_;                              // rank -> id of its first lane
  std::vector<std::vector<std::vector<int>>> groups_;  // rank -> queue -> lane ids, in plan order
  std::vector<std::vector<size_t>> groupHead_;         // rank -> queue -> index of the running lane
  std::vector<Fifo> fifos_;
  std::vector<std::vector<Value>> in_, out_;  // per rank, tile * indices + index
  std::deque<int> work_;                      // lanes that may advance

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
  int laneBase(int r) const { return base_[size_t(r)]; }
  std::vector<Value>& storage(int rank, Buf b) { return b == Buf::In ? in_[size_t(rank)] : out_[size_t(rank)]; }
  static std::string refName(Where w) { return std::string(bufName(w.buf)) + "[" + std::to_string(w.index) + "]"; }
  std::string describeValue(const Value& v) const;
  std::string stepName(const LaneRun& l, size_t s, bool withTile) const;

  // ---- before the run: the plans' well-formedness (verify_checks.cpp) ----

  // Every lane with steps must cut tiles the same way, or chunks would not line up.
  std::string geometry();
  // A rank cuts its chunk so that its widest joined run fits one FIFO slot: peers must agree.
  std::string checkJoinWidths() const;
  // Symbolic values cost a bit per rank each: refuse what would not fit in memory.
  std::string checkSize() const;
  // A location after the collective's in-place aliasing.
  Where alias(int rank, Where w) const;
  // Where a reference points, or why it cannot be used.
  std::string locate(int rank, const LaneSpec& lane, BufRef ref, bool write, Where& w) const;
  // A step's connections, flags and buffers, resolved into src and dst.
  std::string checkStep(const LaneRun& l, size_t s, Where& src, Where& dst) const;
  int fifoOf(int from, int to, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& index);
  std::string checkPeers(int r, size_t l, const LaneSpec& lane) const;
  // Lanes, their FIFOs and their static checks; queues of lanes that share a connection.
  std::string bindLanes();
  // Lanes sharing any connection run one after another: merge their queues.
  int queueOf(int r, const LaneSpec& lane, std::map<std::tuple<int, int, int, int>, int>& connGroup);
  // Lanes that may run at the same time must not touch the same memory when one of them writes.
  std::string checkConflicts() const;

  // ---- the symbolic run and its postcondition (verify.cpp) ----

  void initBuffers();
  Value& at(LaneRun& l, Where w);
  std::string combine(const Value& got, const Value& own, Value& result) const;
  // Runs one step of the lane's current tile, whose FIFOs have data and room; a send starts a
  // message of `parts` values, or continues one (0).
  std::string execute(LaneRun& l, int parts);
  void wake(Fifo& f);
  bool isHead(const LaneRun& l) const {
    const auto& queue = groups_[size_t(l.rank)][size_t(l.group)];
    return queue[groupHead_[size_t(l.rank)][size_t(l.group)]] == int(&l - lanes_.data());
  }
  void finish(LaneRun& l);
  // Runs the lane until it blocks or ends.
  std::string advance(int id);
  std::string simulate();
  std::string stuckReport() const;
  std::string checkDrained() const;
  // What out[index] of the rank must hold at the end (tile < 0: unspecified).
  Value expected(int r, int tile, int index) const;
  std::string checkPostcondition();
};

}  // namespace tutti::plan::verifier
