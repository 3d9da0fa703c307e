// -T's watchdog: it watches the ranks of this process from init to the last size, and ends the process when one stays
// in a step too long.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

namespace tutti::perf {

// The exit code of a run that -T stopped, as nccl-tests' timeout; 2 is a usage error, 1 any other failure.
constexpr int kTimeoutExitCode = 3;
constexpr int kUsageExitCode = 2;

class Watchdog {
 public:
  // ranks: this process's ranks (slots); timeoutSeconds: -T, 0 for no watchdog.
  Watchdog(int ranks, int timeoutSeconds);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A communicator of the rank's (the world's, then its group's with a split) to abort on a timeout;
  // null names the rank only (before its init has returned a communicator).
  void attach(int index, ncclComm_t comm, int rank);
  // The comms must not be used by the watchdog any more (they are being destroyed).
  void detach(int index);
  // The rank enters a step that must end within limitSeconds (default -T).
  void busy(int index, std::string what, int limitSeconds = 0);
  void idle(int index);
  // Set once the watchdog has reported a timeout and is ending the process: what fails after it (the aborted
  // communicators) is its consequence, not news.
  bool firing() const { return firing_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::vector<ncclComm_t> comms;
    int rank = -1;
    Clock::time_point since;
    int limitSeconds = 0;
    std::string what;
  };

  void watch();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Slot> slots_;
  int timeoutSeconds_;
  std::atomic<bool> firing_{false};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tutti::perf
