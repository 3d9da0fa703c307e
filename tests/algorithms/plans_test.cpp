// The built-in plans, run symbolically: every buffer slot holds the set of contributions it
// carries, reductions must combine disjoint sets, FIFOs hold two chunks (the
// fewest TUTTI_NSTEPS allows), and at the end every
// output must hold exactly what the collective promises, with no rank stuck.
#include <catch2/catch.hpp>

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "algorithms/builtin.h"

using namespace tutti::plan;

namespace {

using Contribution = std::pair<int, int>;  // (rank, chunk or block of that rank's input)
using Value = std::set<Contribution>;

struct RankState {
  RankPlan plan;
  std::map<std::pair<int, int>, Value> in, out;  // (buf chunk) -> value; chunk -1 for single
  std::vector<size_t> pc;                         // next step of each lane
};

// Symbolic run of one tile. fifos[(from, to)] carries values in order, two at a time.
constexpr size_t kFifoCapacity = 2;
std::string simulate(int n, const std::function<RankPlan(int)>& planOf, const std::function<Value(int, int)>& input,
                     int inChunks, std::vector<RankState>& ranks) {
  ranks.assign(size_t(n), {});
  for (int r = 0; r < n; r++) {
    ranks[size_t(r)].plan = planOf(r);
    ranks[size_t(r)].pc.assign(ranks[size_t(r)].plan.lanes.size(), 0);
    for (int c = -1; c < inChunks; c++) ranks[size_t(r)].in[{0, c}] = input(r, c);
  }
  std::map<std::pair<int, int>, std::deque<Value>> fifos;
  auto read = [&](RankState& s, const BufRef& ref) -> Value {
    auto& m = ref.buf == Buf::In ? s.in : s.out;
    return m[{0, ref.chunk}];
  };
  auto write = [&](RankState& s, const BufRef& ref, const Value& v) { s.out[{0, ref.chunk}] = v; };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; r++) {
      RankState& s = ranks[size_t(r)];
      for (size_t l = 0; l < s.plan.lanes.size(); l++) {
        const LaneSpec& lane = s.plan.lanes[l];
        while (s.pc[l] < lane.steps.size()) {
          const Step& step = lane.steps[s.pc[l]];
          bool recv = step.op != Op::Send && step.op != Op::Copy;
          bool send = step.op == Op::Send || step.op == Op::RecvSend || step.op == Op::RecvReduceSend || step.op == Op::RecvReduceCopySend;
          auto& in = fifos[{lane.recvPeer(), r}];
          auto& outq = fifos[{r, lane.sendPeer()}];
          if (recv && in.empty()) break;
          if (send && outq.size() >= kFifoCapacity) break;
          Value got = recv ? in.front() : Value{};
          Value result;
          switch (step.op) {
            case Op::Send: case Op::Copy: result = read(s, step.src); break;
            case Op::Recv: case Op::RecvSend: result = got; break;
            case Op::RecvReduceSend: case Op::RecvReduceCopy: case Op::RecvReduceCopySend: {
              Value own = read(s, step.src);
              for (const auto& c : own)
                if (got.count(c)) return "rank " + std::to_string(r) + " reduces contribution (" + std::to_string(c.first) + "," +
                                          std::to_string(c.second) + ") twice";
              result = got;
              result.insert(own.begin(), own.end());
              break;
            }
          }
          if (recv) in.pop_front();
          if (send) outq.push_back(result);
          if (step.dst.buf != Buf::None) write(s, step.dst, result);
          s.pc[l]++;
          progress = true;
        }
      }
    }
  }
  for (int r = 0; r < n; r++)
    for (size_t l = 0; l < ranks[size_t(r)].plan.lanes.size(); l++)
      if (ranks[size_t(r)].pc[l] < ranks[size_t(r)].plan.lanes[l].steps.size())
        return "rank " + std::to_string(r) + " lane " + std::to_string(l) + " is stuck at step " + std::to_string(ranks[size_t(r)].pc[l]) +
               " (deadlock or unmatched send): " + describe(ranks[size_t(r)].plan);
  for (auto& [edge, q] : fifos)
    if (!q.empty()) return "a FIFO from rank " + std::to_string(edge.first) + " to " + std::to_string(edge.second) + " holds unread data";
  return "";
}

