// Readable forms of plans, for logs and test messages.
#include "algorithms/lane.h"

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
      s += std::string(" ") + opName(step.op) + "(" + bufName(step.src) + "->" + bufName(step.dst);
      if (lane.sendPeers.size() > 1 && step.sendConn) s += " to#" + std::to_string(step.sendConn);
      if (lane.recvPeers.size() > 1 && step.recvConn) s += " from#" + std::to_string(step.recvConn);
      s += ")";
    }
    s += "}";
  }
  return s;
}

}  // namespace tutti::plan
