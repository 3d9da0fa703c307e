// Launching a group: the calls collected between ncclGroupStart and the outermost ncclGroupEnd
// (or a single call outside a group) bound per communicator (comm_launch.h), their connections
// made, and submitted to the communicators' executor backends on the calls' stream.
#pragma once

#include <memory>
#include <vector>

#include "runtime/launch/task.h"

namespace tutti {

class CommLaunch;

// Runs a group of tasks: one launch per communicator, in order of first appearance. Throws Error.
void launchGroup(std::vector<Task> tasks);

// A launch of one operation outside a group (or a group of one): reuses a finished launch of the
// same shape when there is one. checked: the caller has just checked that the communicator is
// usable. Throws Error.
void launchSingle(const Task& t, bool checked);

// The two halves of a launch of one communicator's tasks, for a caller that changes the arena
// between them (runtime/launch/alltoallv_device.h): bound on `nchannels` channels whatever the
// counts (the direct algorithm, as sends and receives take) and connected; then submitted on the
// tasks' stream, after whatever the caller queued there in between. Throw Error.
std::shared_ptr<CommLaunch> bindLaunch(std::vector<Task> tasks, int nchannels);
void submitLaunch(std::shared_ptr<CommLaunch> launch);

}  // namespace tutti
