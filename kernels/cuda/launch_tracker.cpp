// The cuda backend's launches in flight (launch_tracker.h).
#include "kernels/cuda/launch_tracker.h"

#include <chrono>
#include <utility>

#include "base/log.h"

namespace tutti::kern::cuda {

namespace {
// The watcher looks again after this long while nothing moved, doubling up to the most: a
// launch's end is seen within a few microseconds while launches end in quick succession, and a
// long kernel costs a poll a millisecond.
constexpr std::chrono::microseconds kFirstPoll{5};
constexpr std::chrono::microseconds kLongestPoll{1000};
}  // namespace

LaunchTracker::LaunchTracker(const Driver& driver, CUcontext context) : d_(driver), context_(context) {}

LaunchTracker::~LaunchTracker() {
  const bool drained = drain(drainSeconds_);
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  if (!drained) {
    // Their callbacks own launches and memory that kernels still running may use: kept, never run.
    TUTTI_WARN(
        "cuda backend: %zu launch(es) did not end within %.0f s of the communicator's destruction; what they use is "
        "left allocated",
        flights_.size(), drainSeconds_);
    new std::deque<InFlight>(std::move(flights_));
    flights_.clear();
  }
  lock.unlock();
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (drained)
    for (CUevent e : allEvents_) d_.cuEventDestroy(e);
}

LaunchTracker::Events LaunchTracker::takeEvents() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idleEvents_.empty()) {
      Events e = idleEvents_.back();
      idleEvents_.pop_back();
      return e;
    }
  }
  Events e;
  check(d_, d_.cuEventCreate(&e.start, CU_EVENT_DISABLE_TIMING), "cuEventCreate", "tracking a launch");
  if (CUresult r = d_.cuEventCreate(&e.end, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
    d_.cuEventDestroy(e.start);
    check(d_, r, "cuEventCreate", "tracking a launch");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allEvents_.push_back(e.start);
  allEvents_.push_back(e.end);
  return e;
}

void LaunchTracker::giveBackEvents(Events events) {
  std::lock_guard<std::mutex> lock(mutex_);
  idleEvents_.push_back(events);
}

CUresult LaunchTracker::endOf(const InFlight& f) const { return d_.cuEventQuery(f.events.end); }

void LaunchTracker::track(InFlight flight) {
  const CUresult end = endOf(flight);
  if (end != CUDA_ERROR_NOT_READY) {
    if (flight.began) flight.began();
    flight.finished(end);
    giveBackEvents(flight.events);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  flights_.push_back(std::move(flight));
  if (!watcher_.joinable()) watcher_ = std::thread([this] { watch(); });
  wake_.notify_one();
}

size_t LaunchTracker::inFlight() {
  std::lock_guard<std::mutex> lock(mutex_);
  return flights_.size() + finishing_;
}

bool LaunchTracker::drain(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!flights_.empty() || finishing_ > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
  }
  return true;
}

void LaunchTracker::watch() {
  d_.cuCtxSetCurrent(context_);
  std::chrono::microseconds poll = kFirstPoll;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !flights_.empty(); });
    if (flights_.empty()) return;  // stopping
    std::vector<std::function<void()>> begun;
    std::vector<std::pair<InFlight, CUresult>> ended;
    for (auto it = flights_.begin(); it != flights_.end();) {
      if (it->began && d_.cuEventQuery(it->events.start) != CUDA_ERROR_NOT_READY) {
        begun.push_back(std::move(it->began));
        it->began = nullptr;
      }
      const CUresult end = endOf(*it);
      if (end == CUDA_ERROR_NOT_READY) {
        ++it;
        continue;
      }
      ended.emplace_back(std::move(*it), end);
      it = flights_.erase(it);
    }
    if (begun.empty() && ended.empty()) {
      wake_.wait_for(lock, poll);
      poll = std::min(2 * poll, kLongestPoll);
      continue;
    }
    poll = kFirstPoll;
    finishing_ += ended.size();
    lock.unlock();
    for (auto& b : begun) b();
    for (auto& [flight, end] : ended) {
      if (flight.began) flight.began();
      flight.finished(end);
    }
    lock.lock();
    for (auto& [flight, end] : ended) idleEvents_.push_back(flight.events);
    finishing_ -= ended.size();
  }
}

}  // namespace tutti::kern::cuda
