// Diagnosis of a wait that timed out: before the error is final, the rank asks its peers over the
// bootstrap what they wait for, following the chain of waits (runtime/diagnostics/wait_graph.h) to the rank
// at its root, so that every survivor names the stopped, dead or absent rank, not its neighbour.
//
// Runs only after a wait has already timed out: nothing of it is on the hot path.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/wait_slot.h"
#include "runtime/diagnostics/wait_graph.h"

namespace tutti {

namespace bootstrap {
class Bootstrap;
}

// The question, and how a rank's answer is written and read: "waiting <opSeq> <opName> <p>,<p>"
// or "idle". Text that is not an answer reads as Unknown.
inline constexpr const char* kWaitQuestion = "what do you wait for?";
std::string encodeWaitAnswer(const RankWait& wait);
RankWait parseWaitAnswer(const std::string& text);

// What a rank waits for, from its workers' wait records (those waiting for nothing skipped): Idle
// when none waits.
RankWait waitOfRecords(const std::vector<kern::WaitRecord>& records);

// Asks along the chain from `mine` (this rank's wait; Waiting) what each rank waits for, within
// budgetSeconds in all and a second per round of questions, and returns the root cause for the
// front of the error message ("rank 0 waits for rank 1 in AllReduce #4, which waits for rank 2 ...;
// rank 2 (host pid) did not answer within 1 s: stopped or hung"), or empty when nothing was found.
// peerName names a rank with its host and pid.
std::string diagnoseWait(bootstrap::Bootstrap& bootstrap, const RankWait& mine,
                         const std::function<std::string(int)>& peerName, double budgetSeconds);

}  // namespace tutti
