// A communicator's job on a stream without a launch: one-sided puts, signals and waits
// (runtime/launch/rma.cpp), and the reading of device-held all-to-all-v counts
// (runtime/launch/alltoallv_device.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "nccl.h"

struct ncclComm;

namespace tutti {

// Queues `job` on `stream`, after what is queued there (kern::ExecutorBackend::enqueueHostJob): the
// communicator is kept alive for it (pendingStreamJobs, which destroy and abort wait for; on the
// NULL stream activeLaunches, as the job runs before this returns), the flight recorder follows
// operation `flightSeq` through it where given, and an error it raises fails the communicator
// (and reaches the caller where the job ran before this returned).
void queueCommJob(ncclComm* comm, cudaStream_t stream, std::function<void()> job,
                  std::optional<uint64_t> flightSeq = std::nullopt);

}  // namespace tutti
