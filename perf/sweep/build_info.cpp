// The perf sweep tool's build facts: the configuration's, passed from CMake as compile definitions of this file alone,
// and the commit, from the source the build regenerates (git_commit.cmake).
#include "perf/sweep/build_info.h"

namespace tutti::perf {

BuildInfo thisBuild() {
  BuildInfo info;
  info.buildType = TUTTI_PERF_BUILD_TYPE[0] ? TUTTI_PERF_BUILD_TYPE : "none";
  info.compiler = TUTTI_PERF_COMPILER;
#ifdef TUTTI_PERF_MPI
  info.mpi = true;
#endif
  info.commit = builtCommit();
  return info;
}

}  // namespace tutti::perf
