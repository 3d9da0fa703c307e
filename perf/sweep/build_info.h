// How the perf sweep tool was built: its configuration, and the commit of the tree built.
#pragma once

#include <string>

namespace tutti::perf {

struct BuildInfo {
  std::string buildType;  // CMAKE_BUILD_TYPE, "none" when it was empty
  std::string compiler;   // compiler id and version, e.g. "GNU 13.2.0"
  bool mpi = false;       // built with MPI (runs under mpirun without NCCL_COMM_ID)
  std::string commit;     // short git commit of the tree built, "-dirty" if tracked files had changed; "" outside git
};

BuildInfo thisBuild();

// The commit of the tree built; defined by the source that perf/sweep/git_commit.cmake writes on every build.
const char* builtCommit();

}  // namespace tutti::perf
