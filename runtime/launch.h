// Tasks, groups and launch: the calls collected between ncclGroupStart and the outermost
// ncclGroupEnd (or a single call outside a group) become plans bound to buffers, connections
// and workers, and run on the caller's thread or a host stream.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "nccl.h"

struct ncclComm;

namespace tutti {

enum class CollKind { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter, Send, Recv };
const char* collName(CollKind kind);

struct Task {
  CollKind kind;
  const void* in;
  void* out;
  size_t count;  // as the user's call names it (per rank for the gathering collectives)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;      // root, or the peer of Send/Recv
  ncclComm* comm;
  cudaStream_t stream;
};

// The algorithm name and channel count a task would run with (tuttiCommAlgorithm).
std::pair<std::string, int> algorithmFor(const Task& task);

// Adds a validated task (its communicator just checked usable) to the current group, or runs it
// now outside a group. Throws Error.
void enqueueTask(const Task& task);

void groupStart();
// Ends a group level; the outermost one launches everything collected. Throws Error.
void groupEnd();
// Ends the outermost group without running it: the cost model's estimate of its operations in
// microseconds (per communicator in sequence, communicators side by side). Throws Error.
double groupSimulateEnd();
// Records an error raised by a call inside a group: the outermost ncclGroupEnd then returns it
// and drops the group's tasks, as NCCL does.
void groupRecordError(int result);
int groupDepth();

}  // namespace tutti
