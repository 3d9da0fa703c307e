/* A C program built against tutti's nccl.h that calls every function NCCL 2.29 and 2.30 added and
 * checks each answer: the working ones give the right values, the refused ones ncclInvalidUsage
 * (or ncclInvalidArgument for a bad argument, checked first) with the function's name in
 * ncclGetLastError. One rank in host mode, so no call waits for another. Exits non-zero on any
 * wrong answer. */
#define _POSIX_C_SOURCE 200809L
#define TUTTI_NCCL_DEVICE_API 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static int failures;

static void fail(const char* what, const char* why) {
  fprintf(stderr, "new_functions: %s: %s\n", what, why);
  ++failures;
}

/* The call returned `want`, and, when it failed, the last error names `name`. */
static void expect(const char* what, ncclResult_t got, ncclResult_t want, const char* name) {
  char why[512];
  if (got != want) {
    snprintf(why, sizeof why, "returned %s (%d), expected %s (%d); last error: %s", ncclGetErrorString(got), (int)got,
             ncclGetErrorString(want), (int)want, ncclGetLastError(NULL));
    fail(what, why);
    return;
  }
  if (want != ncclSuccess && strstr(ncclGetLastError(NULL), name) == NULL) {
    snprintf(why, sizeof why, "the last error does not name %s: %s", name, ncclGetLastError(NULL));
    fail(what, why);
  }
}

/* A refusal: ncclInvalidUsage whose message says the function is not supported yet. */
static void expectRefused(const char* name, ncclResult_t got) {
  expect(name, got, ncclInvalidUsage, name);
  if (got == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "not supported") == NULL)
    fail(name, "the refusal does not say the function is not supported");
}

static void checkParameters(void) {
  ncclParamHandle_t handle = NULL, other = NULL;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  int32_t i32 = 0;
  int8_t i8 = 0;
  uint8_t u8 = 0;
  int16_t i16 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  const char* text = NULL;
  const char** keys = NULL;
  int count = 0, length = 0, i, sawBuffsize = 0, sawTimeout = 0;
  unsigned char raw[16];

  /* 2M, as a user writes it: 2097152 bytes, which fits every type from 32 bits up. */
  setenv("NCCL_BUFFSIZE", "2M", 1);
  expect("ncclParamBind(NCCL_BUFFSIZE)", ncclParamBind(&handle, "NCCL_BUFFSIZE"), ncclSuccess, "");
  expect("ncclParamBind again", ncclParamBind(&other, "NCCL_BUFFSIZE"), ncclSuccess, "");
  if (handle == NULL || handle != other) fail("ncclParamBind", "two binds of one key gave different handles");
  expect("ncclParamGetI64", ncclParamGetI64(handle, &i64), ncclSuccess, "");
  expect("ncclParamGetU64", ncclParamGetU64(handle, &u64), ncclSuccess, "");
  expect("ncclParamGetI32", ncclParamGetI32(handle, &i32), ncclSuccess, "");
  expect("ncclParamGetU32", ncclParamGetU32(handle, &u32), ncclSuccess, "");
  if (i64 != 2097152 || u64 != 2097152u || i32 != 2097152 || u32 != 2097152u)
    fail("ncclParamGet* of NCCL_BUFFSIZE=2M", "not 2097152");
  expect("ncclParamGetI8 of 2M", ncclParamGetI8(handle, &i8), ncclInvalidArgument, "NCCL_BUFFSIZE");
  expect("ncclParamGetU8 of 2M", ncclParamGetU8(handle, &u8), ncclInvalidArgument, "NCCL_BUFFSIZE");
  expect("ncclParamGetI16 of 2M", ncclParamGetI16(handle, &i16), ncclInvalidArgument, "NCCL_BUFFSIZE");
  expect("ncclParamGetU16 of 2M", ncclParamGetU16(handle, &u16), ncclInvalidArgument, "NCCL_BUFFSIZE");
  expect("ncclParamGetStr", ncclParamGetStr(handle, &text), ncclSuccess, "");
  if (text == NULL || strcmp(text, "2097152") != 0) fail("ncclParamGetStr of NCCL_BUFFSIZE=2M", "not \"2097152\"");
  length = 0;
  expect("ncclParamGet", ncclParamGet(handle, raw, (int)sizeof raw, &length), ncclSuccess, "");
  memcpy(&i64, raw, sizeof i64);
  if (length != 8 || i64 != 2097152) fail("ncclParamGet of NCCL_BUFFSIZE", "not 8 bytes of 2097152");
  expect("ncclParamGet into 4 bytes", ncclParamGet(handle, raw, 4, &length), ncclInvalidArgument, "ncclParamGet");
  if (length != 8) fail("ncclParamGet into 4 bytes", "did not say 8 bytes are needed");

  /* A small negative number fits the signed types only. */
  setenv("TUTTI_SPIN", "-3", 1);
  expect("ncclParamBind(TUTTI_SPIN)", ncclParamBind(&handle, "TUTTI_SPIN"), ncclSuccess, "");
  expect("ncclParamGetI8 of -3", ncclParamGetI8(handle, &i8), ncclSuccess, "");
  expect("ncclParamGetI16 of -3", ncclParamGetI16(handle, &i16), ncclSuccess, "");
  if (i8 != -3 || i16 != -3) fail("ncclParamGetI8/I16 of TUTTI_SPIN=-3", "not -3");
  expect("ncclParamGetU64 of -3", ncclParamGetU64(handle, &u64), ncclInvalidArgument, "TUTTI_SPIN");
  unsetenv("TUTTI_SPIN");

  /* Text is read as text only. */
  setenv("NCCL_ALGO", "Ring", 1);
  expect("ncclParamBind(NCCL_ALGO)", ncclParamBind(&handle, "NCCL_ALGO"), ncclSuccess, "");
  expect("ncclParamGetI32 of text", ncclParamGetI32(handle, &i32), ncclInvalidArgument, "NCCL_ALGO");
  expect("ncclParamGetParameter(NCCL_ALGO)", ncclParamGetParameter("NCCL_ALGO", &text, &length), ncclSuccess, "");
  if (text == NULL || strcmp(text, "Ring") != 0 || length != 4) fail("ncclParamGetParameter(NCCL_ALGO)", "not Ring");
  expect("ncclParamBind of an unknown key", ncclParamBind(&handle, "NCCL_NO_SUCH_PARAMETER"), ncclInvalidArgument,
         "NCCL_NO_SUCH_PARAMETER");
  expect("ncclParamGetParameter of an unknown key", ncclParamGetParameter("NCCL_NO_SUCH_PARAMETER", &text, &length),
         ncclInvalidArgument, "NCCL_NO_SUCH_PARAMETER");
  expect("ncclParamGetI64 of a forged handle", ncclParamGetI64((ncclParamHandle_t)&count, &i64), ncclInvalidArgument,
         "ncclParamGetI64");

  expect("ncclParamGetAllParameterKeys", ncclParamGetAllParameterKeys(&keys, &count), ncclSuccess, "");
  for (i = 0; keys != NULL && i < count; ++i) {
    sawBuffsize |= strcmp(keys[i], "NCCL_BUFFSIZE") == 0;
    sawTimeout |= strcmp(keys[i], "TUTTI_TIMEOUT") == 0;
  }
  if (!sawBuffsize || !sawTimeout) fail("ncclParamGetAllParameterKeys", "lacks NCCL_BUFFSIZE or TUTTI_TIMEOUT");
  ncclParamDumpAll(); /* what it prints is checked by tests/api/param_api_test.cpp */
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("NCCL_ALGO");
}

