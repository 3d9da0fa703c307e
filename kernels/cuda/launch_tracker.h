// The cuda backend's launches in flight (launch_tracker.cpp): each submission is bracketed by two
// events on its stream, and a watcher thread tells when each was reached, so that what the host
// keeps for a launch (its flight-recorder state, the network proxy's polling, its device arena,
// its fault) follows the launch itself rather than the moment it was queued. A submission whose
// end the stream has already reached when it was queued (a stream that runs on the calling
// thread) is finished by its caller at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_driver.h"

namespace tutti::kern::cuda {

class LaunchTracker {
 public:
  struct Events {
    CUevent start = nullptr, end = nullptr;
  };
  // What happens when: `began` once the stream reached the start event, then `finished` once it
  // reached the end (CUDA_SUCCESS) or the context broke (the driver's error, which the kernels'
  // own fault record cannot carry). Both run on the watcher thread, never under its lock.
  struct InFlight {
    Events events;
    std::function<void()> began;
    std::function<void(CUresult)> finished;
  };

  // `context`: the context whose events it records (current on the watcher thread).
  LaunchTracker(const Driver& driver, CUcontext context);
  // Waits for what is in flight, at most `seconds` (see drain); what has not ended by then is
  // abandoned: its callbacks never run.
  ~LaunchTracker();
  LaunchTracker(const LaunchTracker&) = delete;
  LaunchTracker& operator=(const LaunchTracker&) = delete;

  // A pair of events to record around a submission (the caller's context current); taken from
  // those that finished submissions gave back.
  Events takeEvents();
  void giveBackEvents(Events events);
  // Watches a submission whose events are recorded. If the end was reached already, runs its
  // callbacks on the calling thread before returning (a stream that ran its work at once).
  void track(InFlight flight);
  // Waits until nothing is in flight, or `seconds` have passed: true when nothing is.
  bool drain(double seconds);
  // How long destruction waits for what is in flight.
  void setDrainSeconds(double seconds) { drainSeconds_ = seconds; }
  size_t inFlight();

 private:
  void watch();
  // The end's state: CUDA_SUCCESS when reached, CUDA_ERROR_NOT_READY while not, else the error.
  CUresult endOf(const InFlight& f) const;

  const Driver& d_;
  CUcontext context_;
  double drainSeconds_ = 30;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> flights_;
  std::vector<Events> idleEvents_;
  std::vector<CUevent> allEvents_;
  size_t finishing_ = 0;  // taken off flights_, callbacks running
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace tutti::kern::cuda
