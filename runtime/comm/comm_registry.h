// The live communicators of the process (comm_registry.cpp).
#pragma once

struct ncclComm;

namespace tutti {

// Live communicators, so a destroyed handle is recognised instead of dereferenced.
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);
bool isLiveComm(const ncclComm* comm);

}  // namespace tutti
