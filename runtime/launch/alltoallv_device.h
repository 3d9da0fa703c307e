// The all-to-alls whose counts live in device memory (tuttiAllToAllvDevice, tuttiAllToAllvDynamic)
// on their stream: checked in runtime/api/api_alltoallv_device.cpp, carried here. Decisions:
//   - Everything that touches the communicator happens at the call, on the caller's thread, in
//     call order: the blocks are bound as ncclAllToAllv's are (one send and one receive per peer,
//     numbered by the call), their connections made, and the launch queued. So a call on another
//     stream after this one takes its numbers and connections after it on every rank, and no
//     worker thread ever binds or connects.
//   - The blocks are bound with the capacities and maxima the host gave, on every channel the
//     communicator has; the counts are not known yet. A host job queued before the launch on the
//     same stream reads them when it runs (after whatever wrote them earlier on that stream),
//     checks them against those limits, and sets each block's count, buffer and channel ranges in
//     the launch's arena, by the same rule as a send of that count would take: both ends of a pair
//     read the same count, so they cut it alike. That needs an executor that reads the arena where
//     the launch keeps it when the run starts (BackendTraits::readsArenaAtRun: the host backend);
//     other backends refuse the call by name.
//   - Receive counts that are found (the dynamic form) travel first: a launch of one count per
//     pair, bound whole at the call, between a job that copies the send counts into its buffer and
//     a job that writes what came to the user's array and sets the blocks.
//   - A count past its limit fails the communicator (ncclInvalidUsage, the pair, count and limit
//     named; the other ranks hear it as a failure notice), and leaves the blocks at 0 elements, so
//     the launch behind it moves nothing.
#pragma once

#include <cstddef>

#include "nccl.h"

struct ncclComm;

namespace tutti {

struct DeviceCountAllToAllv {
  const char* operation = "";
  ncclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  ncclDataType_t type = ncclInt8;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  const size_t* sendcounts = nullptr;  // device memory, one per rank
  size_t sendCapacity = 0;             // elements of sendbuff
  size_t recvCapacity = 0;             // elements of recvbuff
  // Both counts given: the receive counts (device memory).
  const size_t* recvcounts = nullptr;
  // Receive counts found: where they go (device memory), and the most one peer may send.
  size_t* foundCounts = nullptr;
  size_t maxRecvCount = 0;
};

// Binds the call's blocks and queues them on its stream behind the jobs that read its counts.
// Throws Error.
void enqueueDeviceCountAllToAllv(const DeviceCountAllToAllv& call);

}  // namespace tutti