static void checkCommunicator(ncclComm_t comm) {
  ncclUniqueId id;
  ncclComm_t grown = NULL;
  uint64_t value = 99;
  float* buffer = (float*)calloc(1024, sizeof(float));
  ncclWindow_t window = NULL;
  void* user = NULL;
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};

  expect("ncclCommGetUniqueId", ncclCommGetUniqueId(comm, &id), ncclSuccess, "");
  expect("ncclCommGetUniqueId while one is unconsumed", ncclCommGetUniqueId(comm, &id), ncclInvalidUsage,
         "ncclCommGetUniqueId");
  expect("ncclCommGrow with a rank", ncclCommGrow(comm, 2, &id, 0, &grown, NULL), ncclInvalidArgument, "ncclCommGrow");
  expect("ncclCommGrow to no more ranks", ncclCommGrow(comm, 1, &id, -1, &grown, NULL), ncclInvalidArgument,
         "does not exceed");
  if (grown != NULL) fail("ncclCommGrow", "set newcomm although refused");
  expect("ncclCommSuspend with unknown flags", ncclCommSuspend(comm, 6), ncclInvalidArgument, "ncclCommSuspend");
  expect("ncclCommResume of a running communicator", ncclCommResume(comm), ncclInvalidUsage, "not suspended");
  expect("ncclCommSuspend", ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclSuccess, "");
  expect("ncclCommMemStats(ncclStatGpuMemSuspended) while suspended",
         ncclCommMemStats(comm, ncclStatGpuMemSuspended, &value), ncclSuccess, "");
  if (value != 1) fail("ncclCommMemStats(ncclStatGpuMemSuspended)", "not 1 while suspended");
  expect("ncclCommResume", ncclCommResume(comm), ncclSuccess, "");

  expect("ncclCommMemStats(ncclStatGpuMemSuspended)", ncclCommMemStats(comm, ncclStatGpuMemSuspended, &value),
         ncclSuccess, "");
  if (value != 0) fail("ncclCommMemStats(ncclStatGpuMemSuspended)", "not 0 after the resume");
  expect("ncclCommMemStats(ncclStatGpuMemTotal)", ncclCommMemStats(comm, ncclStatGpuMemTotal, &value), ncclSuccess, "");
  if (value == 0) fail("ncclCommMemStats(ncclStatGpuMemTotal)", "0 bytes for a communicator with a control block");
  expect("ncclCommMemStats of an unknown statistic", ncclCommMemStats(comm, (ncclCommMemStat_t)7, &value),
         ncclInvalidArgument, "ncclCommMemStats");

  expect("ncclCommWindowRegister", ncclCommWindowRegister(comm, buffer, 4096, &window, NCCL_WIN_DEFAULT), ncclSuccess,
         "");
  expect("ncclWinGetUserPtr", ncclWinGetUserPtr(comm, window, &user), ncclSuccess, "");
  if (user != buffer) fail("ncclWinGetUserPtr", "not the registered buffer");
  expect("ncclWinGetUserPtr of a window not registered", ncclWinGetUserPtr(comm, (ncclWindow_t)&value, &user),
         ncclInvalidArgument, "ncclWinGetUserPtr");

  expect("ncclPutSignal with flags", ncclPutSignal(buffer, 4, ncclFloat32, 0, window, 0, 0, 0, 1, comm, NULL),
         ncclInvalidArgument, "ncclPutSignal");
  expect("ncclPutSignal to a peer out of range",
         ncclPutSignal(buffer, 4, ncclFloat32, 1, window, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument,
         "ncclPutSignal");
  expect("ncclPutSignal into a window not registered",
         ncclPutSignal(buffer, 4, ncclFloat32, 0, (ncclWindow_t)&value, 0, 0, 0, 0, comm, NULL), ncclInvalidArgument,
         "peerWin");
  expect("ncclPutSignal", ncclPutSignal(buffer, 4, ncclFloat32, 0, window, 64, 0, 0, 0, comm, NULL), ncclSuccess, "");
  expect("ncclSignal on a second signal index", ncclSignal(0, 1, 0, 0, comm, NULL), ncclInvalidArgument, "ncclSignal");
  expect("ncclSignal", ncclSignal(0, 0, 0, 0, comm, NULL), ncclSuccess, "");
  expect("ncclWaitSignal with NULL descriptors", ncclWaitSignal(1, NULL, comm, NULL), ncclInvalidArgument,
         "ncclWaitSignal");
  expect("ncclWaitSignal", ncclWaitSignal(1, &desc, comm, NULL), ncclSuccess, "");
  expect("ncclCommWindowDeregister", ncclCommWindowDeregister(comm, window), ncclSuccess, "");
  free(buffer);
}

