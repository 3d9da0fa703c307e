// The emulated device (emulated_device.h): thread blocks as groups of host threads, and the shim's
// host side (shim.h).
#include "kernels/device/emulated_device.h"

#include <sched.h>

#include <barrier>
#include <chrono>
#include <memory>
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
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
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

void runEmulatedLaunches(const std::vector<EmulatedLaunch>& launches, int threadsPerBlock) {
  const int nthreads = threadsPerBlock < 1 ? 1 : threadsPerBlock;
  std::vector<std::unique_ptr<EmulatedBlock>> blocks;
  std::vector<std::thread> threads;
  for (const EmulatedLaunch& launch : launches)
    for (uint32_t b = 0; b < launch.work->nworkers; b++) blocks.push_back(std::make_unique<EmulatedBlock>(nthreads));
  threads.reserve(blocks.size() * size_t(nthreads));
  size_t block = 0;
  for (const EmulatedLaunch& launch : launches)
    for (uint32_t b = 0; b < launch.work->nworkers; b++, block++)
      for (int t = 0; t < nthreads; t++)
        threads.emplace_back([&launch, b, t, nthreads, blk = blocks[block].get()] {
          tThread = EmulatedThread{blk, t, nthreads};
          tPolls = 0;
          runWorker(*launch.work, launch.ops, b, launch.control, blk->shared);
        });
  for (std::thread& t : threads) t.join();
}

void runEmulatedBlock(int threads, const std::function<void()>& fn) {
  const int n = threads < 1 ? 1 : threads;
  EmulatedBlock block(n);
  std::vector<std::thread> pool;
  for (int t = 0; t < n; t++)
    pool.emplace_back([&, t] {
      tThread = EmulatedThread{&block, t, n};
      tPolls = 0;
      fn();
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace tutti::kern::dev
