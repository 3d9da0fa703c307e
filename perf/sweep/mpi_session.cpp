// MpiSession over OpenMPI when TUTTI_PERF_MPI is defined; a stub that refuses to start otherwise.
#include "perf/sweep/mpi_session.h"

#include <cstdlib>
#include <string>

#include "perf/sweep/error.h"

#ifdef TUTTI_PERF_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the deprecated C++ bindings need libraries we do not link
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tutti::perf {

#ifdef TUTTI_PERF_MPI

namespace {

void checkMpi(int result, const char* what) {
  if (result == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(result, text, &length);
  throw Error(ErrorCode::System, std::string(what) + " failed: " + text);
}

}  // namespace

bool mpiBuilt() { return true; }

MpiSession::MpiSession(int* argc, char*** argv) {
  checkMpi(MPI_Init(argc, argv), "MPI_Init");
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

MpiSession::~MpiSession() { MPI_Finalize(); }

ncclUniqueId MpiSession::broadcastUniqueId() const {
  ncclUniqueId id{};
  if (rank_ == 0) {
    ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess)
      throw Error(ErrorCode::System, std::string("ncclGetUniqueId: ") + ncclGetErrorString(result) + " (" +
                                         ncclGetLastError(nullptr) + ")");
  }
  checkMpi(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (the unique id)");
  return id;
}

int MpiSession::agreeExitCode(int code) const {
  int worst = code;
  checkMpi(MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce (exit codes)");
  return worst;
}

void MpiSession::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it ever did
}

#else

bool mpiBuilt() { return false; }

MpiSession::MpiSession(int*, char***) {
  throw Error(ErrorCode::InvalidUsage,
              "this perf tool was built without MPI (install OpenMPI's development package and rebuild)");
}
MpiSession::~MpiSession() = default;
ncclUniqueId MpiSession::broadcastUniqueId() const { return {}; }
int MpiSession::agreeExitCode(int code) const { return code; }
void MpiSession::abort(int code) const { std::_Exit(code); }

#endif

}  // namespace tutti::perf
