// The host functions of NCCL's device API: exported so that programs built against a newer NCCL
// link and run, refused (ncclInvalidUsage naming the function) until tutti has a device API; the
// team queries answer for host mode.
#define TUTTI_NCCL_DEVICE_API 1
#include <cstdint>
#include <string>

#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_registry.h"

using namespace tutti;

namespace {

[[noreturn]] void unsupported(const char* operation) {
  throw Error(ErrorCode::InvalidUsage,
              std::string(operation) + ": not supported yet (tutti's device API is not implemented)");
}

}  // namespace

TUTTI_API ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                          ncclDevComm_t* outDevComm) {
  return guard("ncclDevCommCreate", [] { unsupported("ncclDevCommCreate"); });
}
TUTTI_NCCL_ALIAS(ncclDevCommCreate)

TUTTI_API ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm) {
  return guard("ncclDevCommDestroy", [] { unsupported("ncclDevCommDestroy"); });
}
TUTTI_NCCL_ALIAS(ncclDevCommDestroy)

TUTTI_API ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                        ncclLsaBarrierHandle_t* outHandle,
                                                        ncclDevResourceRequirements_t* outReq) {
  return guard("ncclLsaBarrierCreateRequirement", [] { unsupported("ncclLsaBarrierCreateRequirement"); });
}
TUTTI_NCCL_ALIAS(ncclLsaBarrierCreateRequirement)

TUTTI_API ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                        ncclGinBarrierHandle_t* outHandle,
                                                        ncclDevResourceRequirements_t* outReq) {
  return guard("ncclGinBarrierCreateRequirement", [] { unsupported("ncclGinBarrierCreateRequirement"); });
}
TUTTI_NCCL_ALIAS(ncclGinBarrierCreateRequirement)

TUTTI_API ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                   ncclDevResourceRequirements_t* outReq) {
  return guard("ncclLLA2ACreateRequirement", [] { unsupported("ncclLLA2ACreateRequirement"); });
}
TUTTI_NCCL_ALIAS(ncclLLA2ACreateRequirement)

// Slots of 16-byte lines: one per element line of the largest element, as a sizing helper.
TUTTI_API int pncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  if (maxElts <= 0 || maxEltSize <= 0) return 0;
  return int((int64_t(maxElts) * maxEltSize + 7) / 8);
}
TUTTI_NCCL_ALIAS(ncclLLA2ACalcSlots)

// Teams: the world, and the trivial one-rank local and rail teams, since no rank shares
// device memory with another on the host backend.
TUTTI_API ncclTeam_t pncclTeamWorld(ncclComm_t comm) {
  if (!comm || !isLiveComm(comm)) return ncclTeam_t{0, -1, 1};
  return ncclTeam_t{comm->identity.nranks, comm->identity.rank, 1};
}
TUTTI_NCCL_ALIAS(ncclTeamWorld)

TUTTI_API ncclTeam_t pncclTeamLsa(ncclComm_t comm) {
  if (!comm || !isLiveComm(comm)) return ncclTeam_t{0, -1, 1};
  return ncclTeam_t{1, 0, 1};
}
TUTTI_NCCL_ALIAS(ncclTeamLsa)

TUTTI_API ncclTeam_t pncclTeamRail(ncclComm_t comm) {
  if (!comm || !isLiveComm(comm)) return ncclTeam_t{0, -1, 1};
  return ncclTeam_t{comm->identity.nranks, comm->identity.rank, 1};
}
TUTTI_NCCL_ALIAS(ncclTeamRail)

TUTTI_API int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!comm || !isLiveComm(comm)) return -1;
  return comm->identity.rank + (rank - team.rank) * team.stride;
}
TUTTI_NCCL_ALIAS(ncclTeamRankToWorld)

TUTTI_API int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!comm || !isLiveComm(comm)) return -1;
  int world = comm->identity.rank + (rank - team.rank) * team.stride;
  return world == comm->identity.rank ? 0 : -1;
}
TUTTI_NCCL_ALIAS(ncclTeamRankToLsa)

TUTTI_API ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  return guard("ncclCommQueryProperties", [] { unsupported("ncclCommQueryProperties"); });
}
TUTTI_NCCL_ALIAS(ncclCommQueryProperties)

TUTTI_API ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  return guard("ncclGetPeerDevicePointer", [] { unsupported("ncclGetPeerDevicePointer"); });
}
TUTTI_NCCL_ALIAS(ncclGetPeerDevicePointer)

TUTTI_API ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  return guard("ncclGetLsaDevicePointer", [] { unsupported("ncclGetLsaDevicePointer"); });
}
TUTTI_NCCL_ALIAS(ncclGetLsaDevicePointer)

TUTTI_API ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  return guard("ncclGetLsaMultimemDevicePointer", [] { unsupported("ncclGetLsaMultimemDevicePointer"); });
}
TUTTI_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer)

TUTTI_API ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                                     void** outPtr) {
  return guard("ncclGetMultimemDevicePointer", [] { unsupported("ncclGetMultimemDevicePointer"); });
}
TUTTI_NCCL_ALIAS(ncclGetMultimemDevicePointer)

TUTTI_API ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle_t* outHandle,
                                                       ncclDevResourceRequirements_t* outReq) {
  return guard("ncclGinOutboxCreateRequirement", [] { unsupported("ncclGinOutboxCreateRequirement"); });
}
TUTTI_NCCL_ALIAS(ncclGinOutboxCreateRequirement)

TUTTI_API ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                                         ncclGinInboxA2AHandle_t* outHandle,
                                                         ncclDevResourceRequirements_t* outReq) {
  return guard("ncclGinInboxA2ACreateRequirement", [] { unsupported("ncclGinInboxA2ACreateRequirement"); });
}
TUTTI_NCCL_ALIAS(ncclGinInboxA2ACreateRequirement)
