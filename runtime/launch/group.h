// Groups: calls between ncclGroupStart and the outermost ncclGroupEnd are collected per thread
// and launched together; a call outside a group is its own group.
#pragma once

#include <string>
#include <utility>

#include "runtime/launch/task.h"

namespace tutti {

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