static void checkDeviceApi(ncclComm_t comm) {
  void* pointer = NULL;
  ncclMultimemHandle_t multimem = {NULL};
  ncclTeam_t team = {1, 0, 1};
  expectRefused("ncclCommQueryProperties", ncclCommQueryProperties(comm, NULL));
  expectRefused("ncclGetPeerDevicePointer", ncclGetPeerDevicePointer(NULL, 0, 0, &pointer));
  expectRefused("ncclGetLsaDevicePointer", ncclGetLsaDevicePointer(NULL, 0, 0, &pointer));
  expectRefused("ncclGetLsaMultimemDevicePointer", ncclGetLsaMultimemDevicePointer(NULL, 0, &pointer));
  expectRefused("ncclGetMultimemDevicePointer", ncclGetMultimemDevicePointer(NULL, 0, multimem, &pointer));
  expectRefused("ncclGinOutboxCreateRequirement", ncclGinOutboxCreateRequirement(1, 7, NULL, NULL));
  expectRefused("ncclGinInboxA2ACreateRequirement", ncclGinInboxA2ACreateRequirement(team, 1, 7, NULL, NULL));
}

int main(void) {
  ncclComm_t comm = NULL;
  int version = 0;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;

  expect("ncclGetVersion", ncclGetVersion(&version), ncclSuccess, "");
  if (version != 22809) fail("ncclGetVersion", "not 2.28.9's code, which tutti reports until put/signal work");
  if (strcmp(ncclGetErrorString(ncclTimeout), ncclGetErrorString(ncclNumResults)) == 0)
    fail("ncclGetErrorString(ncclTimeout)", "not named");

  checkParameters();

  /* A 2.30 config field out of range is refused by name; in range it is taken. */
  config.graphUsageMode = 3;
  {
    ncclUniqueId id;
    expect("ncclGetUniqueId", ncclGetUniqueId(&id), ncclSuccess, "");
    expect("ncclCommInitRankConfig with graphUsageMode 3", ncclCommInitRankConfig(&comm, 1, id, 0, &config),
           ncclInvalidArgument, "graphUsageMode");
    config.graphUsageMode = 2;
    config.maxP2pPeers = 1;
    config.graphStreamOrdering = 1;
    expect("ncclGetUniqueId", ncclGetUniqueId(&id), ncclSuccess, "");
    expect("ncclCommInitRankConfig with 2.30 fields", ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclSuccess,
           "");
  }
  if (comm == NULL) {
    fprintf(stderr, "new_functions: no communicator\n");
    return 1;
  }
  checkCommunicator(comm);
  checkDeviceApi(comm);
  expect("ncclCommDestroy", ncclCommDestroy(comm), ncclSuccess, "");
  if (failures != 0) {
    fprintf(stderr, "new_functions: %d wrong answer(s)\n", failures);
    return 1;
  }
  printf("new_functions: every function of NCCL 2.29 and 2.30 answered as expected\n");
  return 0;
}
