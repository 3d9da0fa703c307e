/* The functions of NCCL 2.30.7's nccl.h, for the ABI tests: X(Name) once each, without prefix. */
#ifndef TUTTI_TESTS_ABI_FUNCTION_LIST_H_
#define TUTTI_TESTS_ABI_FUNCTION_LIST_H_

/* ncclResetDebugInit is left out: it is deprecated, so naming it warns (tested on its own). */
/* The lists as written: clang-format 14 lays an X-macro list out differently on each run. */
/* clang-format off */
#define TUTTI_ABI_FOR_EACH_FUNCTION(X)                                                       \
  X(MemAlloc) X(MemFree) X(GetVersion) X(GetUniqueId) X(CommInitRankConfig) X(CommInitRank)  \
  X(CommInitAll) X(CommFinalize) X(CommDestroy) X(CommAbort) X(CommRevoke) X(CommSplit)      \
  X(CommShrink) X(CommInitRankScalable) X(GetErrorString) X(GetLastError)                   \
  X(CommGetAsyncError) X(CommCount) X(CommCuDevice) X(CommUserRank) X(CommRegister)         \
  X(CommDeregister) X(CommWindowRegister) X(CommWindowDeregister) X(RedOpCreatePreMulSum)    \
  X(RedOpDestroy) X(Reduce) X(Bcast) X(Broadcast) X(AllReduce) X(ReduceScatter) X(AllGather) \
  X(AlltoAll) X(Gather) X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd)                 \
  X(GroupSimulateEnd) X(CommGetUniqueId) X(CommGrow) X(CommSuspend) X(CommResume)            \
  X(CommMemStats) X(WinGetUserPtr) X(PutSignal) X(Signal) X(WaitSignal) X(ParamBind)         \
  X(ParamGetI8) X(ParamGetI16) X(ParamGetI32) X(ParamGetI64) X(ParamGetU8) X(ParamGetU16)    \
  X(ParamGetU32) X(ParamGetU64) X(ParamGetStr) X(ParamGet) X(ParamGetParameter)              \
  X(ParamGetAllParameterKeys) X(ParamDumpAll)

/* Device-API host functions that C++ overloading leaves unambiguous and NVIDIA's public headers
 * declare (2.30's ncclGinOutboxCreateRequirement and ncclGinInboxA2ACreateRequirement are exported
 * but declared only in its sources, outside Windows builds). */
#define TUTTI_ABI_FOR_EACH_DEVICE_FUNCTION(X)                                                \
  X(DevCommCreate) X(DevCommDestroy) X(LsaBarrierCreateRequirement)                          \
  X(GinBarrierCreateRequirement) X(LLA2ACalcSlots) X(LLA2ACreateRequirement)                 \
  X(CommQueryProperties) X(GetPeerDevicePointer) X(GetLsaDevicePointer)                      \
  X(GetLsaMultimemDevicePointer) X(GetMultimemDevicePointer)
/* clang-format on */

#endif /* TUTTI_TESTS_ABI_FUNCTION_LIST_H_ */
