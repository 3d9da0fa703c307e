// Readable forms of plans, and the rules of joined runs.
#include "algorithms/lane.h"

#include <algorithm>

namespace tutti::plan {

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AlltoAll: return "alltoall";
    case Coll::Gather: return "gather";
    case Coll::Scatter: return "scatter";
    case Coll::Send: return "send";
    case Coll::Recv: return "recv";
  }
  return "?";
}

const char* collTitle(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AlltoAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::Send: return "Send";
    case Coll::Recv: return "Recv";
  }
  return "?";
}

const char* opName(Op op) {
  switch (op) {
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::RecvSend: return "recv-send";
    case Op::RecvReduceSend: return "recv-reduce-send";
    case Op::RecvReduceCopy: return "recv-reduce-copy";
    case Op::RecvReduceCopySend: return "recv-reduce-copy-send";
    case Op::Copy: return "copy";
    case Op::Reduce: return "reduce";
  }
  return "?";
}

size_t joinedRunLength(const std::vector<Step>& steps, size_t first) {
  size_t last = first;
  while (last + 1 < steps.size() && (steps[last].flags & kJoin)) last++;
  return last - first + 1;
}

size_t joinWidth(const RankPlan& plan) {
  size_t width = 0;
  for (const LaneSpec& lane : plan.lanes)
    for (size_t s = 0; s < lane.steps.size();) {
      size_t run = joinedRunLength(lane.steps, s);
      width = std::max(width, run);
      s += run;
    }
  return width;
}

bool opSends(Op op) {
  return op == Op::Send || op == Op::RecvSend || op == Op::RecvReduceSend || op == Op::RecvReduceCopySend;
}
bool opReceives(Op op) { return op != Op::Send && op != Op::Copy && op != Op::Reduce; }

std::string joinProblem(const LaneSpec& lane, size_t* step) {
  const std::vector<Step>& steps = lane.steps;
  for (size_t s = 0; s < steps.size(); s++) {
    const Step& a = steps[s];
    if (!(a.flags & kJoin)) continue;
    *step = s;
    if (a.op == Op::Copy || a.op == Op::Reduce)
      return std::string("joins a local ") + opName(a.op) + " (only steps that talk to a peer travel as one message)";
    if (s + 1 == steps.size()) return "ends the lane with kJoin (a joined run must end with a step without it)";
    const Step& b = steps[s + 1];
    if (b.op != a.op)
      return std::string("joins a ") + opName(a.op) + " with a " + opName(b.op) + " (a joined run keeps one op)";
    if ((opSends(a.op) && a.sendConn != b.sendConn) || (opReceives(a.op) && a.recvConn != b.recvConn))
      return "joins steps on different connections (a joined run is one message to one peer)";
  }
  return "";
}

namespace {
std::string bufName(const BufRef& ref) {
  if (ref.buf == Buf::None) return "-";
  std::string s = ref.buf == Buf::In ? "in" : ref.buf == Buf::Out ? "out" : "scratch";
  if (ref.chunk >= 0) s += "[" + std::to_string(ref.chunk) + "]";
  return s;
}
}  // namespace

std::string describe(const RankPlan& plan) {
  std::string s = plan.algorithm + ":";
  for (const LaneSpec& lane : plan.lanes) {
    auto peers = [](const std::vector<int>& v) {
      if (v.empty()) return std::string("-");
      std::string p;
      for (int x : v) p += (p.empty() ? "" : ",") + std::to_string(x);
      return p;
    };
    s += " {send " + peers(lane.sendPeers) + " recv " + peers(lane.recvPeers) + ":";
    for (const Step& step : lane.steps) {
      s += std::string(" ") + opName(step.op) + ((step.flags & kJoin) ? "+" : "") +
           ((step.flags & kDirect) ? "*" : "") + "(" + bufName(step.src) + "->" + bufName(step.dst);
      if (lane.sendPeers.size() > 1 && step.sendConn) s += " to#" + std::to_string(step.sendConn);
      if (lane.recvPeers.size() > 1 && step.recvConn) s += " from#" + std::to_string(step.recvConn);
      s += ")";
    }
    s += "}";
  }
  return s;
}

}  // namespace tutti::plan
