// Control blocks: each rank's bells and mailboxes, mapped by every peer on its host.
#include "runtime/comm/control_block.h"

#include <algorithm>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"

namespace tutti {

void mapControlBlocks(ncclComm* comm) {
  // Plain memory when every rank of this node lives in this process.
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  bool allLocalInProcess = true;
  for (const RankInfo& p : comm->identity.peers)
    if (p.hostHash == me.hostHash && p.processToken != me.processToken) allLocalInProcess = false;
  std::vector<transport::SegmentDescriptor> controls(static_cast<size_t>(comm->identity.nranks));
  comm->control.ownSegment =
      createSegment(sizeof(ControlBlock), allLocalInProcess, &controls[size_t(comm->identity.rank)],
                    "control block of " + comm->where(), transport::kSegmentMultiAttach);
  comm->control.own = new (comm->control.ownSegment->base()) ControlBlock();
  comm->identity.bootstrap->allGather(controls.data(), sizeof(transport::SegmentDescriptor));
  comm->control.peerSegments.resize(size_t(comm->identity.nranks));
  comm->control.ofRank.assign(size_t(comm->identity.nranks), nullptr);
  for (int p = 0; p < comm->identity.nranks; p++) {
    if (p == comm->identity.rank) {
      comm->control.ofRank[size_t(p)] = comm->control.own;
    } else if (comm->identity.peers[size_t(p)].hostHash == me.hostHash) {
      // The context is written only for an error: a thousand ranks attach a million blocks.
      try {
        comm->control.peerSegments[size_t(p)] = attachSegment(controls[size_t(p)], "");
      } catch (const Error& e) {
        throw Error(e.code(),
                    "control block of " + comm->describePeer(p) + ", attached by " + comm->where() + e.message());
      }
      comm->control.ofRank[size_t(p)] = static_cast<ControlBlock*>(comm->control.peerSegments[size_t(p)]->base());
    }
  }
  // One-shot all-reduces through the mailboxes are the host executor's path, up to
  // kMaxMailboxRanks: every rank reads every mailbox and a late input wakes every rank asleep
  // waiting for it, so with a thousand ranks as threads one 8-byte all-reduce took 130-180 ms
  // against 100-120 ms by recursive doubling over the FIFOs (perf/RESULTS.md, init at scale).
  comm->control.mailboxesMapped = comm->identity.nranks <= kMaxMailboxRanks &&
                                  comm->executor.backend->runsMailboxes() &&
                                  std::all_of(comm->identity.peers.begin(), comm->identity.peers.end(),
                                              [](const RankInfo& p) { return p.mailboxes != 0; }) &&
                                  std::all_of(comm->control.ofRank.begin(), comm->control.ofRank.end(),
                                              [](ControlBlock* b) { return b != nullptr; });
  if (comm->control.mailboxesMapped)
    for (ControlBlock* block : comm->control.ofRank) {
      for (int k = 0; k < 2; k++) comm->control.mailboxes[k].push_back(&block->mailboxes[k]);
      comm->control.mailboxBells.push_back(&block->bells[0]);
    }
  comm->identity.bootstrap->barrier();
  comm->control.ownSegment->seal();
}

}  // namespace tutti
