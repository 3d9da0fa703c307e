// OpenMPI's MPI_Allreduce / MPI_Allgather on floats, timed the way tutti's sweep times its collectives.
// Only the C API is used; the deprecated C++ bindings do not compile cleanly with -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "peer_sweep.h"

namespace {

// Buffers are allocated and touched once per size, outside the timed region, so neither peer pays
// for first-touch page faults inside the measurement.
struct SizeBuffers {
  std::vector<float> send, recv;
};

void runCollective(const peers::SweepOptions& options, SizeBuffers& buffers, int sendCount) {
  if (options.collective == "all_reduce")
    MPI_Allreduce(buffers.send.data(), buffers.recv.data(), sendCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else
    MPI_Allgather(buffers.send.data(), sendCount, MPI_FLOAT, buffers.recv.data(), sendCount, MPI_FLOAT, MPI_COMM_WORLD);
}

// Checks one result against the closed form: rank r contributes r + 1 everywhere.
bool resultIsCorrect(const peers::SweepOptions& options, const SizeBuffers& buffers, int ranks, int sendCount) {
  for (size_t i = 0; i < buffers.recv.size(); i++) {
    float expected =
        options.collective == "all_reduce" ? float(ranks * (ranks + 1) / 2) : float(int(i) / sendCount + 1);
    if (buffers.recv[i] != expected) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  peers::SweepOptions options;
  bool parsed =
      peers::parseSweepOptions(argc, argv, options, [](const std::string&, const std::string&) { return false; });
  if (!parsed || (options.collective != "all_reduce" && options.collective != "all_gather")) {
    if (rank == 0) peers::printSweepUsage(argv[0], " [--collective all_reduce|all_gather]");
    MPI_Finalize();
    return 2;
  }
  int exitCode = 0;
  size_t granule = sizeof(float) * (options.collective == "all_gather" ? size_t(ranks) : 1);
  for (size_t bytes : peers::sweepSizes(options, granule)) {
    size_t recvCount = bytes / sizeof(float);
    int sendCount = int(options.collective == "all_reduce" ? recvCount : recvCount / size_t(ranks));
    SizeBuffers buffers{std::vector<float>(size_t(sendCount), float(rank + 1)), std::vector<float>(recvCount, 0.0f)};
    runCollective(options, buffers, sendCount);
    int correct = resultIsCorrect(options, buffers, ranks, sendCount) ? 1 : 0, allCorrect = 0;
    MPI_Allreduce(&correct, &allCorrect, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (allCorrect == 0) {
      if (rank == 0)
        std::fprintf(stderr, "mpi_peer: wrong %s result at %zu bytes\n", options.collective.c_str(), bytes);
      exitCode = 1;
      break;
    }
    for (int i = 0; i < options.warmup; i++) runCollective(options, buffers, sendCount);
    std::vector<double> batchSeconds;
    for (int repeat = 0; repeat < options.repeats; repeat++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      for (int i = 0; i < options.iters; i++) runCollective(options, buffers, sendCount);
      double perOperation = (MPI_Wtime() - start) / options.iters, sum = 0;
      // Mean over ranks, as nccl-tests' default (-a 1) and tutti's sweep report it.
      MPI_Allreduce(&perOperation, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      batchSeconds.push_back(sum / ranks);
    }
    if (rank == 0) peers::printResult("openmpi", options, ranks, bytes, peers::median(batchSeconds));
  }
  MPI_Finalize();
  return exitCode;
}
