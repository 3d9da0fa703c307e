// OpenMPI's collectives on floats (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast,
// MPI_Reduce, MPI_Alltoall), timed the way tutti's sweep times its collectives, with its sizes:
// `bytes` is the reduced buffer (all-reduce, broadcast, reduce) or all ranks' blocks together
// (all-gather's output, reduce-scatter's input, all-to-all's buffer).
// Only the C API is used; the deprecated C++ bindings do not compile cleanly with -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "peer_sweep.h"

namespace {

// Buffers are allocated and touched once per size, outside the timed region, so neither peer pays
// for first-touch page faults inside the measurement.
struct SizeBuffers {
  std::vector<float> send, recv;
};

constexpr const char* kCollectives[] = {"all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast",  "reduce",     "alltoall"};

// Collectives whose size is every rank's block together, so sizes are a multiple of ranks floats.
bool sizedByBlocks(const std::string& collective) {
  return collective == "all_gather" || collective == "reduce_scatter" || collective == "alltoall";
}

// Element counts of one size: what each rank sends and receives.
struct Counts {
  int send = 0, recv = 0;
};
Counts countsFor(const std::string& collective, size_t elements, int ranks) {
  const int block = int(elements / size_t(ranks));
  if (collective == "all_gather") return {block, int(elements)};
  if (collective == "reduce_scatter") return {int(elements), block};
  return {int(elements), int(elements)};  // all-reduce, broadcast, reduce, all-to-all (whole buffers)
}

void runCollective(const peers::SweepOptions& options, SizeBuffers& buffers, int ranks) {
  const std::string& c = options.collective;
  float* send = buffers.send.data();
  float* recv = buffers.recv.data();
  const int sendCount = int(buffers.send.size()), recvCount = int(buffers.recv.size());
  if (c == "all_reduce")
    MPI_Allreduce(send, recv, sendCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (c == "all_gather")
    MPI_Allgather(send, sendCount, MPI_FLOAT, recv, sendCount, MPI_FLOAT, MPI_COMM_WORLD);
  else if (c == "reduce_scatter")
    MPI_Reduce_scatter_block(send, recv, recvCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (c == "broadcast")
    MPI_Bcast(recv, recvCount, MPI_FLOAT, 0, MPI_COMM_WORLD);  // out of place in nccl-tests; MPI's is in place
  else if (c == "reduce")
    MPI_Reduce(send, recv, sendCount, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  else
    MPI_Alltoall(send, sendCount / ranks, MPI_FLOAT, recv, recvCount / ranks, MPI_FLOAT, MPI_COMM_WORLD);
}

// What rank `rank` puts in element i of its send buffer: all-to-all gives every destination's block
// values of its own, the others send r + 1 everywhere.
float sendValue(const std::string& collective, int rank, int ranks, size_t i, size_t blockElements) {
  if (collective == "alltoall") return float(rank * ranks + int(i / blockElements) + 1);
  return float(rank + 1);
}

// Checks one result against the closed form of the send values above.
bool resultIsCorrect(const std::string& c, const SizeBuffers& buffers, int rank, int ranks) {
  const float sum = float(ranks * (ranks + 1) / 2);
  const size_t block = c == "all_gather" || c == "alltoall" ? buffers.recv.size() / size_t(ranks) : 0;
  if (c == "reduce" && rank != 0) return true;  // only the root receives
  for (size_t i = 0; i < buffers.recv.size(); i++) {
    float expected = sum;                                                      // all-reduce, reduce-scatter, reduce
    if (c == "all_gather") expected = float(i / block + 1);                    // block j comes from rank j
    if (c == "broadcast") expected = 1.0f;                                     // the root's r + 1
    if (c == "alltoall") expected = float(int(i / block) * ranks + rank + 1);  // rank j's block for this rank
    if (buffers.recv[i] != expected) return false;
  }
  return true;
}

std::string collectiveList() {
  std::string list;
  for (const char* c : kCollectives) {
    if (!list.empty()) list += '|';
    list += c;
  }
  return list;
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
  bool known = false;
  for (const char* c : kCollectives) known = known || options.collective == c;
  if (!parsed || !known) {
    if (rank == 0) peers::printSweepUsage(argv[0], (" [--collective " + collectiveList() + "]").c_str());
    MPI_Finalize();
    return 2;
  }
  int exitCode = 0;
  size_t granule = sizeof(float) * (sizedByBlocks(options.collective) ? size_t(ranks) : 1);
  for (size_t bytes : peers::sweepSizes(options, granule)) {
    const size_t elements = bytes / sizeof(float);
    const Counts counts = countsFor(options.collective, elements, ranks);
    SizeBuffers buffers{std::vector<float>(size_t(counts.send)), std::vector<float>(size_t(counts.recv), 0.0f)};
    for (size_t i = 0; i < buffers.send.size(); i++)
      buffers.send[i] = sendValue(options.collective, rank, ranks, i, elements / size_t(ranks));
    if (options.collective == "broadcast") std::fill(buffers.recv.begin(), buffers.recv.end(), float(rank + 1));
    runCollective(options, buffers, ranks);
    int correct = resultIsCorrect(options.collective, buffers, rank, ranks) ? 1 : 0, allCorrect = 0;
    MPI_Allreduce(&correct, &allCorrect, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (allCorrect == 0) {
      if (rank == 0)
        std::fprintf(stderr, "mpi_peer: wrong %s result at %zu bytes\n", options.collective.c_str(), bytes);
      exitCode = 1;
      break;
    }
    for (int i = 0; i < options.warmup; i++) runCollective(options, buffers, ranks);
    std::vector<double> batchSeconds;
    for (int repeat = 0; repeat < options.repeats; repeat++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      for (int i = 0; i < options.iters; i++) runCollective(options, buffers, ranks);
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
