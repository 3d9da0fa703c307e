// Gloo's all-reduce algorithms (ring, ring_chunked, halving_doubling, bcube) over its TCP transport.
// Either starts N local ranks as processes on loopback (--ranks N), or runs one rank of a job whose
// ranks meet in a shared file store (--rank R --size N --store DIR --host ADDR), as in two network
// namespaces.
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "peer_sweep.h"

namespace {

struct GlooOptions {
  int localRanks = 0;  // > 0: start this many ranks here
  int rank = -1, size = 0;
  std::string storeDirectory;
  std::string host = "127.0.0.1";
  int timeoutSeconds = 300;
};

bool isKnownAlgorithm(const std::string& algorithm) {
  return algorithm == "ring" || algorithm == "ring_chunked" || algorithm == "halving_doubling" || algorithm == "bcube";
}

std::unique_ptr<gloo::Algorithm> makeAllreduce(const std::string& algorithm,
                                               const std::shared_ptr<gloo::Context>& context, float* data, int count) {
  std::vector<float*> pointers{data};
  if (algorithm == "ring") return std::make_unique<gloo::AllreduceRing<float>>(context, pointers, count);
  if (algorithm == "ring_chunked") return std::make_unique<gloo::AllreduceRingChunked<float>>(context, pointers, count);
  if (algorithm == "halving_doubling")
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, pointers, count);
  if (algorithm == "bcube") return std::make_unique<gloo::AllreduceBcube<float>>(context, pointers, count);
  return nullptr;
}

int runRank(const peers::SweepOptions& options, const GlooOptions& gloo, int rank, int size) {
  try {
    gloo::transport::tcp::attr address(gloo.host.c_str());
    auto device = gloo::transport::tcp::CreateDevice(address);
    gloo::rendezvous::FileStore store(gloo.storeDirectory);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(std::chrono::seconds(gloo.timeoutSeconds));
    context->connectFullMesh(store, device);
    gloo::BarrierAllToAll barrier(context);
    std::vector<double> rankSeconds(1);
    gloo::AllreduceRing<double> sumOverRanks(context, {rankSeconds.data()}, 1);
    for (size_t bytes : peers::sweepSizes(options, sizeof(float))) {
      int count = int(bytes / sizeof(float));
      // Gloo's algorithms work in place on buffers fixed at construction; both are set up once per
      // size, outside the timed region, as tutti's sweep does with its buffers.
      std::vector<float> data(size_t(count), float(rank + 1));
      auto allreduce = makeAllreduce(options.algorithm, context, data.data(), count);
      allreduce->run();
      float expected = float(size * (size + 1) / 2);
      for (float value : data)
        if (value != expected) {
          std::fprintf(stderr, "gloo_peer: rank %d: wrong all-reduce result at %zu bytes (%g, expected %g)\n", rank,
                       bytes, double(value), double(expected));
          return 1;
        }
      // Zeros stay zeros under repeated in-place sums, so timed runs never reach inf or denormals.
      std::fill(data.begin(), data.end(), 0.0f);
      for (int i = 0; i < options.warmup; i++) allreduce->run();
      std::vector<double> batchSeconds;
      for (int repeat = 0; repeat < options.repeats; repeat++) {
        barrier.run();
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < options.iters; i++) allreduce->run();
        rankSeconds[0] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / options.iters;
        sumOverRanks.run();
        batchSeconds.push_back(rankSeconds[0] / size);
      }
      if (rank == 0) peers::printResult("gloo", options, size, bytes, peers::median(batchSeconds));
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gloo_peer: rank %d of %d: %s\n", rank, size, error.what());
    return 1;
  }
}

// Forks the local ranks before any Gloo object exists (Gloo's device starts threads), and kills
// them all if they outlive the deadline.
int runLocalRanks(const peers::SweepOptions& options, GlooOptions gloo) {
  char storeTemplate[] = "/tmp/gloo_peer.XXXXXX";
  if (mkdtemp(storeTemplate) == nullptr) {
    std::perror("gloo_peer: mkdtemp");
    return 1;
  }
  gloo.storeDirectory = storeTemplate;
  std::vector<pid_t> children;
  for (int rank = 0; rank < gloo.localRanks; rank++) {
    pid_t pid = fork();
    if (pid == 0) {
      std::fflush(stdout);
      _exit(runRank(options, gloo, rank, gloo.localRanks));
    }
    if (pid > 0) children.push_back(pid);
  }
  int exitCode = int(children.size()) == gloo.localRanks ? 0 : 1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(gloo.timeoutSeconds);
  size_t running = children.size();
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      running--;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) exitCode = 1;
    } else if (pid < 0 || std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gloo_peer: ranks did not finish within %d s, killing them\n", gloo.timeoutSeconds);
      for (pid_t child : children) kill(child, SIGKILL);
      while (waitpid(-1, nullptr, 0) > 0) {
      }
      exitCode = 1;
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(gloo.storeDirectory, ignored);
  return exitCode;
}

}  // namespace

int main(int argc, char** argv) {
  peers::SweepOptions options;
  options.algorithm = "ring_chunked";
  GlooOptions gloo;
  bool parsed = peers::parseSweepOptions(argc, argv, options, [&](const std::string& flag, const std::string& value) {
    if (flag == "--ranks")
      gloo.localRanks = std::atoi(value.c_str());
    else if (flag == "--rank")
      gloo.rank = std::atoi(value.c_str());
    else if (flag == "--size")
      gloo.size = std::atoi(value.c_str());
    else if (flag == "--store")
      gloo.storeDirectory = value;
    else if (flag == "--host")
      gloo.host = value;
    else if (flag == "--timeout")
      gloo.timeoutSeconds = std::atoi(value.c_str());
    else
      return false;
    return true;
  });
  bool oneRank = gloo.rank >= 0 && gloo.rank < gloo.size && !gloo.storeDirectory.empty();
  if (!parsed || options.collective != "all_reduce" || gloo.timeoutSeconds < 1 || (gloo.localRanks >= 1) == oneRank ||
      !isKnownAlgorithm(options.algorithm)) {
    peers::printSweepUsage(argv[0],
                           " (--ranks N | --rank R --size N --store DIR) [--host ADDR] [--timeout S]\n"
                           "  [--algorithm ring|ring_chunked|halving_doubling|bcube]");
    return 2;
  }
  return oneRank ? runRank(options, gloo, gloo.rank, gloo.size) : runLocalRanks(options, gloo);
}
