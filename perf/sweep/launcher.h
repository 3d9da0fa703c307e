// How this process joins its world: --local, torchrun-style, MPI or Slurm environments, and the unique id exchange.
#pragma once

#include <map>
#include <string>

#include "nccl.h"
#include "perf/sweep/options.h"

namespace tutti::perf {

struct World {
  std::string launcher = "single";  // single, local, torchrun, openmpi, pmi, slurm, mpi (mpirun and a build with MPI)
  int processRank = 0;
  int processCount = 1;
  int localRank = 0;  // index of this process among those on its host
  int ranksPerProcess = 1;
  int nranks() const { return processCount * ranksPerProcess; }
  int firstRank() const { return processRank * ranksPerProcess; }
};

// The world this process belongs to, from the options and the environment (env: name -> value). The innermost
// launcher decides: torchrun-style variables, then OpenMPI's, then MPICH/Hydra's PMI_*, then Slurm's. Throws
// perf::Error when a launcher names a larger world that this process could not join, or its variables are half set.
World detectWorld(const Options& options, const std::map<std::string, std::string>& env);

// The world of the "mpi" launcher once MPI_Init has run: MPI's rank and size, refused (perf::Error) when the size
// differs from the one the launcher declared in env (OMPI_COMM_WORLD_SIZE or PMI_SIZE), as a singleton MPI_Init
// under another MPI's launcher would.
World joinMpiWorld(World world, const std::map<std::string, std::string>& env, int mpiRank, int mpiSize);

// The NCCL_COMM_ID a launched world meets at, "" when the environment names none: NCCL_COMM_ID itself, else
// MASTER_ADDR:MASTER_PORT, or MASTER_ADDR:MASTER_PORT+1 under torchrun's agent (its store owns MASTER_PORT).
std::string bootstrapAddress(const std::map<std::string, std::string>& env);

// The process environment as a map, for detectWorld.
std::map<std::string, std::string> processEnvironment();

// The unique id every process of world shares: made here for a one-process world; through NCCL_COMM_ID
// (also set from bootstrapAddress) or the id file otherwise, waiting at most waitSeconds for the file.
// Throws perf::Error if none works (ErrorCode::Timeout when the file did not come).
ncclUniqueId shareUniqueId(const World& world, const Options& options, const std::map<std::string, std::string>& env,
                           int waitSeconds = 120);

// The id file's path when the world meets through one ("" otherwise); process 0 removes it once every rank has
// its communicator, so that the next run cannot read it.
std::string uniqueIdFile(const World& world, const Options& options, const std::map<std::string, std::string>& env);

}  // namespace tutti::perf
