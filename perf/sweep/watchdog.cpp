// -T's watchdog (watchdog.h): names the late ranks and what their workers wait for, aborts their communicators, exits.
#include "perf/sweep/watchdog.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tutti/tutti.h"

namespace tutti::perf {
namespace {

// What the comm's workers wait for, one "#     waiting: " line each, so that the report names the peer that held the
// rank up and not only the rank; "" when none of its workers sleeps in a wait.
std::string waitingLines(ncclComm_t comm) {
  if (comm == nullptr) return "";
  std::string text(16384, '\0');
  if (tuttiCommDescribeWait(comm, text.data(), text.size()) != ncclSuccess) return "";
  text.resize(std::strlen(text.c_str()));
  std::string lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines += "#     waiting: " + line + "\n";
  return lines;
}

}  // namespace

Watchdog::Watchdog(int ranks, int timeoutSeconds) : slots_(size_t(ranks)), timeoutSeconds_(timeoutSeconds) {
  if (timeoutSeconds_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::attach(int index, ncclComm_t comm, int rank) {
  std::lock_guard lock(mutex_);
  if (comm != nullptr) slots_[size_t(index)].comms.push_back(comm);
  slots_[size_t(index)].rank = rank;
}

void Watchdog::detach(int index) {
  std::lock_guard lock(mutex_);
  slots_[size_t(index)].comms.clear();
}

void Watchdog::busy(int index, std::string what, int limitSeconds) {
  std::lock_guard lock(mutex_);
  slots_[size_t(index)].since = Clock::now();
  slots_[size_t(index)].limitSeconds = limitSeconds > 0 ? limitSeconds : timeoutSeconds_;
  slots_[size_t(index)].what = std::move(what);
}

void Watchdog::idle(int index) {
  std::lock_guard lock(mutex_);
  slots_[size_t(index)].what.clear();
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    std::string late;
    for (const Slot& s : slots_)
      if (!s.what.empty() && std::chrono::duration<double>(Clock::now() - s.since).count() > s.limitSeconds) {
        late += "#   rank " + std::to_string(s.rank) + " did not finish " + s.what + " within " +
                std::to_string(s.limitSeconds) + " s\n";
        for (ncclComm_t comm : s.comms) late += waitingLines(comm);
      }
    if (late.empty()) continue;
    firing_ = true;
    std::printf("# Test timeout (-T %d s) in process %d; aborting its communicators:\n%s", timeoutSeconds_,
                int(getpid()), late.c_str());
    std::fflush(stdout);
    for (Slot& s : slots_)
      for (ncclComm_t comm : s.comms) ncclCommAbort(comm);
    // The rank threads may still hold the aborted communicators: leave without unwinding them.
    std::fflush(stderr);
    std::_Exit(kTimeoutExitCode);
  }
}

}  // namespace tutti::perf
