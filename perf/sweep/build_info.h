// How the perf sweep tool was built, as CMake saw it at configure time.
#pragma once

#include <string>

namespace tutti::perf {

struct BuildInfo {
  std::string buildType;  // CMAKE_BUILD_TYPE, "none" when it was empty
  std::string compiler;   // compiler id and version, e.g. "GNU 13.2.0"
  bool mpi = false;       // built with MPI (runs under mpirun without NCCL_COMM_ID)
  std::string commit;     // short git commit of the source tree; "" when it was not a git checkout
};

BuildInfo thisBuild();

}  // namespace tutti::perf
