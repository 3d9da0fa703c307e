// The emulated device (emulated_device.h): thread blocks as groups of host threads, and the shim's
// host side (shim.h).
#include "kernels/emulated/emulated_device.h"

#include <sched.h>

#include <pthread.h>

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tutti::kern::dev {

struct EmulatedBlock {
  explicit EmulatedBlock(int threads) : sync(threads) {}
  std::barrier<> sync;
  BlockShared shared{};
};

namespace {
thread_local EmulatedThread tThread;
thread_local unsigned tPolls = 0;
}  // namespace

EmulatedThread& emulatedThread() { return tThread; }

void emulatedBarrier() {
  tPolls = 0;
  tThread.block->sync.arrive_and_wait();
}

uint64_t emulatedNowNs() {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A poll loop's back-off: the peer it waits for is often a thread of another rank on the same
// few cores, so yield at once, and after a while sleep briefly.
void emulatedPause() {
  if (++tPolls < 256) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

namespace {

// The host threads that play thread blocks' threads, parked between launches and reused: a launch
// takes as many as it has threads (all of a grid's blocks run at once, since they wait on each
// other), making more only when every parked one is busy. Creating a thread per emulated thread
// per launch cost more than the launches of small operations. A forked child starts with none
// (the parent's threads do not exist there).
class ThreadPark {
 public:
  static ThreadPark& instance() {
    static ThreadPark* park = [] {
      pthread_atfork(nullptr, nullptr, [] { instance().forgetAfterFork(); });
      return new ThreadPark;  // never destroyed: parked threads may outlive static destruction
    }();
    return *park;
  }

  // Runs every task on a thread of its own, all at once; returns when all have returned.
  void runAll(std::vector<std::function<void()>>& tasks) {
    struct Done {
      std::mutex mutex;
      std::condition_variable cv;
      size_t left;
    } done;
    done.left = tasks.size();
    for (std::function<void()>& task : tasks) {
      Worker* w = take();
      std::lock_guard<std::mutex> lock(w->mutex);
      w->task = [&task, &done] {
        task();
        std::lock_guard<std::mutex> l(done.mutex);
        if (--done.left == 0) done.cv.notify_all();
      };
      w->cv.notify_one();
    }
    std::unique_lock<std::mutex> lock(done.mutex);
    done.cv.wait(lock, [&] { return done.left == 0; });
  }

 private:
  struct Worker {
    std::mutex mutex;
    std::condition_variable cv;
    std::function<void()> task;
  };

  Worker* take() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        Worker* w = idle_.back();
        idle_.pop_back();
        return w;
      }
    }
    auto* w = new Worker;
    std::thread([this, w] { loop(w); }).detach();
    return w;
  }

  void loop(Worker* w) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(w->mutex);
        w->cv.wait(lock, [w] { return static_cast<bool>(w->task); });
        task = std::move(w->task);
        w->task = nullptr;
      }
      task();
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.push_back(w);
    }
  }

  void forgetAfterFork() {
    new (&mutex_) std::mutex;
    idle_.clear();  // their threads are the parent's; the Workers leak, a few bytes each
  }

  std::mutex mutex_;
  std::vector<Worker*> idle_;
};

}  // namespace

void runEmulatedLaunches(const std::vector<EmulatedLaunch>& launches, int threadsPerBlock) {
  const int nthreads = threadsPerBlock < 1 ? 1 : threadsPerBlock;
  std::vector<std::unique_ptr<EmulatedBlock>> blocks;
  std::vector<std::function<void()>> tasks;
  for (const EmulatedLaunch& launch : launches)
    for (uint32_t b = 0; b < launch.blocks; b++) blocks.push_back(std::make_unique<EmulatedBlock>(nthreads));
  size_t block = 0;
  for (const EmulatedLaunch& launch : launches)
    for (uint32_t b = 0; b < launch.blocks; b++, block++)
      for (int t = 0; t < nthreads; t++)
        tasks.emplace_back([&launch, b, t, nthreads, blk = blocks[block].get()] {
          tThread = EmulatedThread{blk, t, nthreads};
          tPolls = 0;
          runWorker(*launch.work, launch.ops, b, launch.control, blk->shared);
        });
  ThreadPark::instance().runAll(tasks);
}

void runEmulatedBlock(int threads, const std::function<void()>& fn) {
  const int n = threads < 1 ? 1 : threads;
  EmulatedBlock block(n);
  std::vector<std::function<void()>> tasks;
  for (int t = 0; t < n; t++)
    tasks.emplace_back([&, t] {
      tThread = EmulatedThread{&block, t, n};
      tPolls = 0;
      fn();
    });
  ThreadPark::instance().runAll(tasks);
}

}  // namespace tutti::kern::dev
