// The sweep shared by the peer benchmarks: flags, sizes, busbw factors and the one-line result format.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace peers {

struct SweepOptions {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  size_t factor = 2;
  int iters = 20;   // operations per timed batch
  int warmup = 5;   // untimed operations before the first batch of each size
  int repeats = 5;  // timed batches per size; the median batch is reported
  std::string collective = "all_reduce";
  std::string algorithm;
};

inline void printSweepUsage(const char* program, const char* extra) {
  std::fprintf(
      stderr,
      "usage: %s [-b MIN_BYTES] [-e MAX_BYTES] [-f FACTOR] [-n ITERS] [-w WARMUP] [-r REPEATS]%s\n"
      "  sizes accept K, M, G suffixes; one line per size: result peer=... bytes=... median_us=... busbw_GBps=...\n",
      program, extra);
}

inline size_t parseBytes(const std::string& text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  switch (end != nullptr ? *end : '\0') {
    case 'K':
    case 'k': value <<= 10; break;
    case 'M':
    case 'm': value <<= 20; break;
    case 'G':
    case 'g': value <<= 30; break;
    default: break;
  }
  return size_t(value);
}

// Parses the flags common to all peers; `extraFlag` gets the others (returns false if unknown).
template <typename ExtraFlag>
bool parseSweepOptions(int argc, char** argv, SweepOptions& options, ExtraFlag extraFlag) {
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    std::string value = argv[++i];
    if (flag == "-b")
      options.minBytes = parseBytes(value);
    else if (flag == "-e")
      options.maxBytes = parseBytes(value);
    else if (flag == "-f")
      options.factor = size_t(std::atoll(value.c_str()));
    else if (flag == "-n")
      options.iters = std::atoi(value.c_str());
    else if (flag == "-w")
      options.warmup = std::atoi(value.c_str());
    else if (flag == "-r")
      options.repeats = std::atoi(value.c_str());
    else if (flag == "--collective")
      options.collective = value;
    else if (flag == "--algorithm")
      options.algorithm = value;
    else if (!extraFlag(flag, value))
      return false;
  }
  return options.minBytes >= 4 && options.maxBytes >= options.minBytes && options.factor >= 2 && options.iters >= 1 &&
         options.warmup >= 0 && options.repeats >= 1;
}

inline std::vector<size_t> sweepSizes(const SweepOptions& options, size_t granule) {
  std::vector<size_t> sizes;
  for (size_t bytes = options.minBytes; bytes <= options.maxBytes; bytes *= options.factor)
    sizes.push_back(std::max(granule, bytes / granule * granule));
  return sizes;
}

// nccl-tests' bus bandwidth factors, so the figures line up with tutti's sweep tool.
inline double busBandwidthFactor(const std::string& collective, int ranks) {
  if (collective == "all_reduce") return 2.0 * (ranks - 1) / ranks;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "alltoall")
    return double(ranks - 1) / ranks;
  return 1.0;  // broadcast, reduce
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// `bytes` is nccl-tests' size: the buffer reduced or broadcast (all-reduce, reduce, broadcast) or
// every rank's block together (all-gather's output, reduce-scatter's input, all-to-all's buffer).
inline void printResult(const char* peer, const SweepOptions& options, int ranks, size_t bytes, double medianSeconds) {
  double algbw = double(bytes) / medianSeconds / 1e9;
  std::printf(
      "result peer=%s collective=%s algorithm=%s ranks=%d bytes=%zu median_us=%.2f algbw_GBps=%.3f busbw_GBps=%.3f\n",
      peer, options.collective.c_str(), options.algorithm.empty() ? "default" : options.algorithm.c_str(), ranks, bytes,
      medianSeconds * 1e6, algbw, algbw * busBandwidthFactor(options.collective, ranks));
  std::fflush(stdout);
}

}  // namespace peers
