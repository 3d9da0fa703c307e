// The verifier rejects broken plans, each with the reason that names what is wrong.
#include <catch2/catch.hpp>

#include <chrono>

#include "algorithms/builtin.h"
#include "algorithms/verify.h"

using namespace tutti::plan;

namespace {

BufRef in(int c = -1) { return {Buf::In, c}; }
BufRef out(int c = -1) { return {Buf::Out, c}; }
BufRef none() { return {}; }

LaneSpec direct(std::vector<int> send, std::vector<int> recv, Layout layout = Layout::Whole, int tag = 0) {
  LaneSpec lane;
  lane.kind = ConnKind::Direct;
  lane.sendPeers = std::move(send);
  lane.recvPeers = std::move(recv);
  lane.layout = layout;
  lane.tag = tag;
  return lane;
}

std::string run(Coll coll, int n, std::function<RankPlan(int)> planOf, bool inPlace = false, int capacity = 2,
                int root = 0) {
  VerifyRequest q;
  q.coll = coll;
  q.nranks = n;
  q.root = root;
  q.planOf = std::move(planOf);
  q.inPlace = inPlace;
  q.fifoCapacity = capacity;
  return verify(q);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a missing send is reported as stuck", "[verify]") {
  std::string err = run(Coll::AllReduce, 3, [](int r) {
    RankPlan p = chainAllReduce(r, 3);
    if (r == 0) p.lanes[0].steps.erase(p.lanes[0].steps.begin());  // was: send in to 1
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 0 lane 0 tile 0 step 0 (recv-send from 2 to 1) is stuck: it waits for data from rank 2"));
  CHECK(has(err, "3 lane(s) stuck in all"));
}

TEST_CASE("a missing receive is reported as data nobody received or a stuck sender", "[verify]") {
  std::string err = run(Coll::AllGather, 3, [](int r) {
    RankPlan p = ringAllGather(r, 3);
    if (r == 1) p.lanes[0].steps.pop_back();
    return p;
  });
  INFO(err);
  CHECK((has(err, "is stuck") || has(err, "nobody received")));
}

TEST_CASE("a contribution reduced twice is reported", "[verify]") {
  // Rank 0 sends its input twice; rank 1 folds both copies into its sum.
  std::string err = run(Coll::AllReduce, 2, [](int r) {
    LaneSpec lane = direct({1 - r}, {1 - r});
    if (r == 0) {
      lane.steps = {{Op::Send, kPre, in(), none()}, {Op::Send, kPre, in(), none()}, {Op::Recv, 0, none(), out()}};
    } else {
      lane.steps = {{Op::RecvReduceCopy, kPre, in(), out()},
                    {Op::RecvReduceCopy, kPost, out(), out()},
                    {Op::Send, 0, out(), none()}};
    }
    return RankPlan{"test", {lane}};
  });
  INFO(err);
  CHECK(has(err, "rank 1 lane 0 tile 0 step 1 (recv-reduce-copy from 0): reduces the contribution of ranks {0} twice"));
}

TEST_CASE("a missing kPre is reported", "[verify]") {
  std::string err = run(Coll::AllReduce, 4, [](int r) {
    RankPlan p = ringAllReduce(r, 4);
    if (r == 2) p.lanes[0].steps[0].flags = 0;
    return p;
  });
  INFO(err);
  CHECK(has(err, "misses kPre: it was applied on {0,1,3} of {0-3}"));
}

TEST_CASE("a missing kPost and a kPost on a partial sum are reported", "[verify]") {
  CHECK(has(run(Coll::AllReduce, 1, [](int) { return ringAllReduce(0, 1); }), ""));
  std::string err = run(Coll::AllReduce, 1, [](int) {
    RankPlan p = ringAllReduce(0, 1);
    p.lanes[0].steps[0].flags = kPre;
    return p;
  });
  CHECK(has(err, "rank 0 out[0] of tile 0 never had kPost applied"));
  err = run(Coll::AllReduce, 3, [](int r) {
    RankPlan p = ringAllReduce(r, 3);
    if (r == 0) p.lanes[0].steps[0] = {Op::Copy, kPre | kPost, in(0), out(0)};
    return p;
  });
  CHECK(has(err, "rank 0 lane 0 tile 0 step 0 (copy): applies kPost to a partial result"));
}

TEST_CASE("a block written to the wrong place is reported", "[verify]") {
  std::string err = run(Coll::AllGather, 4, [](int r) {
    RankPlan p = ringAllGather(r, 4);
    if (r == 1) p.lanes[0].steps.back().dst = out(3);  // should be out[2]
    // (out[3] was sent directly before: without kDirect the write is allowed, and only the
    // postcondition finds it.)
    for (Step& step : p.lanes[0].steps) step.flags &= uint8_t(~kDirect);
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 1 out[2] of tile 0 holds nothing where it should hold (tile 0, block 0) of ranks {2}"));
}

TEST_CASE("reading a buffer the collective does not give the rank is reported", "[verify]") {
  std::string err = run(Coll::Reduce, 3, [](int r) {
    RankPlan p = ringReduce(r, 3, 0);
    if (r == 1) p.lanes[0].steps[0].src = out();
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 1 lane 0 step 0 (send to 2): source refers to out, which reduce does not give rank 1 (null)"));
  err = run(Coll::Broadcast, 3, [](int r) {
    RankPlan p = ringBroadcast(r, 3, 0);
    if (r == 2) p.lanes[0].steps[0] = {Op::Copy, 0, in(), out()};
    return p;
  });
  CHECK(has(err, "rank 2 lane 0 step 0 (copy): source refers to in, which broadcast does not give rank 2 (null)"));
}

TEST_CASE("scratch read before it is written in the tile is reported", "[verify]") {
  std::string err = run(Coll::AllReduce, 1, [](int) {
    LaneSpec lane;
    lane.scratchChunks = 1;
    lane.steps = {{Op::Copy, kPre | kPost, {Buf::Scratch, 0}, out()}, {Op::Copy, 0, in(), {Buf::Scratch, 0}}};
    return RankPlan{"test", {lane}};
  });
  CHECK(
      has(err, "rank 0 lane 0 tile 0 step 0 (copy): reads scratch[0] before anything was written to it in this tile"));
}

TEST_CASE("a plan that needs deeper FIFOs deadlocks at capacity 2 and passes at 8", "[verify]") {
  // Both ranks send a whole tile of four chunks before receiving any.
  auto plan = [](int r) {
    LaneSpec lane = direct({1 - r}, {1 - r}, Layout::Split);
    lane.tileChunks = 4;
    for (int k = 0; k < 4; k++) lane.steps.push_back({Op::Send, kPre, in(k), none()});
    for (int k = 0; k < 4; k++) lane.steps.push_back({Op::RecvReduceCopy, kPre | kPost, in(k), out(k)});
    return RankPlan{"test", {lane}};
  };
  std::string err = run(Coll::AllReduce, 2, plan, false, 2);
  CHECK(has(err, "rank 0 lane 0 tile 0 step 2 (send to 1) is stuck: it waits for room in its FIFO to rank 1"));
  CHECK(run(Coll::AllReduce, 2, plan, false, 8) == "");
}

TEST_CASE("lanes that may run together and touch the same memory are reported", "[verify]") {
  // Two lanes on different tags both write out[0].
  std::string err = run(Coll::AllReduce, 2, [](int r) {
    LaneSpec a = direct({1 - r}, {1 - r}, Layout::Split, 0), b = direct({1 - r}, {1 - r}, Layout::Split, 1);
    a.tileChunks = b.tileChunks = 2;
    a.steps = {{Op::Send, kPre, in(0), none()}, {Op::RecvReduceCopy, kPre | kPost, in(0), out(0)}};
    b.steps = {{Op::Send, kPre, in(1), none()}, {Op::RecvReduceCopy, kPre | kPost, in(1), out(0)}};
    return RankPlan{"test", {a, b}};
  });
  CHECK(has(err, "rank 0 lanes 0 and 1 may run at the same time"));
}

TEST_CASE("lanes sharing a connection run one after another, in plan order", "[verify]") {
  // Rank 0's lanes A (receive) and B (send) both hold the connection that sends to rank 1, so B
  // waits for all of A. Rank 1 receives before it sends: B first works, A first deadlocks.
  auto plan = [](bool sendFirst) {
    return [sendFirst](int r) {
      LaneSpec copy;
      copy.layout = Layout::Blocks;
      copy.steps = {{Op::Copy, 0, in(), out(r)}};
      if (r == 1) {
        LaneSpec lane = direct({0}, {0}, Layout::Blocks);
        lane.steps = {{Op::Recv, 0, none(), out(0)}, {Op::Send, 0, in(), none()}};
        return RankPlan{"test", {copy, lane}};
      }
      LaneSpec a = direct({1}, {1}, Layout::Blocks), b = direct({1}, {}, Layout::Blocks);
      a.steps = {{Op::Recv, 0, none(), out(1)}};
      b.steps = {{Op::Send, 0, in(), none()}};
      return RankPlan{"test", sendFirst ? std::vector<LaneSpec>{copy, b, a} : std::vector<LaneSpec>{copy, a, b}};
    };
  };
  CHECK(run(Coll::AllGather, 2, plan(true)) == "");
  std::string err = run(Coll::AllGather, 2, plan(false));
  CHECK(has(err, "rank 0 lane 1 tile 0 step 0 (recv from 1) is stuck: it waits for data from rank 1"));
}

TEST_CASE("a plan that is right out of place but clobbers its input in place is reported", "[verify]") {
  // Rank 0 receives into its output before it sends its input: in place, that overwrites it.
  auto plan = [](int r) {
    LaneSpec lane = direct({1 - r}, {1 - r});
    if (r == 0)
      lane.steps = {{Op::Recv, 0, none(), out()}, {Op::Send, kPre, in(), none()}, {Op::Recv, 0, none(), out()}};
    else
      lane.steps = {{Op::Send, kPre, in(), none()},
                    {Op::RecvReduceCopy, kPre | kPost, in(), out()},
                    {Op::Send, 0, out(), none()}};
    return RankPlan{"test", {lane}};
  };
  CHECK(run(Coll::AllReduce, 2, plan, false) == "");
  std::string err = run(Coll::AllReduce, 2, plan, true);
  CHECK(has(err, "rank 0 lane 0 tile 0 step 1 (send to 1): applies kPre to (tile 0, piece 0) of ranks {1}"));
}

TEST_CASE("chunks that do not line up are never combined", "[verify]") {
  // Each rank reduces the peer's chunk r with its own chunk r: different parts of the buffer.
  std::string err = run(Coll::AllReduce, 2, [](int r) {
    LaneSpec lane = direct({1 - r}, {1 - r}, Layout::Split);
    lane.tileChunks = 2;
    lane.steps = {{Op::Send, kPre, in(r), none()},
                  {Op::RecvReduceCopy, kPre | kPost, in(r), out(r)},
                  {Op::Send, 0, out(r), none()},
                  {Op::Recv, 0, none(), out(1 - r)}};
    return RankPlan{"test", {lane}};
  });
  INFO(err);
  CHECK(has(err, "rank 1 lane 0 tile 0 step 1 (recv-reduce-copy from 0): combines (tile 0, chunk 0) of ranks {0}"));
}

TEST_CASE("flags the executor ignores and bad connection indices are reported", "[verify]") {
  std::string err = run(Coll::AllReduce, 3, [](int r) {
    RankPlan p = ringAllReduce(r, 3);
    p.lanes[0].steps[0].flags = kPre | kPost;
    return p;
  });
  CHECK(has(err, "rank 0 lane 0 step 0 (send to 1): sets kPost, which this op does not apply"));
  err = run(Coll::AllGather, 3, [](int r) {
    RankPlan p = ringAllGather(r, 3);
    p.lanes[0].steps[1].sendConn = 1;
    return p;
  });
  CHECK(has(err, "sends on connection 1 of a lane with 1 send peers"));
  err = run(Coll::AllGather, 3, [](int r) {
    RankPlan p = ringAllGather(r, 3);
    p.lanes[0].steps[1].flags = kPre;
    return p;
  });
  CHECK(has(err, "sets kPre/kPost, but allgather has no reduction"));
}

TEST_CASE("the verifier is fast: every 64-rank ring all-reduce in well under a second", "[verify]") {
  auto start = std::chrono::steady_clock::now();
  CHECK(run(Coll::AllReduce, 64, [](int r) { return ringAllReduce(r, 64); }) == "");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("a local reduce into a buffer nothing wrote, or of a contribution it already holds, is reported",
          "[verify]") {
  // Oneshot's plan for rank 1 of 2 without the receive that fills out: its reduce starts from nothing.
  std::string err = run(Coll::AllReduce, 2, [](int r) {
    RankPlan p = oneshotAllReduce(r, 2);
    if (r == 1) {
      auto& steps = p.lanes[0].steps;
      for (size_t s = 0; s < steps.size(); s++)
        if (steps[s].op == Op::Recv) {
          steps.erase(steps.begin() + std::ptrdiff_t(s));
          break;
        }
    }
    return p;
  });
  INFO(err);
  CHECK(has(err, "(reduce): reduces into out"));
  CHECK(has(err, "before anything was written to it"));
  // Rank 0 reduces its own contribution into out twice.
  err = run(Coll::AllReduce, 2, [](int r) {
    RankPlan p = oneshotAllReduce(r, 2);
    if (r == 0) {
      auto& steps = p.lanes[0].steps;
      steps.insert(steps.end() - 1, Step{Op::Reduce, 0, {Buf::Scratch, 0}, out()});
    }
    return p;
  });
  INFO(err);
  CHECK(has(err, "reduces the contribution of ranks {0} twice"));
}

// Bruck's all-to-all at 4 ranks: step 0 copies; round 0 sends two blocks to r + 1 as one joined
// run (steps 1-2) and receives two from r - 1 (steps 3-4); round 1 likewise with r + 2 (5-8).
TEST_CASE("joined runs whose message boundaries differ between sender and receiver are reported", "[verify][join]") {
  REQUIRE(run(Coll::AlltoAll, 4, [](int r) { return bruckAlltoAll(r, 4); }) == "");
  std::string err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 1) p.lanes[0].steps[3].flags &= uint8_t(~kJoin);  // receives the two blocks as two messages
    return p;
  });
  INFO(err);
  CHECK(has(err,
            "rank 1 lane 0 tile 0 step 3 (recv from 0): receives as 1 joined step(s) a message of 2 part(s) that rank "
            "0 lane 0 "
            "step 1 sent (message boundaries must match between sender and receiver)"));
  err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 0) p.lanes[0].steps[1].flags &= uint8_t(~kJoin);  // sends them as two messages
    return p;
  });
  INFO(err);
  CHECK(has(err,
            "rank 1 lane 0 tile 0 step 3 (recv from 0): receives as 2 joined step(s) a message of 1 part(s) that rank "
            "0 lane 0 step 1 sent"));
}

TEST_CASE("malformed joined runs are reported, naming rank, lane and step", "[verify][join]") {
  std::string err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 0) p.lanes[0].steps[2].sendConn = 1;  // the run's second block to r + 2
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 0 lane 0 step 1 (send to 1): joins steps on different connections"));
  err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 2) p.lanes[0].steps.back().flags |= kJoin;
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 2 lane 0 step 8 (recv from 0): ends the lane with kJoin"));
  err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 3) p.lanes[0].steps[2].flags |= kJoin;  // the sends' run runs on into the receives
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 3 lane 0 step 2 (send to 0): joins a send with a recv"));
  err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 1) p.lanes[0].steps[0].flags |= kJoin;
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 1 lane 0 step 0 (copy): joins a local copy"));
  err = run(Coll::AlltoAll, 4, [](int r) {
    RankPlan p = bruckAlltoAll(r, 4);
    if (r == 2)
      for (Step& s : p.lanes[0].steps) s.flags &= uint8_t(~kJoin);
    return p;
  });
  INFO(err);
  CHECK(has(err, "rank 2's widest joined run has 1 steps and rank 0's 2"));
}

