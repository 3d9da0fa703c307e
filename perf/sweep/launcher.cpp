// Finds this process's place in a launched world and shares the communicator's unique id across it.
#include "perf/sweep/launcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>

#include "perf/sweep/error.h"
#include "perf/sweep/mpi_session.h"

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
    throw Error(ErrorCode::InvalidArgument,
                std::string("launcher environment: ") + name + "='" + *text + "' is not a rank or size");
  return int(value);
}

void throwIfNotOk(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw Error(ErrorCode::System,
                std::string(what) + ": " + ncclGetErrorString(result) + " (" + ncclGetLastError(nullptr) + ")");
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
  // Half of torchrun's pair is a launch gone wrong (or a leftover variable): running alone would hide it.
  bool haveRank = lookup(env, "RANK"), haveSize = lookup(env, "WORLD_SIZE");
  if (haveRank && !haveSize)
    throw Error(ErrorCode::InvalidUsage,
                "launcher environment: RANK=" + *lookup(env, "RANK") +
                    " is set but WORLD_SIZE is not; a torchrun-style launch sets both (unset RANK to run alone)");
  if (haveSize && !haveRank && integerVariable(env, "WORLD_SIZE") > 1)
    throw Error(ErrorCode::InvalidUsage,
                "launcher environment: WORLD_SIZE=" + *lookup(env, "WORLD_SIZE") +
                    " is set but RANK is not; a torchrun-style launch sets both. Refusing to run as one of " +
                    *lookup(env, "WORLD_SIZE") + " separate one-process jobs");
  // The first launcher whose variables are present decides, innermost first: torchrun started by srun or mpirun
  // inherits their variables, which describe torchrun itself (srun -n1 torchrun: SLURM_NTASKS=1); mpirun inside a
  // Slurm allocation sets both its own and Slurm's, and its own describe this job step.
  struct Launcher {
    const char* name;
    const char *rank, *size, *local;
    bool mpi;  // a build with MPI finds the other processes through MPI itself
  };
  for (Launcher l :
       {Launcher{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", false},
        Launcher{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", true},
        Launcher{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", true},  // MPICH, Intel MPI (Hydra)
        Launcher{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", false}}) {
    if (!lookup(env, l.rank) || !lookup(env, l.size)) continue;
    world.launcher = l.name;
    world.processRank = integerVariable(env, l.rank);
    world.processCount = integerVariable(env, l.size);
    world.localRank = lookup(env, l.local) ? integerVariable(env, l.local) : 0;
    if (world.processCount < 1 || world.processRank >= world.processCount)
      throw Error(ErrorCode::InvalidArgument, std::string("launcher environment: ") + l.rank + "=" +
                                                  std::to_string(world.processRank) + " is not below " + l.size + "=" +
                                                  std::to_string(world.processCount));
    if (l.mpi && mpiBuilt()) {
      world.launcher = "mpi";
      return world;
    }
    if (world.processCount > 1 && bootstrapAddress(env).empty() && options.idFile.empty() &&
        !lookup(env, "TUTTI_PERF_ID_FILE"))
      throw Error(
          ErrorCode::InvalidUsage,
          std::string("launched by ") + l.name + " (" + l.rank + "=" + std::to_string(world.processRank) + ", " +
              l.size + "=" + std::to_string(world.processCount) + "), but " +
              (l.mpi ? "this build has no MPI and " : "") +
              "no way to find the other processes was given: set NCCL_COMM_ID=host:port, "
              "MASTER_ADDR and MASTER_PORT, or --id-file PATH (a file all processes can read). Refusing to run " +
              std::to_string(world.processCount) + " separate one-process jobs");
    return world;
  }
  return world;
}

World joinMpiWorld(World world, const std::map<std::string, std::string>& env, int mpiRank, int mpiSize) {
  for (const char* size : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (!lookup(env, size)) continue;
    int declared = integerVariable(env, size);
    if (declared != mpiSize)
      throw Error(
          ErrorCode::InvalidUsage,
          std::string("the launcher declares ") + size + "=" + std::to_string(declared) +
              " processes but MPI_Comm_size is " + std::to_string(mpiSize) +
              ": this tool's MPI did not join the launcher's world (an MPI_Init outside "
              "its own mpirun runs alone). Start it with the mpirun of the MPI it was built with. Refusing to run " +
              std::to_string(declared) + " separate jobs");
    break;  // the first one present is the launcher's (the same order as detectWorld's)
  }
  world.processRank = mpiRank;
  world.processCount = mpiSize;
  return world;
}

std::string bootstrapAddress(const std::map<std::string, std::string>& env) {
  if (const std::string* commId = lookup(env, "NCCL_COMM_ID")) return *commId;  // the user's choice wins
  const std::string* address = lookup(env, "MASTER_ADDR");
  if (!address || !lookup(env, "MASTER_PORT")) return "";
  int port = integerVariable(env, "MASTER_PORT");
  // torchrun's agent (it sets TORCHELASTIC_RUN_ID for its workers) serves its rendezvous store on MASTER_PORT, so the
  // bootstrap root takes the next port; a launch that only sets the variables leaves MASTER_PORT free.
  if (lookup(env, "TORCHELASTIC_RUN_ID")) {
    if (port >= 65535)
      throw Error(ErrorCode::InvalidUsage,
                  "MASTER_PORT=" + std::to_string(port) + " is torchrun's store and " + std::to_string(port + 1) +
                      " is no port for the bootstrap root: set NCCL_COMM_ID=host:port to a free port");
    port++;
  }
  return *address + ":" + std::to_string(port);
}

std::string uniqueIdFile(const World& world, const Options& options, const std::map<std::string, std::string>& env) {
  if (world.processCount == 1 || world.launcher == "mpi" || !bootstrapAddress(env).empty()) return "";
  return !options.idFile.empty()             ? options.idFile
         : lookup(env, "TUTTI_PERF_ID_FILE") ? *lookup(env, "TUTTI_PERF_ID_FILE")
                                             : "";
}

ncclUniqueId shareUniqueId(const World& world, const Options& options, const std::map<std::string, std::string>& env,
                           int waitSeconds) {
  ncclUniqueId id{};
  std::string address = world.processCount == 1 ? "" : bootstrapAddress(env);
  if (world.processCount == 1) {
    throwIfNotOk(ncclGetUniqueId(&id), "ncclGetUniqueId");
    return id;
  }
  if (!address.empty()) {
    // NCCL_COMM_ID semantics: every process derives the same id from the address; the first rank starts the root there.
    setenv("NCCL_COMM_ID", address.c_str(), 1);
    throwIfNotOk(ncclGetUniqueId(&id), ("ncclGetUniqueId (NCCL_COMM_ID=" + address + ")").c_str());
    return id;
  }
  std::string path = uniqueIdFile(world, options, env);
  // A file left by an earlier run (one that crashed before process 0 removed it) holds a dead root's id. Process 0
  // removes it before writing and publishes the new one whole (a rename); the others ignore a file last written more
  // than kStaleSeconds before they started, which leaves room for a launcher that starts processes a little apart.
  // A shared file system stamps mtime with the server's clock, so hosts whose clocks differ by more than that need
  // NCCL_COMM_ID instead.
  constexpr int kStaleSeconds = 30;
  if (world.processRank == 0) {
    std::remove(path.c_str());
    throwIfNotOk(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string temporary = path + ".tmp." + std::to_string(getpid());
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(&id), sizeof id);
      if (!out) throw Error(ErrorCode::System, "writing the unique id to " + temporary + " failed");
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      int err = errno;
      std::remove(temporary.c_str());
      throw Error(ErrorCode::System, "renaming " + temporary + " to " + path + ": " + std::strerror(err));
    }
    return id;
  }
  // The others wait for rank 0's file, bounded like any bootstrap wait.
  time_t oldest = std::time(nullptr) - kStaleSeconds;
  bool sawStale = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(waitSeconds);
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat status {};
    if (stat(path.c_str(), &status) == 0) {
      if (status.st_mtime >= oldest) {
        std::ifstream in(path, std::ios::binary);
        if (in.read(reinterpret_cast<char*>(&id), sizeof id) && in.gcount() == sizeof id) return id;
      } else {
        sawStale = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw Error(ErrorCode::Timeout,
              "process " + std::to_string(world.processRank) + ": the unique id file " + path +
                  " did not appear within " + std::to_string(waitSeconds) + " s (did process 0 start?)" +
                  (sawStale ? "; the file there was written more than " + std::to_string(kStaleSeconds) +
                                  " s before this process started, by an earlier run, and was ignored"
                            : ""));
}

}  // namespace tutti::perf
