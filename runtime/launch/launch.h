// Launching a group: the calls collected between ncclGroupStart and the outermost ncclGroupEnd
// (or a single call outside a group) bound per communicator (comm_launch.h), their connections
// made, and submitted to the communicators' executor backends on the calls' stream.
#pragma once

#include <vector>

#include "runtime/launch/task.h"

namespace tutti {

// Runs a group of tasks: one launch per communicator, in order of first appearance. Throws Error.
void launchGroup(std::vector<Task> tasks);

// A launch of one operation outside a group (or a group of one): reuses a finished launch of the
// same shape when there is one. checked: the caller has just checked that the communicator is
// usable. Throws Error.
void launchSingle(const Task& t, bool checked);

}  // namespace tutti
