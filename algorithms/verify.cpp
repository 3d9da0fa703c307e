// The plan verifier: a symbolic run of every rank's plan and the collective's postcondition
// (see verify.h for the model), after the checks of verify_checks.cpp.
#include "algorithms/verify.h"

#include <string>

#include "algorithms/verify_checker.h"
#include "base/error.h"

namespace tutti::plan {
namespace verifier {

std::string Checker::run() {
  if (n_ < 1) return "a collective needs at least one rank";
  if (q_.fifoCapacity < 1 || q_.tiles < 1) return "FIFO capacity and tiles must be at least 1";
  if (!pointToPoint(q_.coll) && (q_.root < 0 || q_.root >= n_))
    return "root " + std::to_string(q_.root) + " is not a rank of " + std::to_string(n_);
  plans_.resize(size_t(n_));
  for (int r = 0; r < n_; r++) plans_[size_t(r)] = q_.planOf(r);
  std::string err;
  if (!(err = geometry()).empty() || !(err = bindLanes()).empty() || !(err = checkJoinWidths()).empty() ||
      !(err = checkSize()).empty() || !(err = checkConflicts()).empty())
    return err;
  initBuffers();
  if (!(err = simulate()).empty() || !(err = checkDrained()).empty()) return err;
  return checkPostcondition();
}

std::string Checker::describeValue(const Value& v) const {
  if (v.tile < 0) return "nothing";
  std::string what = layout_ == Layout::Split ? "chunk " : layout_ == Layout::Blocks ? "block " : "piece ";
  std::string s =
      "(tile " + std::to_string(v.tile) + ", " + what + std::to_string(v.index) + ") of ranks " + rankSet(v.ranks, n_);
  if (reducing(q_.coll)) s += ", kPre on " + rankSet(v.pre, n_) + (v.post ? ", kPost applied" : ", no kPost");
  return s;
}

std::string Checker::stepName(const LaneRun& l, size_t s, bool withTile) const {
  const Step& step = l.spec->steps[s];
  std::string name = "rank " + std::to_string(l.rank) + " lane " + std::to_string(l.lane);
  if (withTile) name += " tile " + std::to_string(l.tile);
  name += " step " + std::to_string(s) + " (" + opName(step.op);
  if (opReceives(step.op) && step.recvConn < l.spec->recvPeers.size())
    name += " from " + std::to_string(l.spec->recvPeers[step.recvConn]);
  if (opSends(step.op) && step.sendConn < l.spec->sendPeers.size())
    name += " to " + std::to_string(l.spec->sendPeers[step.sendConn]);
  return name + ")";
}

void Checker::initBuffers() {
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

Value& Checker::at(LaneRun& l, Where w) {
  if (w.buf == Buf::Scratch) return l.scratch[size_t(w.index)];
  return storage(l.rank, w.buf)[size_t(l.tile * indices(w.buf) + w.index)];
}

std::string Checker::combine(const Value& got, const Value& own, Value& result) const {
  if (!samePiece(got, own)) return "combines " + describeValue(got) + " with " + describeValue(own);
  if (got.post || own.post) return "reduces a value whose kPost was already applied";
  if (intersects(got.ranks, own.ranks)) {
    Bits both = got.ranks;
    for (size_t i = 0; i < both.size(); i++) both[i] &= own.ranks[i];
    return "reduces the contribution of ranks " + rankSet(both, n_) + " twice (" + describeValue(got) + " with " +
           describeValue(own) + ")";
  }
  result = got;
  unite(result.ranks, own.ranks);
  unite(result.pre, own.pre);
  return "";
}

std::string Checker::execute(LaneRun& l, int parts) {
  const Step& step = l.spec->steps[l.step];
  Where sw = l.src[l.step], dw = l.dst[l.step];
  if (step.op == Op::Copy && !step.flags && sw.buf == dw.buf && sw.index == dw.index) return "";  // skipped in place
  Fifo* rf = opReceives(step.op) ? &fifos_[size_t(l.recvFifo[step.recvConn])] : nullptr;
  Value own;
  if (readsSrc(step.op)) {
    own = at(l, sw);
    if (own.tile < 0)
      return "reads " + refName(sw) + " before anything was written to it" +
             (sw.buf == Buf::Scratch ? " in this tile" : "");
  }
  if (step.flags & kPre) {
    if (own.ranks != only(l.rank))
      return "applies kPre to " + describeValue(own) + ", which is not rank " + std::to_string(l.rank) +
             "'s own contribution";
    if (intersects(own.pre, own.ranks))
      return "applies kPre twice to rank " + std::to_string(l.rank) + "'s contribution";
    unite(own.pre, own.ranks);
  }
  Value result;
  switch (step.op) {
    case Op::Send:
    case Op::Copy: result = own; break;
    case Op::Recv:
    case Op::RecvSend: result = rf->data.front().value; break;
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
  if (opSends(step.op)) {
    Fifo& sf = fifos_[size_t(l.sendFifo[step.sendConn])];
    if (parts > 0) sf.messages++;
    sf.data.push_back(Entry{result, parts, l.rank, l.lane, l.step}, size_t(q_.fifoCapacity));
    wake(sf);
  }
  // A span sent by address (plan.h, "Direct sends") is read by the peer where it lies, whenever
  // the peer gets to it: the rank may not write it again in the operation.
  if (dw.buf == Buf::In || dw.buf == Buf::Out) {
    if (at(l, dw).sentDirect)
      return "writes " + refName(dw) + " after a kDirect step sent it (a peer may still read it in place)";
  }
  result.sentDirect = false;
  if (dw.buf != Buf::None) at(l, dw) = result;
  if (step.flags & kDirect) at(l, step.op == Op::Send ? sw : dw).sentDirect = true;
  return "";
}

void Checker::wake(Fifo& f) {
  for (int id : f.waiters) work_.push_back(id);
  f.waiters.clear();
}

void Checker::finish(LaneRun& l) {
  l.done = true;
  size_t& head = groupHead_[size_t(l.rank)][size_t(l.group)];
  const auto& queue = groups_[size_t(l.rank)][size_t(l.group)];
  if (++head < queue.size()) work_.push_back(queue[head]);
}

std::string Checker::advance(int id) {
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
    if (opReceives(step.op)) {
      Fifo& f = fifos_[size_t(l.recvFifo[step.recvConn])];
      if (f.data.empty()) {
        f.waiters.push_back(id);
        return "";
      }
      const Entry& m = f.data.front();
      if (size_t(m.parts) != parts)
        return stepName(l, l.step, true) + ": receives as " + std::to_string(parts) + " joined step(s) a message of " +
               std::to_string(m.parts) + " part(s) that rank " + std::to_string(m.rank) + " lane " +
               std::to_string(m.lane) + " step " + std::to_string(m.step) +
               " sent (message boundaries must match between sender and receiver)";
    }
    if (opSends(step.op)) {
      Fifo& f = fifos_[size_t(l.sendFifo[step.sendConn])];
      if (f.messages >= q_.fifoCapacity) {
        f.waiters.push_back(id);
        return "";
      }
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

std::string Checker::simulate() {
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

std::string Checker::stuckReport() const {
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
  if (opReceives(step.op) && fifos_[size_t(l.recvFifo[step.recvConn])].data.empty())
    why = "waits for data from rank " + std::to_string(l.spec->recvPeers[step.recvConn]);
  else
    why = "waits for room in its FIFO to rank " + std::to_string(l.spec->sendPeers[step.sendConn]);
  return stepName(l, l.step, true) + " is stuck: it " + why + " (" + kindName(l.spec->kind) + " tag " +
         std::to_string(l.spec->tag) + "); " + std::to_string(stuck) +
         " lane(s) stuck in all (deadlock, or a send nobody receives)";
}

std::string Checker::checkDrained() const {
  for (const Fifo& f : fifos_)
    if (!f.data.empty())
      return "rank " + std::to_string(f.from) + " sent " + std::to_string(f.data.size()) + " chunk(s) to rank " +
             std::to_string(f.to) + " (" + kindName(f.kind) + " tag " + std::to_string(f.tag) +
             ") that nobody received";
  return "";
}

Value Checker::expected(int r, int tile, int index) const {
  Value v{tile, 0, none(), none(), false};
  switch (q_.coll) {
    case Coll::AllReduce:
      v.index = index;
      v.ranks = everyone();
      break;
    case Coll::ReduceScatter:
      v.index = r;
      v.ranks = everyone();
      break;
    case Coll::Reduce: v.ranks = everyone(); break;
    case Coll::AllGather:
    case Coll::Gather: v.ranks = only(index); break;
    case Coll::Broadcast: v.ranks = only(q_.root); break;
    case Coll::AlltoAll:
      v.index = r;
      v.ranks = only(index);
      break;
    case Coll::Scatter:
      v.index = r;
      v.ranks = only(q_.root);
      break;
    case Coll::Send:
    case Coll::Recv: v.ranks = only(((r - q_.root) % n_ + n_) % n_); break;
  }
  if (reducing(q_.coll)) {
    v.pre = v.ranks;
    v.post = true;
  }
  return v;
}

std::string Checker::checkPostcondition() {
  for (int r = 0; r < n_; r++) {
    if (!hasBuffer(q_.coll, Buf::Out, r, q_.root)) continue;
    for (int t = 0; t < q_.tiles; t++)
      for (int i = 0; i < indices(Buf::Out); i++) {
        Where w = alias(r, {Buf::Out, i});
        const Value& got = storage(r, w.buf)[size_t(t * indices(w.buf) + w.index)];
        Value want = expected(r, t, i);
        if (samePiece(got, want) && got.ranks == want.ranks && got.pre == want.pre && got.post == want.post) continue;
        std::string where =
            "rank " + std::to_string(r) + " out[" + std::to_string(i) + "] of tile " + std::to_string(t);
        if (samePiece(got, want) && got.ranks == want.ranks && got.pre != want.pre)
          return where + " misses kPre: it was applied on " + rankSet(got.pre, n_) + " of " + rankSet(want.ranks, n_);
        if (samePiece(got, want) && got.ranks == want.ranks) return where + " never had kPost applied";
        return where + " holds " + describeValue(got) + " where it should hold " + describeValue(want);
      }
  }
  return "";
}

}  // namespace verifier

namespace {

using verifier::Checker;
using verifier::pointToPoint;

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

std::string verifyAlgorithm(const Algorithm& algorithm, Coll coll, int nranks, int root, int ranksPerNode,
                            int fifoCapacity) {
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
      return algorithm.name + " " + collName(coll) + " on " + std::to_string(nranks) + " ranks, root " +
             std::to_string(root) + (inPlace ? ", in place" : ", out of place") + ": " + err;
  }
  return "";
}

}  // namespace tutti::plan
