// The check of a compiled plan's indices (kernels/plan_bounds.h).
#include "kernels/plan_bounds.h"

#include <string>

#include "base/error.h"

namespace tutti::kern {

using plan::Buf;
using plan::BufRef;
using plan::Layout;
using plan::Op;
using plan::Step;

void checkPlanBounds(const plan::RankPlan& plan, int rank, int nranks) {
  for (size_t l = 0; l < plan.lanes.size(); l++) {
    const plan::LaneSpec& lane = plan.lanes[l];
    auto fail = [&](size_t s, const std::string& what) {
      throw Error(ErrorCode::InvalidUsage, "algorithm \"" + plan.algorithm + "\", rank " + std::to_string(rank) +
                                               " of " + std::to_string(nranks) + ", lane " + std::to_string(l) +
                                               (s < lane.steps.size() ? ", step " + std::to_string(s) : std::string()) +
                                               ": " + what);
    };
    const size_t none = size_t(-1);
    if (lane.tileChunks < 0 || lane.scratchChunks < 0) fail(none, "negative tileChunks or scratchChunks");
    if (lane.kind == plan::ConnKind::None && !(lane.sendPeers.empty() && lane.recvPeers.empty()))
      fail(none, "a lane of kind None has peers");
    if (lane.sendPeers.size() > 256 || lane.recvPeers.size() > 256) fail(none, "more than 256 peers of one direction");
    for (const std::vector<int>* peers : {&lane.sendPeers, &lane.recvPeers})
      for (int p : *peers)
        if (p < 0 || p >= nranks || p == rank) fail(none, "peer " + std::to_string(p) + " is not another rank");
    const int splitChunks = lane.tileChunks > 0 ? lane.tileChunks : nranks;
    auto checkRef = [&](size_t s, const BufRef& ref, const char* role) {
      bool ok = true;
      if (ref.buf == Buf::Scratch)
        ok = ref.chunk >= 0 && ref.chunk < lane.scratchChunks;
      else if (ref.buf != Buf::None && lane.layout == Layout::Split)
        ok = ref.chunk >= 0 && ref.chunk < splitChunks;
      else if (ref.buf != Buf::None && lane.layout == Layout::Blocks)
        ok = ref.chunk >= -1 && ref.chunk < nranks;
      if (!ok) fail(s, std::string(role) + " chunk " + std::to_string(ref.chunk) + " is out of range");
    };
    for (size_t s = 0; s < lane.steps.size(); s++) {
      const Step& step = lane.steps[s];
      if (plan::stepReceives(step.op) && step.recvConn >= lane.recvPeers.size())
        fail(s, std::string(plan::opName(step.op)) + " uses receive connection " + std::to_string(step.recvConn) +
                    " of " + std::to_string(lane.recvPeers.size()));
      if (plan::stepSends(step.op) && step.sendConn >= lane.sendPeers.size())
        fail(s, std::string(plan::opName(step.op)) + " uses send connection " + std::to_string(step.sendConn) + " of " +
                    std::to_string(lane.sendPeers.size()));
      bool needsSrc = step.op == Op::Send || step.op == Op::Copy || step.op == Op::RecvReduceSend ||
                      step.op == Op::RecvReduceCopy || step.op == Op::RecvReduceCopySend || step.op == Op::Reduce;
      bool needsDst = step.op == Op::Recv || step.op == Op::Copy || step.op == Op::RecvReduceCopy ||
                      step.op == Op::RecvReduceCopySend || step.op == Op::Reduce;
      if (needsSrc && step.src.buf == Buf::None) fail(s, std::string(plan::opName(step.op)) + " has no source");
      if (needsDst && step.dst.buf == Buf::None) fail(s, std::string(plan::opName(step.op)) + " has no destination");
      checkRef(s, step.src, "source");
      checkRef(s, step.dst, "destination");
    }
    size_t bad = 0;
    std::string join = plan::joinProblem(lane, &bad);
    if (!join.empty()) fail(bad, join);
  }
}

}  // namespace tutti::kern
