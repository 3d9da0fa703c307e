// The registry of live communicators: a handle the user destroyed is recognised, not dereferenced.
#include "runtime/comm/comm_registry.h"
#include "base/live_handles.h"
#include "runtime/comm/comm.h"

namespace tutti {

void registerComm(ncclComm* comm) { LiveHandles<ncclComm>::instance().insert(comm); }
void unregisterComm(ncclComm* comm) { LiveHandles<ncclComm>::instance().erase(comm); }
bool isLiveComm(const ncclComm* comm) { return LiveHandles<ncclComm>::instance().contains(comm); }

}  // namespace tutti
