// Control blocks: each rank's bells and mailboxes, mapped by every peer on its host.
#include "runtime/control_block.h"

#include <algorithm>

#include "runtime/comm.h"

namespace tutti {

void mapControlBlocks(ncclComm* comm) {
  // Plain memory when every rank of this node lives in this process.
  const RankInfo& me = comm->peers[size_t(comm->rank)];
  bool allLocalInProcess = true;
  for (const RankInfo& p : comm->peers)
    if (p.hostHash == me.hostHash && p.processToken != me.processToken) allLocalInProcess = false;
  std::vector<SegmentDescriptor> controls(static_cast<size_t>(comm->nranks));
  comm->controlSegment = createSegment(sizeof(ControlBlock), allLocalInProcess, &controls[size_t(comm->rank)],
                                       "control block of " + comm->where(), kSegmentMultiAttach);
  comm->control = new (comm->controlSegment->base()) ControlBlock();
  comm->bootstrap->allGather(controls.data(), sizeof(SegmentDescriptor));
  comm->peerControlSegments.resize(size_t(comm->nranks));
  comm->peerControl.assign(size_t(comm->nranks), nullptr);
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) {
      comm->peerControl[size_t(p)] = comm->control;
    } else if (comm->peers[size_t(p)].hostHash == me.hostHash) {
      comm->peerControlSegments[size_t(p)] =
          attachSegment(controls[size_t(p)], "control block of " + comm->describePeer(p) + ", attached by " + comm->where());
      comm->peerControl[size_t(p)] = static_cast<ControlBlock*>(comm->peerControlSegments[size_t(p)]->base());
    }
  }
  comm->mailboxesMapped = std::all_of(comm->peerControl.begin(), comm->peerControl.end(), [](ControlBlock* b) { return b != nullptr; });
  if (comm->mailboxesMapped)
    for (ControlBlock* block : comm->peerControl) {
      for (int k = 0; k < 2; k++) comm->mailboxes[k].push_back(&block->mailboxes[k]);
      comm->mailboxBells.push_back(&block->bells[0]);
    }
  comm->bootstrap->barrier();
  comm->controlSegment->seal();
}

}  // namespace tutti
