// tools/tutti-sim's command line, as a function so that tests can run it in process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tutti::sim {

// Runs tutti-sim with `args` (without the program name). Returns the exit status: 0, or 1 after
// writing the reason to `err`.
int runSimTool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tutti::sim
