// The plan file loader: parse, instantiate every rank's plan, verify (format in plan_file.h).
#include "algorithms/plan_file.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "algorithms/verify.h"
#include "base/error.h"

namespace tutti::plan {
namespace {

constexpr int kMaxRanks = 4096;
constexpr size_t kMaxLine = size_t(1) << 20;
constexpr size_t kMaxSteps = 65536;
constexpr size_t kMaxLanes = 4096;
constexpr size_t kMaxTotalSteps = size_t(1) << 22;
constexpr size_t kMaxFile = size_t(64) << 20;

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::InvalidUsage, message); }

// Integer expressions over r and n, by recursive descent.
class Expression {
 public:
  Expression(const std::string& text, int r, int n) : s_(text), r_(r), n_(n) {}

  // The value, or throws with what was expected.
  int64_t evaluate() {
    int64_t v = sum();
    if (pos_ != s_.size()) fail("an operator or the end");
    return v;
  }

 private:
  const std::string& s_;
  int64_t r_, n_;
  size_t pos_ = 0;
  int depth_ = 0;

  [[noreturn]] void fail(const std::string& expected) {
    invalid("in expression \"" + s_ + "\" at character " + std::to_string(pos_ + 1) + ": expected " + expected);
  }
  static int64_t bounded(int64_t v) {
    if (v > (int64_t(1) << 31) || v < -(int64_t(1) << 31)) invalid("expression value out of range");
    return v;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  int64_t sum() {
    int64_t v = product();
    for (;;) {
      if (eat('+'))
        v = bounded(v + product());
      else if (eat('-'))
        v = bounded(v - product());
      else
        return v;
    }
  }
  int64_t product() {
    int64_t v = unary();
    for (;;) {
      char op = pos_ < s_.size() ? s_[pos_] : 0;
      if (op != '*' && op != '/' && op != '%') return v;
      pos_++;
      int64_t w = unary();
      if (op == '*') {
        v = bounded(v * w);
        continue;
      }
      if (w == 0) invalid("in expression \"" + s_ + "\": division by zero");
      v = op == '/' ? v / w : ((v % w) + (w < 0 ? -w : w)) % (w < 0 ? -w : w);
    }
  }
  int64_t unary() {
    if (++depth_ > 64) fail("less nesting");
    int64_t v = eat('-') ? -unary() : atom();
    depth_--;
    return v;
  }
  int64_t atom() {
    if (eat('(')) {
      int64_t v = sum();
      if (!eat(')')) fail("')'");
      return v;
    }
    if (eat('r')) return r_;
    if (eat('n')) return n_;
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') fail("a number, r, n or '('");
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') v = bounded(v * 10 + (s_[pos_++] - '0'));
    return v;
  }
};

// Parsed text, instantiated per rank later (expressions depend on r).
struct BufText {
  Buf buf = Buf::None;
  std::string chunk;  // empty: -1
};
struct StepText {
  Op op = Op::Copy;
  uint8_t flags = 0;
  BufText src, dst;
  std::string to = "0", from = "0";
  int line = 0;
};
struct LaneText {
  ConnKind kind = ConnKind::None;
  int tag = 0;
  std::vector<std::string> send, recv;
  Layout layout = Layout::Whole;
  int chunks = 0, scratch = 0;
  std::vector<StepText> steps;
  int line = 0;
};
struct RankText {
  std::vector<LaneText> lanes;
};
struct CollText {
  Coll coll = Coll::AllReduce;
  int root = 0;
  std::map<int, RankText> ranks;
  std::optional<RankText> any;
  int line = 0;
};
struct AlgorithmText {
  std::string name;
  int nranks = 0;
  bool deterministic = false;
  std::vector<CollText> colls;
  int line = 0;
};

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool parseColl(const std::string& s, Coll& c) {
  for (Coll x : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce, Coll::AlltoAll,
                 Coll::Gather, Coll::Scatter})
    if (s == collName(x)) {
      c = x;
      return true;
    }
  return false;
}

bool parseOp(const std::string& s, Op& op) {
  for (Op x : {Op::Send, Op::Recv, Op::RecvSend, Op::RecvReduceSend, Op::RecvReduceCopy, Op::RecvReduceCopySend,
               Op::Copy, Op::Reduce})
    if (s == opName(x)) {
      op = x;
      return true;
    }
  return false;
}

class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  void line(const std::string& raw) {
    line_++;
    if (raw.size() > kMaxLine) fail("lines of at most 1 MiB");
    std::string text = raw.substr(0, raw.find('#'));
    std::vector<std::string> w = words(text);
    if (w.empty()) return;
    const std::string& key = w[0];
    if (key == "algorithm") return startAlgorithm(w);
    if (algorithms_.empty()) fail("\"algorithm <name>\" first");
    if (key == "ranks") return setRanks(w);
    if (key == "deterministic") return setDeterministic(w);
    if (key == "coll") return startColl(w);
    if (key == "rank") return startRank(w);
    if (key == "lane") return startLane(w);
    Op op;
    if (parseOp(key, op)) return addStep(op, w);
    fail("a directive (algorithm, ranks, deterministic, coll, rank, lane) or a step op, not \"" + key + "\"");
  }

