// The CUDA executor's kernel: one thread block per worker of each launch of a group, running the
// device executor's body (kernels/device/device_executor.h). Built into a fat binary that the
// cuda backend loads through the driver API (kernels/cuda/cuda_backend.cpp), so the library needs
// no CUDA at link time.
#include "kernels/cuda/executor_params.h"
#include "kernels/device/device_executor.h"

extern "C" __global__ void __launch_bounds__(tutti::kern::dev::kExecutorThreads)
    tuttiRunLaunches(const __grid_constant__ tutti::kern::dev::ExecutorParams params) {
  __shared__ tutti::kern::dev::BlockShared shared;
  const tutti::kern::dev::ParamLaunch* launches = params.table != nullptr ? params.table : params.launches;
  uint32_t i = 0;
  while (i + 1 < params.nlaunches && blockIdx.x >= launches[i + 1].firstBlock) i++;
  const tutti::kern::dev::ParamLaunch& launch = launches[i];
  const tutti::kern::OpWork* ops = launch.ops != nullptr ? launch.ops : params.ops + launch.opsFirst;
  tutti::kern::dev::runWorker(*launch.work, ops, blockIdx.x - launch.firstBlock, launch.control, shared);
}
