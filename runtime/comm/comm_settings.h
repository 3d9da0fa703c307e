// The settings a communicator agrees on at init (comm_settings.cpp).
#pragma once

struct ncclComm;

namespace tutti {

struct RankInfo;
namespace kern {
struct BackendTraits;
}

// This rank's proposal (channels defaulting to the backend's), the adoption of rank 0's by every
// rank, the channels fitted to what a shared GPU holds resident once the backend is made, and the
// waits fitted to the host's cores once the selector knows them.
void proposeSettings(const ncclComm* comm, RankInfo* me, const kern::BackendTraits& traits);
void adoptSettings(ncclComm* comm);
void fitChannelsToDevice(ncclComm* comm);
void fitWaitsToHost(ncclComm* comm);

}  // namespace tutti
