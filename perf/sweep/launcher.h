// How this process joins its world: --local, Slurm, torchrun-style or OpenMPI environments, and the unique id exchange.
#pragma once

#include <map>
#include <string>

#include "nccl.h"
#include "perf/sweep/options.h"

namespace tutti::perf {

struct World {
  std::string launcher = "single";  // single, local, slurm, torchrun, openmpi, mpi (mpirun and a build with MPI)
  int processRank = 0;
  int processCount = 1;
  int localRank = 0;                // index of this process among those on its host
  int ranksPerProcess = 1;
  int nranks() const { return processCount * ranksPerProcess; }
  int firstRank() const { return processRank * ranksPerProcess; }
};

// The world this process belongs to, from the options and the environment (env: name -> value).
// Throws tutti::Error when a launcher names a larger world that this process could not join.
World detectWorld(const Options& options, const std::map<std::string, std::string>& env);

// The process environment as a map, for detectWorld.
std::map<std::string, std::string> processEnvironment();

// The unique id every process of world shares: made here for a one-process world; through NCCL_COMM_ID
// (also set from MASTER_ADDR:MASTER_PORT) or the id file otherwise. Throws tutti::Error if none works.
ncclUniqueId shareUniqueId(const World& world, const Options& options, const std::map<std::string, std::string>& env);

}  // namespace tutti::perf
