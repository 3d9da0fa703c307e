// Finds this process's place in a launched world and shares the communicator's unique id across it.
#include "perf/sweep/launcher.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <fstream>
#include <thread>

#include "perf/sweep/mpi_session.h"
#include "runtime/error.h"

extern char** environ;

namespace tutti::perf {
namespace {

const std::string* lookup(const std::map<std::string, std::string>& env, const char* name) {
  auto found = env.find(name);
  return found == env.end() || found->second.empty() ? nullptr : &found->second;
}

int integerVariable(const std::map<std::string, std::string>& env, const char* name) {
  const std::string* text = lookup(env, name);
  if (!text) throw Error(ErrorCode::InvalidArgument, std::string("launcher environment: ") + name + " is not set");
  char* end = nullptr;
  long value = std::strtol(text->c_str(), &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 24)
    throw Error(ErrorCode::InvalidArgument, std::string("launcher environment: ") + name + "='" + *text + "' is not a rank or size");
  return int(value);
}

void throwIfNotOk(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw Error(ErrorCode::System, std::string(what) + ": " + ncclGetErrorString(result) + " (" + ncclGetLastError(nullptr) + ")");
}

}  // namespace

std::map<std::string, std::string> processEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry && *entry; entry++) {
    std::string text = *entry;
    size_t equals = text.find('=');
    if (equals != std::string::npos) env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  return env;
}

World detectWorld(const Options& options, const std::map<std::string, std::string>& env) {
  World world;
  world.ranksPerProcess = options.threads * options.gpus;
  if (options.localRanks > 0) {
    world.launcher = "local";
    world.ranksPerProcess = options.localRanks;
    return world;
  }
  // The first launcher whose variables are present decides; OpenMPI before Slurm because mpirun
  // inside a Slurm allocation sets both, and the OMPI_ ones describe this job step.
  struct Launcher {
    const char* name;
    const char *rank, *size, *local;
  };
  for (Launcher l : {Launcher{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                     Launcher{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
                     Launcher{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"}}) {
    if (!lookup(env, l.rank) || !lookup(env, l.size)) continue;
    world.launcher = l.name;
    world.processRank = integerVariable(env, l.rank);
    world.processCount = integerVariable(env, l.size);
    world.localRank = lookup(env, l.local) ? integerVariable(env, l.local) : 0;
    if (world.processCount < 1 || world.processRank >= world.processCount)
      throw Error(ErrorCode::InvalidArgument, std::string("launcher environment: ") + l.rank + "=" + std::to_string(world.processRank) +
                                                  " is not below " + l.size + "=" + std::to_string(world.processCount));
    // Under mpirun a build with MPI finds the other processes through MPI itself.
    if (world.launcher == "openmpi" && mpiBuilt()) {
      world.launcher = "mpi";
      return world;
    }
    if (world.processCount > 1 && !lookup(env, "NCCL_COMM_ID") && !(lookup(env, "MASTER_ADDR") && lookup(env, "MASTER_PORT")) &&
        options.idFile.empty() && !lookup(env, "TUTTI_PERF_ID_FILE"))
      throw Error(ErrorCode::InvalidUsage,
                  std::string("launched by ") + l.name + " as process " + std::to_string(world.processRank) + " of " +
                      std::to_string(world.processCount) +
                      ", but " + (mpiBuilt() ? "" : "this build has no MPI and ") +
                      "no way to find the other processes was given: set NCCL_COMM_ID=host:port, "
                      "MASTER_ADDR and MASTER_PORT, or --id-file PATH (a file all processes can read). Refusing to run " +
                      std::to_string(world.processCount) + " separate one-process jobs");
    return world;
  }
  return world;
}

ncclUniqueId shareUniqueId(const World& world, const Options& options, const std::map<std::string, std::string>& env) {
  ncclUniqueId id{};
  if (world.processCount == 1 || lookup(env, "NCCL_COMM_ID")) {
    throwIfNotOk(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return id;
  }
  if (lookup(env, "MASTER_ADDR") && lookup(env, "MASTER_PORT")) {
    // NCCL_COMM_ID semantics: every process derives the same id from the address; the first rank starts the root there.
    std::string address = *lookup(env, "MASTER_ADDR") + ":" + *lookup(env, "MASTER_PORT");
    setenv("NCCL_COMM_ID", address.c_str(), 1);
    throwIfNotOk(ncclGetUniqueId(&id), "ncclGetUniqueId (NCCL_COMM_ID from MASTER_ADDR:MASTER_PORT)");
    return id;
  }
  std::string path = !options.idFile.empty() ? options.idFile : *lookup(env, "TUTTI_PERF_ID_FILE");
  if (world.processRank == 0) {
    throwIfNotOk(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string temporary = path + ".tmp." + std::to_string(getpid());
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(&id), sizeof id);
      if (!out) throw Error(ErrorCode::System, "writing the unique id to " + temporary + " failed");
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      int err = errno;
      throw Error(ErrorCode::System, "renaming " + temporary + " to " + path + ": " + std::strerror(err));
    }
    return id;
  }
  // The others wait for rank 0's file, bounded like any bootstrap wait.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&id), sizeof id) && in.gcount() == sizeof id) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw Error(ErrorCode::Timeout, "process " + std::to_string(world.processRank) + ": the unique id file " + path +
                                      " did not appear within 120 s (did process 0 start?)");
}

}  // namespace tutti::perf