Value all(int n, int chunk) {
  Value v;
  for (int q = 0; q < n; q++) v.insert({q, chunk});
  return v;
}
Value one(int rank, int chunk) { return Value{{rank, chunk}}; }
Value out(RankState& s, int chunk) { return s.out[{0, chunk}]; }

}  // namespace

TEST_CASE("ring plans meet their postconditions for 1 to 16 ranks", "[plans]") {
  for (int n = 1; n <= 16; n++) {
    INFO(n << " ranks");
    std::vector<RankState> s;
    // All-reduce: chunk c of the output holds every rank's chunk c.
    REQUIRE(simulate(n, [&](int r) { return ringAllReduce(r, n); }, [](int r, int c) { return one(r, c); }, n, s) == "");
    for (int r = 0; r < n; r++)
      for (int c = 0; c < n; c++) REQUIRE(out(s[size_t(r)], c) == all(n, c));
    // All-gather: block b of the output holds rank b's input.
    REQUIRE(simulate(n, [&](int r) { return ringAllGather(r, n); }, [](int r, int) { return one(r, 0); }, 0, s) == "");
    for (int r = 0; r < n; r++)
      for (int b = 0; b < n; b++) REQUIRE(out(s[size_t(r)], b) == one(b, 0));
    // Reduce-scatter: rank r's output holds every rank's block r.
    REQUIRE(simulate(n, [&](int r) { return ringReduceScatter(r, n); }, [](int r, int c) { return one(r, c); }, n, s) == "");
    for (int r = 0; r < n; r++) REQUIRE(out(s[size_t(r)], -1) == all(n, r));
    for (int root = 0; root < n; root += std::max(1, n / 3)) {
      INFO("root " << root);
      REQUIRE(simulate(n, [&](int r) { return ringBroadcast(r, n, root); }, [](int r, int) { return one(r, 0); }, 0, s) == "");
      for (int r = 0; r < n; r++) REQUIRE(out(s[size_t(r)], -1) == one(root, 0));
      REQUIRE(simulate(n, [&](int r) { return ringReduce(r, n, root); }, [](int, int) { return Value{}; }, 0, s) == "");
      REQUIRE(simulate(n, [&](int r) { return ringReduce(r, n, root); }, [](int r, int) { return one(r, 0); }, 0, s) == "");
      REQUIRE(out(s[size_t(root)], -1) == all(n, 0));
    }
  }
}

TEST_CASE("direct plans meet their postconditions for 1 to 16 ranks", "[plans]") {
  for (int n = 1; n <= 16; n++) {
    INFO(n << " ranks");
    std::vector<RankState> s;
    // All-to-all: block q of rank r's output is block r of rank q's input.
    REQUIRE(simulate(n, [&](int r) { return directAlltoAll(r, n); }, [](int r, int c) { return one(r, c); }, n, s) == "");
    for (int r = 0; r < n; r++)
      for (int q = 0; q < n; q++) REQUIRE(out(s[size_t(r)], q) == one(q, r));
    for (int root = 0; root < n; root += std::max(1, n / 3)) {
      REQUIRE(simulate(n, [&](int r) { return directGather(r, n, root); }, [](int r, int) { return one(r, 0); }, 0, s) == "");
      for (int q = 0; q < n; q++) REQUIRE(out(s[size_t(root)], q) == one(q, 0));
      REQUIRE(simulate(n, [&](int r) { return directScatter(r, n, root); }, [](int r, int c) { return one(r, c); }, n, s) == "");
      for (int r = 0; r < n; r++) REQUIRE(out(s[size_t(r)], -1) == one(root, r));
    }
  }
}

TEST_CASE("a plan with a missing receive is caught as stuck", "[plans]") {
  // A send whose peer never receives must be reported, so the checker can fail.
  std::vector<RankState> s;
  auto broken = [](int r) {
    RankPlan p = ringAllGather(r, 3);
    if (r == 1) p.lanes[0].steps.pop_back();  // rank 1 drops its last receive
    return p;
  };
  CHECK(simulate(3, broken, [](int r, int) { return one(r, 0); }, 0, s) != "");
}
