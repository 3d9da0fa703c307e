// The perf sweep driver: one function behind every *_perf binary.
#pragma once

namespace tutti::perf {

// Runs the nccl-tests compatible sweep of collective (e.g. "all_reduce") with argv's flags; returns the exit code.
int runSweep(const char* collective, int argc, char** argv);

}  // namespace tutti::perf
