// Readable forms of plans, for logs and test messages.
#include "algorithms/lane.h"

namespace tutti::plan {

const char* opName(Op op) {
  switch (op) {
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::RecvSend: return "recv-send";
    case Op::RecvReduceSend: return "recv-reduce-send";
    case Op::RecvReduceCopy: return "recv-reduce-copy";
    case Op::RecvReduceCopySend: return "recv-reduce-copy-send";
    case Op::Copy: return "copy";
  }
  return "?";
}

namespace {
std::string bufName(const BufRef& ref) {
  if (ref.buf == Buf::None) return "-";
  std::string s = ref.buf == Buf::In ? "in" : "out";
  if (ref.chunk >= 0) s += "[" + std::to_string(ref.chunk) + "]";
  return s;
}
}  // namespace

std::string describe(const RankPlan& plan) {
  std::string s = plan.algorithm + ":";
  for (const LaneSpec& lane : plan.lanes) {
    s += " {send " + std::to_string(lane.sendPeer) + " recv " + std::to_string(lane.recvPeer) + ":";
    for (const Step& step : lane.steps)
      s += std::string(" ") + opName(step.op) + "(" + bufName(step.src) + "->" + bufName(step.dst) + ")";
    s += "}";
  }
  return s;
}

}  // namespace tutti::plan
