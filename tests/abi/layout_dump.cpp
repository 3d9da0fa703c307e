// Prints every ABI fact of nccl.h (layouts, enum and macro values, initialisers, function types)
// one per line; built against tutti's header, its output is compared with NVIDIA's 2.30.7 facts
// (nccl_facts_2.30.7.txt, which this program printed built against NVIDIA's 2.30.7 headers).
#if defined(TUTTI_ABI_NVIDIA_HEADER)
// NVIDIA's device headers expect CUDA's runtime header and size_t to come first.
#include <cuda_runtime.h>

#include <cstddef>
using std::size_t;
#include <nccl.h>
#include <nccl_device.h>
#else
#define TUTTI_NCCL_DEVICE_API 1
#include <nccl.h>
#endif

#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <typeinfo>

#include "function_list.h"

namespace {

std::string demangled(const std::type_info& type) {
  int status = 0;
  char* text = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string result = status == 0 && text != nullptr ? text : type.name();
  std::free(text);
  return result;
}

void fact(const char* name, long long value) { std::printf("%s %lld\n", name, value); }
void fact(const char* name, const std::string& value) { std::printf("%s %s\n", name, value.c_str()); }

}  // namespace

#define SIZE(type)                                                 \
  fact("sizeof(" #type ")", static_cast<long long>(sizeof(type))), \
      fact("alignof(" #type ")", static_cast<long long>(alignof(type)))
#define FIELD(type, field)                                                               \
  fact("offsetof(" #type "," #field ")", static_cast<long long>(offsetof(type, field))), \
      fact("type(" #type "." #field ")", demangled(typeid(decltype(type::field))))
#define VALUE(name) fact(#name, static_cast<long long>(name))
#define IS_NULL(name) fact(#name, (name) == nullptr ? "null" : "not null")
#define TYPE_OF(expr) fact("type(" #expr ")", demangled(typeid(expr)))
#define FUNCTION(Name)                                             \
  fact("function(nccl" #Name ")", demangled(typeid(&nccl##Name))); \
  fact("function(pnccl" #Name ")", demangled(typeid(&pnccl##Name)));
#define DEVICE_FUNCTION(Name) fact("function(nccl" #Name ")", demangled(typeid(&nccl##Name)));

int main() {
  SIZE(ncclUniqueId);
  FIELD(ncclUniqueId, internal);
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(cudaStream_t);
  TYPE_OF(ncclComm_t);
  TYPE_OF(ncclWindow_t);
  TYPE_OF(cudaStream_t);

  SIZE(ncclConfig_t);
  TYPE_OF(ncclConfig_t);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  FIELD(ncclConfig_t, graphUsageMode);
  FIELD(ncclConfig_t, numRmaCtx);
  FIELD(ncclConfig_t, maxP2pPeers);
  FIELD(ncclConfig_t, graphStreamOrdering);

  SIZE(ncclSimInfo_t);
  TYPE_OF(ncclSimInfo_t);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);

  // The initialisers, field by field (memcmp would compare padding, which C leaves unspecified).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  VALUE(config.size);
  VALUE(config.magic);
  VALUE(config.version);
  VALUE(config.blocking);
  VALUE(config.cgaClusterSize);
  VALUE(config.minCTAs);
  VALUE(config.maxCTAs);
  IS_NULL(config.netName);
  VALUE(config.splitShare);
  VALUE(config.trafficClass);
  IS_NULL(config.commName);
  VALUE(config.collnetEnable);
  VALUE(config.CTAPolicy);
  VALUE(config.shrinkShare);
  VALUE(config.nvlsCTAs);
  VALUE(config.nChannelsPerNetPeer);
  VALUE(config.nvlinkCentricSched);
  VALUE(config.graphUsageMode);
  VALUE(config.numRmaCtx);
  VALUE(config.maxP2pPeers);
  VALUE(config.graphStreamOrdering);
  ncclSimInfo_t simInfo = NCCL_SIM_INFO_INITIALIZER;
  VALUE(simInfo.size);
  VALUE(simInfo.magic);
  VALUE(simInfo.version);
  fact("simInfo.estimatedTime", std::to_string(simInfo.estimatedTime));

  SIZE(ncclResult_t);
  TYPE_OF(ncclResult_t);
  VALUE(ncclSuccess);
  VALUE(ncclUnhandledCudaError);
  VALUE(ncclSystemError);
  VALUE(ncclInternalError);
  VALUE(ncclInvalidArgument);
  VALUE(ncclInvalidUsage);
  VALUE(ncclRemoteError);
  VALUE(ncclInProgress);
  VALUE(ncclTimeout);
  VALUE(ncclNumResults);

  SIZE(ncclCommMemStat_t);
  TYPE_OF(ncclCommMemStat_t);
  VALUE(ncclStatGpuMemSuspend);
  VALUE(ncclStatGpuMemSuspended);
  VALUE(ncclStatGpuMemPersist);
  VALUE(ncclStatGpuMemTotal);

  SIZE(ncclWaitSignalDesc_t);
  TYPE_OF(ncclWaitSignalDesc_t);
  FIELD(ncclWaitSignalDesc_t, opCnt);
  FIELD(ncclWaitSignalDesc_t, peer);
  FIELD(ncclWaitSignalDesc_t, sigIdx);
  FIELD(ncclWaitSignalDesc_t, ctx);

  SIZE(ncclParamHandle_t);
  TYPE_OF(ncclParamHandle_t);

  SIZE(ncclRedOp_t);
  SIZE(ncclRedOp_dummy_t);
  TYPE_OF(ncclRedOp_t);
  VALUE(ncclNumOps_dummy);
  VALUE(ncclSum);
  VALUE(ncclProd);
  VALUE(ncclMax);
  VALUE(ncclMin);
  VALUE(ncclAvg);
  VALUE(ncclNumOps);
  VALUE(ncclMaxRedOp);

  SIZE(ncclDataType_t);
  TYPE_OF(ncclDataType_t);
  VALUE(ncclInt8);
  VALUE(ncclChar);
  VALUE(ncclUint8);
  VALUE(ncclInt32);
  VALUE(ncclInt);
  VALUE(ncclUint32);
  VALUE(ncclInt64);
  VALUE(ncclUint64);
  VALUE(ncclFloat16);
  VALUE(ncclHalf);
  VALUE(ncclFloat32);
  VALUE(ncclFloat);
  VALUE(ncclFloat64);
  VALUE(ncclDouble);
  VALUE(ncclBfloat16);
  VALUE(ncclFloat8e4m3);
  VALUE(ncclFloat8e5m2);
  VALUE(ncclNumTypes);

  SIZE(ncclScalarResidence_t);
  TYPE_OF(ncclScalarResidence_t);
  VALUE(ncclScalarDevice);
  VALUE(ncclScalarHostImmediate);

  VALUE(NCCL_MAJOR);
  VALUE(NCCL_MINOR);
  VALUE(NCCL_PATCH);
  fact("NCCL_SUFFIX", std::string("\"") + NCCL_SUFFIX + "\"");
  VALUE(NCCL_VERSION_CODE);
  VALUE(NCCL_VERSION(2, 8, 4));
  VALUE(NCCL_VERSION(2, 9, 6));
  VALUE(NCCL_VERSION(2, 28, 9));
  VALUE(NCCL_VERSION(2, 30, 7));
  VALUE(NCCL_VERSION(3, 1, 0));
  VALUE(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  IS_NULL(NCCL_COMM_NULL);
  VALUE(NCCL_UNIQUE_ID_BYTES);
  VALUE(NCCL_CONFIG_UNDEF_INT);
  TYPE_OF(NCCL_CONFIG_UNDEF_INT);
  IS_NULL(NCCL_CONFIG_UNDEF_PTR);
  VALUE(NCCL_SPLIT_NOCOLOR);
  TYPE_OF(NCCL_SPLIT_NOCOLOR);
  fact("NCCL_UNDEF_FLOAT", std::to_string(NCCL_UNDEF_FLOAT));
  TYPE_OF(NCCL_UNDEF_FLOAT);
  VALUE(NCCL_WIN_DEFAULT);
  VALUE(NCCL_WIN_COLL_SYMMETRIC);
  VALUE(NCCL_WIN_STRICT_ORDERING);
  VALUE(NCCL_WIN_REQUIRED_ALIGNMENT);
  VALUE(NCCL_CTA_POLICY_DEFAULT);
  VALUE(NCCL_CTA_POLICY_EFFICIENCY);
  VALUE(NCCL_CTA_POLICY_ZERO);
  VALUE(NCCL_SHRINK_DEFAULT);
  VALUE(NCCL_SHRINK_ABORT);
  VALUE(NCCL_REVOKE_DEFAULT);
  VALUE(NCCL_SUSPEND_MEM);
  VALUE(NCCL_API_MAGIC);

  // Function types: C++ spells out each parameter's type, so a wrong parameter shows here.
  TUTTI_ABI_FOR_EACH_FUNCTION(FUNCTION)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  FUNCTION(ResetDebugInit)
#pragma GCC diagnostic pop

  // The device-API host functions. NVIDIA overloads the team functions in C++ (a host/device
  // inline taking ncclDevComm); selecting the C overload by its exact type is the check.
  SIZE(ncclTeam_t);
  TYPE_OF(ncclTeam_t);
  FIELD(ncclTeam_t, nRanks);
  FIELD(ncclTeam_t, rank);
  FIELD(ncclTeam_t, stride);
  SIZE(ncclMultimemHandle_t);
  FIELD(ncclMultimemHandle_t, mcBasePtr);
  TUTTI_ABI_FOR_EACH_DEVICE_FUNCTION(DEVICE_FUNCTION)
  TYPE_OF(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamWorld));
  TYPE_OF(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamLsa));
  TYPE_OF(static_cast<ncclTeam_t (*)(ncclComm_t)>(&ncclTeamRail));
  TYPE_OF(static_cast<int (*)(ncclComm_t, ncclTeam_t, int)>(&ncclTeamRankToWorld));
  TYPE_OF(static_cast<int (*)(ncclComm_t, ncclTeam_t, int)>(&ncclTeamRankToLsa));
  return 0;
}
