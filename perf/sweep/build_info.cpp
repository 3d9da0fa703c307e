// The perf sweep tool's build facts, passed from CMake as compile definitions of this file alone, so that a new
// commit recompiles one file.
#include "perf/sweep/build_info.h"

namespace tutti::perf {

BuildInfo thisBuild() {
  BuildInfo info;
  info.buildType = TUTTI_PERF_BUILD_TYPE[0] ? TUTTI_PERF_BUILD_TYPE : "none";
  info.compiler = TUTTI_PERF_COMPILER;
#ifdef TUTTI_PERF_MPI
  info.mpi = true;
#endif
  info.commit = TUTTI_PERF_GIT_COMMIT;
  return info;
}

}  // namespace tutti::perf