  [[noreturn]] void fail(const std::string& expected) const {
    invalid(origin_ + ":" + std::to_string(line_) + ": expected " + expected);
  }

  std::vector<AlgorithmText>& algorithms() { return algorithms_; }

 private:
  std::string origin_;
  int line_ = 0;
  std::vector<AlgorithmText> algorithms_;
  RankText* rank_ = nullptr;
  LaneText* lane_ = nullptr;

  AlgorithmText& algorithm() { return algorithms_.back(); }

  int integer(const std::string& s, int lo, int hi, const char* what) const {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      fail(std::string(what) + " as a number from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not \"" +
           s + "\"");
    int v = std::stoi(s);
    if (v < lo || v > hi)
      fail(std::string(what) + " from " + std::to_string(lo) + " to " + std::to_string(hi) + ", not " + s);
    return v;
  }

  void arity(const std::vector<std::string>& w, size_t count, const char* form) const {
    if (w.size() != count) fail(std::string("\"") + form + "\"");
  }

  void startAlgorithm(const std::vector<std::string>& w) {
    arity(w, 2, "algorithm <name>");
    if (w[1].size() > 64 || w[1].find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
      fail("an algorithm name of lower-case letters, digits, '_' and '-' (at most 64)");
    for (const AlgorithmText& a : algorithms_)
      if (a.name == w[1])
        fail("a new algorithm name: \"" + w[1] + "\" is already defined at line " + std::to_string(a.line));
    algorithms_.push_back({w[1], 0, false, {}, line_});
    rank_ = nullptr;
    lane_ = nullptr;
  }

  void setRanks(const std::vector<std::string>& w) {
    arity(w, 2, "ranks <n>");
    if (!algorithm().colls.empty()) fail("\"ranks\" before the first \"coll\"");
    algorithm().nranks = integer(w[1], 1, kMaxRanks, "a rank count");
  }

  void setDeterministic(const std::vector<std::string>& w) {
    arity(w, 2, "deterministic yes|no");
    if (w[1] != "yes" && w[1] != "no") fail("\"deterministic yes\" or \"deterministic no\"");
    algorithm().deterministic = w[1] == "yes";
  }

  void startColl(const std::vector<std::string>& w) {
    if (w.size() != 2 && !(w.size() == 4 && w[2] == "root")) fail("\"coll <collective> [root <r>]\"");
    if (algorithm().nranks == 0) fail("\"ranks <n>\" before the first \"coll\"");
    CollText c;
    if (!parseColl(w[1], c.coll))
      fail("a collective (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter), not \"" +
           w[1] + "\"");
    if (w.size() == 4) c.root = integer(w[3], 0, algorithm().nranks - 1, "a root");
    for (const CollText& other : algorithm().colls)
      if (other.coll == c.coll)
        fail(std::string("one section per collective: ") + w[1] + " is already at line " + std::to_string(other.line));
    c.line = line_;
    algorithm().colls.push_back(std::move(c));
    rank_ = nullptr;
    lane_ = nullptr;
  }

  void startRank(const std::vector<std::string>& w) {
    arity(w, 2, "rank <r> or rank *");
    if (algorithm().colls.empty()) fail("\"coll <collective>\" before \"rank\"");
    CollText& c = algorithm().colls.back();
    if (w[1] == "*") {
      if (c.any) fail("one \"rank *\" per collective");
      c.any.emplace();
      rank_ = &*c.any;
    } else {
      int r = integer(w[1], 0, algorithm().nranks - 1, "a rank");
      if (c.ranks.count(r)) fail("one section per rank: rank " + w[1] + " appears twice");
      rank_ = &c.ranks[r];
    }
    lane_ = nullptr;
  }

  void startLane(const std::vector<std::string>& w) {
    if (!rank_) fail("\"rank <r>\" before \"lane\"");
    if (rank_->lanes.size() >= kMaxLanes) fail("at most " + std::to_string(kMaxLanes) + " lanes per rank");
    LaneText lane;
    lane.line = line_;
    for (size_t i = 1; i < w.size(); i++) {
      size_t eq = w[i].find('=');
      if (eq == std::string::npos) fail("key=value in a lane, not \"" + w[i] + "\"");
      std::string key = w[i].substr(0, eq), value = w[i].substr(eq + 1);
      if (key == "kind") {
        if (value == "none")
          lane.kind = ConnKind::None;
        else if (value == "ring")
          lane.kind = ConnKind::Ring;
        else if (value == "direct")
          lane.kind = ConnKind::Direct;
        else
          fail("kind=none|ring|direct");
      } else if (key == "tag") {
        lane.tag = integer(value, 0, 65535, "a tag");
      } else if (key == "send" || key == "recv") {
        auto& peers = key == "send" ? lane.send : lane.recv;
        std::istringstream list(value);
        for (std::string p; std::getline(list, p, ',');) {
          if (p.empty()) fail("a peer expression between commas");
          peers.push_back(p);
        }
        if (peers.size() > 256) fail("at most 256 peers per side of a lane");
      } else if (key == "layout") {
        if (value == "split")
          lane.layout = Layout::Split;
        else if (value == "blocks")
          lane.layout = Layout::Blocks;
        else if (value == "whole")
          lane.layout = Layout::Whole;
        else
          fail("layout=split|blocks|whole");
      } else if (key == "chunks") {
        lane.chunks = integer(value, 0, 65536, "chunks");
      } else if (key == "scratch") {
        lane.scratch = integer(value, 0, 65536, "scratch");
      } else {
        fail("a lane key (kind, tag, send, recv, layout, chunks, scratch), not \"" + key + "\"");
      }
    }
    rank_->lanes.push_back(std::move(lane));
    lane_ = &rank_->lanes.back();
  }

  BufText buffer(const std::string& s) const {
    BufText b;
    std::string name = s.substr(0, s.find('['));
    if (name == "-" && s == "-") return b;
    if (name == "in")
      b.buf = Buf::In;
    else if (name == "out")
      b.buf = Buf::Out;
    else if (name == "scratch")
      b.buf = Buf::Scratch;
    else
      fail("a buffer (in, out, scratch[<expr>] or -), not \"" + s + "\"");
    if (name.size() == s.size()) {
      if (b.buf == Buf::Scratch) fail("scratch[<expr>]");
      return b;
    }
    if (s.back() != ']' || s.size() < name.size() + 3) fail("<buffer>[<expr>], not \"" + s + "\"");
    b.chunk = s.substr(name.size() + 1, s.size() - name.size() - 2);
    return b;
  }

  void addStep(Op op, const std::vector<std::string>& w) {
    if (!lane_) fail("\"lane ...\" before a step");
    if (lane_->steps.size() >= kMaxSteps) fail("at most " + std::to_string(kMaxSteps) + " steps per lane");
    StepText step;
    step.op = op;
    step.line = line_;
    for (size_t i = 1; i < w.size(); i++) {
      if (w[i] == "pre") {
        step.flags |= kPre;
        continue;
      }
      if (w[i] == "post") {
        step.flags |= kPost;
        continue;
      }
      if (w[i] == "join") {
        step.flags |= kJoin;
        continue;
      }
      if (w[i] == "direct") {
        step.flags |= kDirect;
        continue;
      }
      size_t eq = w[i].find('=');
      std::string key = w[i].substr(0, eq), value = eq == std::string::npos ? "" : w[i].substr(eq + 1);
      if (eq == std::string::npos || value.empty())
        fail("pre, post, join, direct, src=, dst=, to= or from= in a step, not \"" + w[i] + "\"");
      if (key == "src")
        step.src = buffer(value);
      else if (key == "dst")
        step.dst = buffer(value);
      else if (key == "to")
        step.to = value;
      else if (key == "from")
        step.from = value;
      else
        fail("pre, post, join, direct, src=, dst=, to= or from= in a step, not \"" + w[i] + "\"");
    }
    lane_->steps.push_back(std::move(step));
  }
};

// Evaluates an expression of the plan text for one rank; errors name file:line.
int evaluate(const std::string& text, int r, int n, const std::string& origin, int line, int64_t lo, int64_t hi,
             const char* what) {
  int64_t v;
  try {
    v = Expression(text, r, n).evaluate();
  } catch (const Error& e) {
    invalid(origin + ":" + std::to_string(line) + ": for rank " + std::to_string(r) + ": " + e.message());
  }
  if (v < lo || v > hi)
    invalid(origin + ":" + std::to_string(line) + ": for rank " + std::to_string(r) + ": " + what + " \"" + text +
            "\" is " + std::to_string(v) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return int(v);
}

RankPlan instantiate(const AlgorithmText& a, const RankText& rank, int r, const std::string& origin) {
  RankPlan plan{a.name, {}};
  int n = a.nranks;
  for (const LaneText& t : rank.lanes) {
    LaneSpec lane;
    lane.kind = t.kind;
    lane.tag = t.tag;
    lane.layout = t.layout;
    lane.tileChunks = t.chunks;
    lane.scratchChunks = t.scratch;
    for (const std::string& p : t.send) lane.sendPeers.push_back(evaluate(p, r, n, origin, t.line, 0, n - 1, "peer"));
    for (const std::string& p : t.recv) lane.recvPeers.push_back(evaluate(p, r, n, origin, t.line, 0, n - 1, "peer"));
    for (const StepText& s : t.steps) {
      auto ref = [&](const BufText& b) {
        BufRef ref{b.buf, -1};
        if (!b.chunk.empty()) ref.chunk = evaluate(b.chunk, r, n, origin, s.line, -1, 65535, "chunk");
        return ref;
      };
      Step step{s.op, s.flags, ref(s.src), ref(s.dst), 0, 0};
      step.sendConn = uint8_t(evaluate(s.to, r, n, origin, s.line, 0, 255, "to"));
      step.recvConn = uint8_t(evaluate(s.from, r, n, origin, s.line, 0, 255, "from"));
      lane.steps.push_back(step);
    }
    plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

// Every rank's plan of one collective, checked for size.
std::vector<RankPlan> plansOf(const AlgorithmText& a, const CollText& c, const std::string& origin) {
  std::vector<RankPlan> plans;
  size_t total = 0;
  for (int r = 0; r < a.nranks; r++) {
    auto it = c.ranks.find(r);
    if (it == c.ranks.end() && !c.any)
      invalid(origin + ":" + std::to_string(c.line) + ": algorithm " + a.name + " " + collName(c.coll) +
              " has no plan for rank " + std::to_string(r) + " (add \"rank " + std::to_string(r) + "\" or \"rank *\")");
    const RankText& text = it != c.ranks.end() ? it->second : *c.any;
    total += text.lanes.size();
    for (const LaneText& lane : text.lanes) total += lane.steps.size();
    if (total > kMaxTotalSteps)
      invalid(origin + ": algorithm " + a.name + " " + collName(c.coll) + " has more than " +
              std::to_string(kMaxTotalSteps) + " lanes and steps over all ranks");
    plans.push_back(instantiate(a, text, r, origin));
  }
  return plans;
}

struct CollPlans {
  Coll coll;
  int root;
  std::vector<RankPlan> plans;
};

Algorithm accept(const AlgorithmText& a, const std::string& origin) {
  if (a.nranks == 0) invalid(origin + ":" + std::to_string(a.line) + ": algorithm " + a.name + " has no \"ranks <n>\"");
  if (a.colls.empty())
    invalid(origin + ":" + std::to_string(a.line) + ": algorithm " + a.name + " has no \"coll\" section");
  auto all = std::make_shared<std::vector<CollPlans>>();
  Algorithm algorithm;
  algorithm.name = a.name;
  algorithm.deterministic = a.deterministic;
  algorithm.origin = origin;
  for (const CollText& c : a.colls) {
    all->push_back({c.coll, c.root, plansOf(a, c, origin)});
    const std::vector<RankPlan>& plans = all->back().plans;
    VerifyRequest q;
    q.coll = c.coll;
    q.nranks = a.nranks;
    q.root = c.root;
    q.planOf = [&](int r) { return plans[size_t(r)]; };
    for (bool inPlace : {false, true}) {
      q.inPlace = inPlace;
      std::string err = verify(q);
      if (!err.empty())
        invalid(origin + ":" + std::to_string(c.line) + ": algorithm " + a.name + " " + collName(c.coll) +
                " is wrong " + (inPlace ? "in place" : "out of place") + ": " + err);
    }
    algorithm.colls.push_back(c.coll);
  }
  int nranks = a.nranks;
  std::string name = a.name;
  algorithm.build = [all, nranks, name, origin](const PlanRequest& q) {
    for (const CollPlans& c : *all) {
      if (c.coll != q.coll) continue;
      bool rooted = rootedColl(q.coll);
      if (q.nranks != nranks || (rooted && q.root != c.root))
        invalid("algorithm " + name + " from " + origin + " is written for " + std::to_string(nranks) + " ranks" +
                (rooted ? " and root " + std::to_string(c.root) : "") + ", not " + std::to_string(q.nranks) + " ranks" +
                (rooted ? " and root " + std::to_string(q.root) : ""));
      return c.plans[size_t(q.rank)];
    }
    invalid("algorithm " + name + " from " + origin + " has no plan for " + collName(q.coll));
  };
  return algorithm;
}

}  // namespace

std::vector<Algorithm> parsePlanText(const std::string& text, const std::string& origin) {
  Parser parser(origin);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    parser.line(text.substr(start, end - start));
    start = end + 1;
  }
  std::vector<Algorithm> algorithms;
  for (const AlgorithmText& a : parser.algorithms()) algorithms.push_back(accept(a, origin));
  if (algorithms.empty()) invalid(origin + ": no algorithm in the file (expected \"algorithm <name>\")");
  return algorithms;
}

std::vector<Algorithm> loadPlanFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) invalid("cannot open plan file " + path);
  std::string text;
  char buffer[1 << 16];
  while (file.read(buffer, sizeof buffer) || file.gcount() > 0) {
    text.append(buffer, size_t(file.gcount()));
    if (text.size() > kMaxFile) invalid("plan file " + path + " is larger than 64 MiB");
  }
  return parsePlanText(text, path);
}

std::vector<Algorithm> loadPlanFiles(const std::string& list) {
  std::vector<Algorithm> all;
  std::istringstream in(list);
  for (std::string path; std::getline(in, path, ':');) {
    if (path.empty()) continue;
    std::vector<Algorithm> some = loadPlanFile(path);
    all.insert(all.end(), some.begin(), some.end());
  }
  return all;
}

}  // namespace tutti::plan
