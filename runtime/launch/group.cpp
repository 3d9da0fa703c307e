// Groups (group.h): the thread's group state, and what ending a group does.
#include "runtime/launch/group.h"

#include <algorithm>
#include <map>
#include <vector>

#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/rma.h"

namespace tutti {

namespace {

struct GroupState {
  int depth = 0;
  int error = ncclSuccess;
  std::vector<Task> tasks;
};
thread_local GroupState tGroup;

// Takes the group's tasks and its recorded error, leaving the state empty.
std::vector<Task> takeTasks(int* error) {
  std::vector<Task> tasks = std::move(tGroup.tasks);
  tGroup.tasks.clear();
  *error = tGroup.error;
  tGroup.error = ncclSuccess;
  return tasks;
}

}  // namespace

std::pair<std::string, int> algorithmFor(const Task& task) {
  Selection s = chooseAlgorithm(task.comm, task);
  return {s.algorithm->name, std::clamp(s.nchannels, 1, task.comm->settings.nchannels)};
}

void enqueueTask(const Task& task) {
  if (tGroup.depth > 0) {
    tGroup.tasks.push_back(task);
    return;
  }
  launchSingle(task, true);  // the call has just checked the communicator
}

void groupStart() { tGroup.depth++; }

void groupEnd() {
  if (tGroup.depth == 0)
    throw Error(ErrorCode::InvalidUsage, "ncclGroupEnd: not inside a group (no matching ncclGroupStart)");
  if (--tGroup.depth > 0) return;
  int error = ncclSuccess;
  std::vector<Task> tasks = takeTasks(&error);
  if (error != ncclSuccess) {
    const size_t dropped = tasks.size() + rmaGroupSize();
    endRmaGroup(true);
    throw Error(ErrorCode::InvalidUsage,
                "ncclGroupEnd: a call inside the group failed (see the earlier error); the group's " +
                    std::to_string(dropped) + " other operations were dropped");
  }
  try {
    if (tasks.size() == 1)
      launchSingle(tasks.front(), false);
    else if (!tasks.empty())
      launchGroup(std::move(tasks));
  } catch (...) {
    endRmaGroup(true);
    throw;
  }
  endRmaGroup(false);
}

double groupSimulateEnd() {
  if (tGroup.depth == 0)
    throw Error(ErrorCode::InvalidUsage, "ncclGroupSimulateEnd: not inside a group (no matching ncclGroupStart)");
  if (tGroup.depth > 1) {
    tGroup.depth--;
    throw Error(ErrorCode::InvalidUsage,
                "ncclGroupSimulateEnd: called inside a nested group; it must end the outermost one "
                "(the inner group was ended, nothing was simulated)");
  }
  tGroup.depth = 0;
  endRmaGroup(true);  // one-sided operations have no cost model: not simulated, and dropped
  int error = ncclSuccess;
  std::vector<Task> tasks = takeTasks(&error);
  if (error != ncclSuccess)
    throw Error(ErrorCode::InvalidUsage,
                "ncclGroupSimulateEnd: a call inside the group failed (see the earlier error)");
  // A communicator's operations run one after another; communicators run side by side.
  std::map<ncclComm*, double> perComm;
  for (const Task& t : tasks) {
    checkUsableComm("ncclGroupSimulateEnd", t.comm);
    perComm[t.comm] += t.comm->planning.selector->estimate(
        t.coll, modelBytes(t.coll, t.count, kern::dtypeSize(t.type), t.comm->identity.nranks));
  }
  double longest = 0;
  for (auto& [comm, us] : perComm) longest = std::max(longest, us);
  return longest;
}

void groupRecordError(int result) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess) tGroup.error = result;
}

int groupDepth() { return tGroup.depth; }

}  // namespace tutti
