// Launching groups and single operations (launch.h): binding, connections, then the backend.
#include "runtime/launch/launch.h"

#include <algorithm>
#include <map>
#include <memory>
#include <span>

#include "runtime/api/api.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/launch_cache.h"
#include "runtime/launch/mailbox_path.h"

namespace tutti {

namespace {

// Counts a communicator's launches running on callers' threads while they bind and submit:
// ncclCommAbort from another thread waits for it to drop before freeing the communicator.
struct Active {
  std::span<ncclComm* const> comms;
  explicit Active(std::span<ncclComm* const> c) : comms(c) {
    for (ncclComm* comm : comms) comm->executor.activeLaunches++;
  }
  ~Active() {
    for (ncclComm* comm : comms) comm->executor.activeLaunches--;
  }
};

// Makes the connections the launches need, for every communicator of the group together, phase
// by phase (one thread may hold several ranks of one job). A connection half made leaves its
// communicator unusable, as a failed operation does.
void connectAll(const std::vector<CommLaunch*>& launches) {
  std::vector<std::pair<ncclComm*, std::vector<ConnKey>>> wanted;
  for (CommLaunch* L : launches) wanted.emplace_back(L->comm, L->keys());
  try {
    ensureConnections(wanted);
  } catch (const Error& e) {
    for (CommLaunch* L : launches)
      L->comm->fail(Error(e.code() == ErrorCode::Timeout ? ErrorCode::Remote : e.code(), e.message()));
    // A wait that only saw the abort reports why the communicator stopped (a peer's failure, a revoke), as a run does.
    if (e.code() == ErrorCode::Aborted)
      for (CommLaunch* L : launches) throwRecordedCause(L->comm);
    throw;
  }
  for (CommLaunch* L : launches) L->connect();
}

}  // namespace

void launchGroup(std::vector<Task> tasks) {
  // One launch per communicator, in order of first appearance.
  std::vector<std::shared_ptr<CommLaunch>> launches;
  for (const Task& t : tasks) {
    auto it = std::find_if(launches.begin(), launches.end(), [&](auto& L) { return L->comm == t.comm; });
    if (it == launches.end()) {
      launches.push_back(std::make_shared<CommLaunch>(t.comm, t.stream));
      it = launches.end() - 1;
    }
    if ((*it)->stream != t.stream)
      throw Error(ErrorCode::InvalidUsage, t.comm->where() +
                                               ": operations on one communicator in one group use different streams; "
                                               "they must use one stream (not supported yet)");
    (*it)->tasks.push_back(t);
  }
  std::vector<ncclComm*> comms;
  for (auto& L : launches) comms.push_back(L->comm);
  Active active(comms);
  std::vector<CommLaunch*> raw;
  for (auto& L : launches) {
    // The same check as at the call: the comm may have failed or been destroyed since.
    checkUsableComm("ncclGroupEnd", L->comm);
    L->bind();
    raw.push_back(L.get());
  }
  connectAll(raw);
  // Each stream's launches go to their backend together: one host job, or one kernel.
  std::map<std::pair<cudaStream_t, std::string>, std::vector<std::shared_ptr<CommLaunch>>> byStream;
  for (auto& L : launches) byStream[{L->stream, L->comm->executor.backend->name()}].push_back(L);
  for (auto& [key, group] : byStream) {
    for (auto& L : group) L->comm->executor.pendingStreamJobs++;
    std::vector<kern::Launch*> submitted;
    for (auto& L : group) submitted.push_back(L.get());
    // `done` owns the launches until the backend no longer needs them.
    group.front()->comm->executor.backend->submit(submitted, key.first, [group] {
      for (auto& L : group) L->comm->executor.pendingStreamJobs--;
    });
  }
}

std::shared_ptr<CommLaunch> bindLaunch(std::vector<Task> tasks, int nchannels) {
  ncclComm* comm = tasks.front().comm;
  ncclComm* const one[] = {comm};
  Active active(one);
  auto L = std::make_shared<CommLaunch>(comm, tasks.front().stream);
  Selection selection = chooseAlgorithm(comm, tasks.front());
  selection.nchannels = nchannels;
  L->selection = selection;
  L->tasks = std::move(tasks);
  L->bind();
  connectAll({L.get()});
  return L;
}

void submitLaunch(std::shared_ptr<CommLaunch> L) {
  ncclComm* comm = L->comm;
  ncclComm* const one[] = {comm};
  Active active(one);
  comm->executor.pendingStreamJobs++;
  kern::Launch* launch[] = {L.get()};
  const cudaStream_t stream = L->stream;
  // `done` owns the launch until the backend no longer needs it.
  comm->executor.backend->submit(launch, stream, [L] { L->comm->executor.pendingStreamJobs--; });
}

void launchSingle(const Task& t, bool checked) {
  ncclComm* comm = t.comm;
  if (t.coll == plan::Coll::Send || t.coll == plan::Coll::Recv ||
      (t.coll == plan::Coll::AlltoAll && t.in != nullptr && t.in == t.out)) {
    launchGroup({t});
    return;
  }
  if (!checked) checkUsableComm("ncclGroupEnd", comm);
  ncclComm* const one[] = {comm};
  Active active(one);
  if (t.stream == nullptr ? mailboxNow(comm, t) : queueMailbox(comm, t)) return;
  const Selection selection = chooseAlgorithm(comm, t);
  const LaunchShape shape{t.coll, t.count, t.type, t.op, t.root, t.stream, selection.algorithm, selection.nchannels};
  std::unique_ptr<CommLaunch> L = takeIdleLaunch(comm, shape);
  if (L) {
    L->rebind(t);
  } else {
    L = std::make_unique<CommLaunch>(comm, t.stream);
    L->tasks.push_back(t);
    L->selection = selection;
    L->bind();
    connectAll({L.get()});
  }
  comm->executor.pendingStreamJobs++;
  // The job's `done` gives the launch back; it captures one pointer, which std::function keeps
  // without allocating.
  CommLaunch* raw = L.release();
  kern::Launch* launch[] = {raw};
  comm->executor.backend->submit(launch, t.stream, [raw] {
    std::unique_ptr<CommLaunch> own(raw);
    ncclComm* owner = own->comm;
    const Task& task = own->tasks.front();
    const LaunchShape shape{task.coll,
                            task.count,
                            task.type,
                            task.op,
                            task.root,
                            task.stream,
                            own->selection->algorithm,
                            own->selection->nchannels};
    giveBackLaunch(owner, shape, std::move(own));
    owner->executor.pendingStreamJobs--;
  });
}

}  // namespace tutti
