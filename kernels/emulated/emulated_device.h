// The emulated device: the device executor's own code (device_executor.h) run on host threads, a
// group of threads per thread block, with the CUDA facilities it uses supplied by shim.h. Its
// "device memory" is host memory. CI runs every collective through it, so the device logic is
// tested on machines without a GPU.
#pragma once

#include <functional>
#include <vector>

#include "kernels/device/device_executor.h"
#include "kernels/work.h"

namespace tutti::kern::dev {

// One launch for the emulated device: its arena, its operations, its control words, and the blocks
// it runs (its first workers: those after the last with work are not launched).
struct EmulatedLaunch {
  LaunchWork* work;
  const OpWork* ops;
  ExecControl control;
  uint32_t blocks;
};

// Runs the blocks of the launches, each as a block of `threadsPerBlock` host threads, all blocks at
// once (a group's launches may wait on each other), and returns when all have returned (each is
// bounded by its control's timeout and abort word). Faults are in each control's fault record.
void runEmulatedLaunches(const std::vector<EmulatedLaunch>& launches, int threadsPerBlock);

// Runs fn on one emulated block of `threads` host threads (for tests of the block's code).
void runEmulatedBlock(int threads, const std::function<void()>& fn);

}  // namespace tutti::kern::dev
