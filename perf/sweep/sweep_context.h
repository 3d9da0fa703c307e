// What the rank threads of one perf process share (the options, the world, the watchdog, the exit code), and the
// check that turns a failed NCCL call into perf's error.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/sweep/baseline.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/cuda_driver.h"
#include "perf/sweep/error.h"
#include "perf/sweep/group_split.h"
#include "perf/sweep/launcher.h"
#include "perf/sweep/options.h"
#include "perf/sweep/report.h"
#include "perf/sweep/watchdog.h"

namespace tutti::perf {

using Clock = std::chrono::steady_clock;

// Init's watchdog waits this much longer than -T: the bootstrap's own deadline (-T too) comes first and names the
// ranks that did not arrive; the watchdog catches what hangs after it.
constexpr int kInitGraceSeconds = 2;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Throws perf::Error "rank R: what: <result>: <last error>" when result is not ncclSuccess.
inline void check(ncclResult_t result, int rank, const std::string& what) {
  if (result != ncclSuccess)
    throw Error(result == ncclRemoteError ? ErrorCode::Remote : ErrorCode::System,
                "rank " + std::to_string(rank) + ": " + what + ": " + ncclGetErrorString(result) + ": " +
                    ncclGetLastError(nullptr));
}

struct SweepContext {
  const Collective& collective;
  Options options;
  World world;
  ncclUniqueId id;
  std::string program;
  std::vector<std::string> arguments;
  std::optional<Baseline> baseline;  // --compare's, read before the sweep
  std::optional<GroupSplit> split;   // NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT
  std::vector<int> colours;          // with a split, every world rank's colour
  std::string expectedBackend;       // the device backend expected before init (rank_gpu.h's expectedBackend)
  const cuda::Driver* driver;        // the CUDA driver when the cuda backend is expected, else null
  Watchdog watchdog;
  std::atomic<int> exitCode{0};
  std::atomic<bool> sharedErrorReported{false};  // a timeout or usage error every thread meets: reported once
  std::mutex outputMutex;

  // The worst code wins: a timeout over a failure, a failure over success.
  void fail(int code) {
    for (int now = exitCode; now < code && !exitCode.compare_exchange_weak(now, code);) {
    }
  }
};

}  // namespace tutti::perf
