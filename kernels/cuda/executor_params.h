// The parameters of the CUDA executor's kernel (executor_kernel.cu), as the cuda backend fills
// them. One kernel runs a whole group: the launches of several communicators (ranks of one
// thread sharing a stream) run as one grid, each launch on its own range of blocks, so that no
// launch waits behind another that needs it, however many there are. The operations are passed by value when they fit,
// so that a launch of a cached shape uploads nothing.
#pragma once

#include <cstdint>

#include "kernels/device/device_executor.h"
#include "kernels/work.h"

namespace tutti::kern::dev {

constexpr int kExecutorThreads = 512;   // threads per block
constexpr uint32_t kParamLaunches = 8;  // launches passed by value (more go in a table)
constexpr uint32_t kParamOps = 24;      // operations passed by value, all launches together

struct ParamLaunch {
  LaunchWork* work;     // device memory
  const OpWork* ops;    // device memory, or null: the kernel's ops from opsFirst
  ExecControl control;  // its own communicator's abort word and fault record
  uint32_t firstBlock;  // the launch's blocks are [firstBlock, next launch's firstBlock)
  uint32_t opsFirst;
};

struct ExecutorParams {
  uint32_t nlaunches;
  uint32_t pad;
  // More launches than kParamLaunches (a group of many communicators on one stream): all of them,
  // in device memory; null: launches[] holds them.
  const ParamLaunch* table;
  ParamLaunch launches[kParamLaunches];
  OpWork ops[kParamOps];
};
static_assert(sizeof(ExecutorParams) <= 4096, "kernel parameters are at most 4 KiB");

}  // namespace tutti::kern::dev
