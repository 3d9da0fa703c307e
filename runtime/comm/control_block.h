// A rank's control block: the bells of its executor workers and its mailboxes, which every peer
// on its host maps.
#pragma once

#include <memory>
#include <vector>

#include "kernels/bell.h"
#include "kernels/mailbox.h"
#include "runtime/launch/call_log.h"
#include "transports/segment.h"

struct ncclComm;

namespace tutti {

constexpr int kMaxWorkers = 32;
// The most ranks that run one-shot all-reduces through the mailboxes (control_block.cpp).
constexpr int kMaxMailboxRanks = 64;

// Peers on the same node map it so that they can wake the worker that waits on a FIFO they just
// moved, read the rank's mailboxes (one-shot all-reduces, kernels/mailbox.h), and compare its calls
// with theirs when a wait stalls.
struct ControlBlock {
  kern::Bell bells[kMaxWorkers];
  kern::Mailbox mailboxes[2];
  CallLog calls;  // the collectives this rank started, for a stalled peer to compare (call_log.h)
};

// This rank's control block and those it maps.
struct ControlBlocks {
  std::unique_ptr<transport::Segment> ownSegment;
  ControlBlock* own = nullptr;
  std::vector<std::unique_ptr<transport::Segment>> peerSegments;  // by rank; empty for self
  std::vector<ControlBlock*> ofRank;                              // by rank (own included); null: other host
  // One-shot all-reduces through the blocks' mailboxes, when every rank is on this host.
  bool mailboxesMapped = false;
  std::vector<kern::Mailbox*> mailboxes[2];  // [operation % 2][rank]
  std::vector<kern::Bell*> mailboxBells;     // [rank]: its worker 0's bell
};

// Creates this rank's control block, maps those of the peers on its host, and, when every rank is
// on this host, the mailboxes of all. Collective: a gather of the blocks' descriptors, then a
// barrier once every peer has mapped ours, after which ours can no longer be attached.
void mapControlBlocks(ncclComm* comm);

}  // namespace tutti
