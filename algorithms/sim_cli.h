// tools/tutti-sim's command line, as a function so that tests can run it in process.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace tutti::sim {

// Runs tutti-sim with `args` (without the program name). Returns the exit status: 0, or 1 after
// writing the reason to `err`. hostMailboxBytes: the largest all-reduce the runtime runs through
// shared mailboxes (kernels/mailbox.h), which a host-mode system of one node models (0: none).
int runSimTool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, size_t hostMailboxBytes = 0);

}  // namespace tutti::sim
