// The words for a worker's wait: shared by the executors' timeout errors and tuttiCommDescribeWait,
// so that both name the operation, the step and the peer alike.
#include "kernels/wait_slot.h"

namespace tutti::kern {

std::string describeWaitingOp(const WaitRecord& record, int rank) {
  std::string s = std::string(record.opName) + " #" + std::to_string(record.opSeq);
  if (rank >= 0) s += " on rank " + std::to_string(rank);
  if (record.what == WaitFor::MailboxInput) return s + " (one-shot through shared memory)";
  return s + " (channel " + std::to_string(record.channel) + ", tile " + std::to_string(record.tile) + "/" +
         std::to_string(record.ntiles) + ", step " + plan::opName(record.step) + ")";
}

std::string describeWaitedFor(const WaitRecord& record, const std::string& peer) {
  switch (record.what) {
    case WaitFor::Data: return "data from " + peer;
    case WaitFor::Space: return "free FIFO space at " + peer;
    case WaitFor::MailboxInput: return "the input of " + peer;
    case WaitFor::DirectRead: return peer + " to read the buffer this rank sent it directly (zero-copy)";
    case WaitFor::Nothing: break;
  }
  return "nothing";
}

}  // namespace tutti::kern