TEST_CASE("a joined run takes one FIFO slot however many steps it joins", "[verify][join]") {
  // Bruck's all-gather at 16 ranks joins 8 blocks in its last round: with one slot per FIFO it
  // still runs, each round's message filling the slot once.
  VerifyRequest q;
  q.coll = Coll::AllGather;
  q.nranks = 16;
  q.planOf = [](int r) { return bruckAllGather(r, 16); };
  q.fifoCapacity = 1;
  CHECK(verify(q) == "");
}

// Direct sends (plan.h): the span a kDirect step sends stays where the peer reads it, so the
// sender may not write it again in the operation.
TEST_CASE("a kDirect send of a span the rank writes later is reported, and a final one passes", "[verify][direct]") {
  // Ring all-reduce's first send is its input chunk: final out of place, overwritten in place.
  auto directFirstSend = [](int r) {
    RankPlan p = ringAllReduce(r, 4);
    p.lanes[0].steps[0].flags |= kDirect;
    return p;
  };
  CHECK(run(Coll::AllReduce, 4, directFirstSend) == "");
  std::string err = run(Coll::AllReduce, 4, directFirstSend, true);
  INFO(err);
  CHECK(has(err, "after a kDirect step sent it (a peer may still read it in place)"));
  // On a step that sends no user buffer.
  err = run(Coll::AllReduce, 4, [](int r) {
    RankPlan p = ringAllReduce(r, 4);
    p.lanes[0].steps[1].flags |= kDirect;  // RecvReduceSend: a partial sum, only in the FIFO
    return p;
  });
  INFO(err);
  CHECK(has(err, "sets kDirect on recv-reduce-send, which sends no user buffer"));
  // The built-in plans that mark direct sends keep the promise, in place or not.
  for (bool inPlace : {false, true}) {
    CHECK(run(
              Coll::AllGather, 5, [](int r) { return ringAllGather(r, 5); }, inPlace) == "");
    CHECK(run(
              Coll::AllReduce, 5, [](int r) { return ringAllReduce(r, 5); }, inPlace) == "");
    CHECK(run(
              Coll::Broadcast, 5, [](int r) { return ringBroadcast(r, 5, 2); }, inPlace, 2, 2) == "");
  }
}
