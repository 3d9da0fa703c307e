// The wait-for graph of a stalled job: which rank waits for which, and the ranks at its root.
//
// Pure logic, built from what each rank answered (runtime/diagnostics/wait_diagnosis.h): a rank waits for
// peers in an operation, is in no operation, did not answer, or is gone. From one rank's own wait
// the edges lead to the ranks that hold everyone up; the message names them and the chain.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tutti {

enum class RankWaitState : uint8_t {
  Unknown,   // not asked (no time left, or not on any chain)
  Waiting,   // in operation opSeq, waiting for the ranks in waitsFor
  Idle,      // in no operation: it never made the call, or finished it
  NoAnswer,  // asked, gave no answer by the deadline: stopped or hung
  Gone,      // could not be reached: its process is gone
};

struct RankWait {
  RankWaitState state = RankWaitState::Unknown;
  std::vector<int> waitsFor;  // Waiting: the peers it lacks
  uint64_t opSeq = 0;         // Waiting: its operation's number (kern::WaitRecord::opSeq)
  std::string opName;         // Waiting: "AllReduce"
  std::string detail;         // NoAnswer, Gone: why ("did not answer within 1 s")
};

struct WaitGraph {
  std::vector<RankWait> ranks;     // by rank
  std::vector<std::string> names;  // by rank: "rank 3 (host pid 1234)"
};

struct RootCause {
  std::vector<int> roots;  // the ranks that hold the others up; empty: none found
  std::string text;        // the chain and the roots, for the front of an error message
};

// Follows the edges from rank `me` (whose own entry must be Waiting) to every rank that waits for
// no one: idle, silent, gone, unknown, or in an earlier operation than the one waiting for it. A
// cycle of waits with no such rank is named as a cycle.
RootCause findRootCause(const WaitGraph& graph, int me);

}  // namespace tutti
