// Ranks on several "hosts" of this machine: forked processes that each set NCCL_HOSTID (and any
// other variables) before they join, so that tutti connects ranks of different hosts over the
// network transport. Rank threads of one process share its host.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tests/common/ranks_support.h"

namespace tutti_test {

struct HostLayout {
  int hosts = 2;
  int ranksPerHost = 2;
  int threadsPerProcess = 1;  // ranks per process; must divide ranksPerHost
  bool interleaved = false;   // rank r on host r % hosts (as a launcher may place them); needs
                              // one rank per process
  std::vector<std::pair<std::string, std::string>> environment;  // set in every rank process
  int timeoutSeconds = 120;
};

// What became of one rank process.
struct ProcessOutcome {
  int firstRank = 0;
  int signal = 0;       // the signal that killed it, 0 if it exited
  std::string failure;  // what its ranks reported (empty: all passed)
};

// Rank r lives on host r / ranksPerHost (r % hosts when interleaved). Runs body in every rank; returns one outcome per
// process. A process that outlives timeoutSeconds is killed and reported as failed.
std::vector<ProcessOutcome> runOnHosts(const HostLayout& layout, const RankBody& body);

// The failures of all processes, one line each; empty when every process passed.
std::string failuresOf(const std::vector<ProcessOutcome>& outcomes);

}  // namespace tutti_test
