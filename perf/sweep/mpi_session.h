// MPI for worlds that mpirun starts, in builds that have it: the world's size and ranks, the unique id broadcast, and
// the processes' agreement on the exit code.
#pragma once

#include "nccl.h"

namespace tutti::perf {

// True when the perf tool was built with MPI (CMake found OpenMPI's development package).
bool mpiBuilt();

// One MPI session: MPI_Init when made, MPI_Finalize when destroyed. Only the main thread calls MPI; the rank threads
// agree among themselves through their communicator. Throws perf::Error in a build without MPI.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Process 0 makes the id; every process returns it.
  ncclUniqueId broadcastUniqueId() const;
  // The largest exit code over all processes, so that one failed process fails them all.
  int agreeExitCode(int code) const;
  // Ends every process of the job: a process that failed before the others could hear of it would leave them waiting.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tutti::perf
