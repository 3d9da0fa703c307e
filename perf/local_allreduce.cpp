// A small all-reduce sweep across local ranks (threads, host mode): the stand-in for the perf
// sweep tool until that exists. Prints median time, algorithm and bus bandwidth per size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace {

struct Options {
  int ranks = 4;
  size_t minBytes = 8, maxBytes = 64u << 20;
  int iters = 20, warmup = 5;
};

void usage() {
  std::printf("usage: local_allreduce [--ranks N] [--min BYTES] [--max BYTES] [--iters N] [--warmup N]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return false;
    long long v = std::atoll(argv[++i]);
    if (a == "--ranks")
      o.ranks = int(v);
    else if (a == "--min")
      o.minBytes = size_t(v);
    else if (a == "--max")
      o.maxBytes = size_t(v);
    else if (a == "--iters")
      o.iters = int(v);
    else if (a == "--warmup")
      o.warmup = int(v);
    else
      return false;
  }
  return o.ranks >= 1 && o.iters >= 1 && o.minBytes >= 4 && o.maxBytes >= o.minBytes;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
  setenv("TUTTI_DEVICE", "host", 0);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes; s *= 4) sizes.push_back(s);
  std::vector<std::vector<double>> times(sizes.size(), std::vector<double>(size_t(o.ranks)));
  std::vector<int> failed(size_t(o.ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; r++)
    threads.emplace_back([&, r] {
      ncclComm_t comm;
      if (ncclCommInitRank(&comm, o.ranks, id, r) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", r, ncclGetLastError(nullptr));
        failed[size_t(r)] = 1;
        return;
      }
      std::vector<float> send(o.maxBytes / 4, 1.0f), recv(o.maxBytes / 4);
      for (size_t k = 0; k < sizes.size(); k++) {
        size_t count = sizes[k] / 4;
        std::vector<double> samples;
        for (int it = 0; it < o.warmup + o.iters; it++) {
          auto t0 = std::chrono::steady_clock::now();
          if (ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
            std::fprintf(stderr, "rank %d: ncclAllReduce: %s\n", r, ncclGetLastError(nullptr));
            failed[size_t(r)] = 1;
            return;
          }
          if (it >= o.warmup)
            samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::nth_element(samples.begin(), samples.begin() + long(samples.size() / 2), samples.end());
        times[k][size_t(r)] = samples[samples.size() / 2];
        if (recv[0] != float(o.ranks)) failed[size_t(r)] = 2;
      }
      ncclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  for (int f : failed)
    if (f) {
      std::fprintf(stderr, "local_allreduce: %s\n", f == 2 ? "wrong results" : "a rank failed");
      return 1;
    }
  std::printf("# tutti local all-reduce: %d ranks (threads, host mode), float32 sum, median of %d iterations\n",
              o.ranks, o.iters);
  std::printf("# %12s %12s %12s %12s %12s\n", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  for (size_t k = 0; k < sizes.size(); k++) {
    double t = *std::max_element(times[k].begin(), times[k].end());  // the slowest rank's median
    double algbw = double(sizes[k]) / t / 1e9;
    double busbw = algbw * 2.0 * (o.ranks - 1) / o.ranks;
    std::printf("  %12zu %12zu %12.1f %12.3f %12.3f\n", sizes[k], sizes[k] / 4, t * 1e6, algbw, busbw);
  }
  return 0;
}
