/* A plain C program using tutti through nccl.h: 4 ranks of one process in host mode
 * (TUTTI_DEVICE=host), AllReduce, Broadcast, AllGather and ReduceScatter on host buffers,
 * every element checked against a value computed here. Small integers in float keep every
 * sum exact. Exits non-zero on any mismatch or error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

enum { kRanks = 4, kCount = 1031, kBroadcastRoot = 2 };

static ncclComm_t comms[kRanks];
static float* sendBuffers[kRanks];
static float* recvBuffers[kRanks];
static long checksPassed;
static long mismatches;

/* Frees what was made; comms are aborted on failure so no rank thread outlives main. */
static void release(int failed) {
  int rank;
  for (rank = 0; rank < kRanks; ++rank) {
    if (comms[rank] != NULL) {
      ncclResult_t result = failed ? ncclCommAbort(comms[rank]) : ncclCommDestroy(comms[rank]);
      if (result != ncclSuccess)
        fprintf(stderr, "c_program: releasing rank %d: %s\n", rank, ncclGetErrorString(result));
      comms[rank] = NULL;
    }
    free(sendBuffers[rank]);
    free(recvBuffers[rank]);
    sendBuffers[rank] = recvBuffers[rank] = NULL;
  }
}

static int succeeded(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return 1;
  fprintf(stderr, "c_program: %s returned %s: %s\n", what, ncclGetErrorString(result), ncclGetLastError(NULL));
  return 0;
}

static void expectEqual(const char* collective, int rank, size_t index, float got, float expected) {
  if (got == expected) {
    ++checksPassed;
    return;
  }
  if (mismatches < 10)
    fprintf(stderr, "c_program: %s rank %d element %zu: got %g, expected %g\n", collective, rank, index, (double)got,
            (double)expected);
  ++mismatches;
}

static void fill(float* buffer, size_t count, float value) {
  size_t i;
  for (i = 0; i < count; ++i) buffer[i] = value;
}

/* Runs one collective on every rank inside one group, as a single thread driving 4 ranks must. */
typedef ncclResult_t (*LaunchOnRank)(int rank);
static int runGroup(const char* collective, LaunchOnRank launch) {
  int rank;
  if (!succeeded(ncclGroupStart(), "ncclGroupStart")) return 0;
  for (rank = 0; rank < kRanks; ++rank)
    if (!succeeded(launch(rank), collective)) {
      ncclGroupEnd(); /* close the group; the error above is the one that matters */
      return 0;
    }
  return succeeded(ncclGroupEnd(), collective);
}

static ncclResult_t launchAllReduce(int rank) {
  return ncclAllReduce(sendBuffers[rank], recvBuffers[rank], kCount, ncclFloat, ncclSum, comms[rank], NULL);
}
static ncclResult_t launchBroadcast(int rank) {
  return ncclBroadcast(sendBuffers[rank], recvBuffers[rank], kCount, ncclFloat, kBroadcastRoot, comms[rank], NULL);
}
static ncclResult_t launchAllGather(int rank) {
  return ncclAllGather(sendBuffers[rank], recvBuffers[rank], kCount, ncclFloat, comms[rank], NULL);
}
static ncclResult_t launchReduceScatter(int rank) {
  return ncclReduceScatter(sendBuffers[rank], recvBuffers[rank], kCount, ncclFloat, ncclSum, comms[rank], NULL);
}

static int allReduce(void) {
  int rank;
  size_t i;
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) sendBuffers[rank][i] = (float)((rank + 1) * (int)(i % 13) - 5);
    fill(recvBuffers[rank], kCount, -1.0f);
  }
  if (!runGroup("ncclAllReduce", launchAllReduce)) return 0;
  /* sum over ranks of (rank+1)*k - 5 = 10k - 20 for 4 ranks */
  for (rank = 0; rank < kRanks; ++rank)
    for (i = 0; i < kCount; ++i)
      expectEqual("AllReduce", rank, i, recvBuffers[rank][i], (float)(10 * (int)(i % 13) - 20));
  return 1;
}

static int broadcast(void) {
  int rank;
  size_t i;
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) sendBuffers[rank][i] = (float)(rank * 1000 + (int)(i % 97));
    fill(recvBuffers[rank], kCount, -1.0f);
  }
  if (!runGroup("ncclBroadcast", launchBroadcast)) return 0;
  for (rank = 0; rank < kRanks; ++rank)
    for (i = 0; i < kCount; ++i)
      expectEqual("Broadcast", rank, i, recvBuffers[rank][i], (float)(kBroadcastRoot * 1000 + (int)(i % 97)));
  return 1;
}

static int allGather(void) {
  int rank, source;
  size_t i;
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < kCount; ++i) sendBuffers[rank][i] = (float)(rank * 4096 + (int)(i % 251));
    fill(recvBuffers[rank], (size_t)kRanks * kCount, -1.0f);
  }
  if (!runGroup("ncclAllGather", launchAllGather)) return 0;
  for (rank = 0; rank < kRanks; ++rank)
    for (source = 0; source < kRanks; ++source)
      for (i = 0; i < kCount; ++i)
        expectEqual("AllGather", rank, (size_t)source * kCount + i, recvBuffers[rank][(size_t)source * kCount + i],
                    (float)(source * 4096 + (int)(i % 251)));
  return 1;
}

static int reduceScatter(void) {
  int rank;
  size_t i;
  for (rank = 0; rank < kRanks; ++rank) {
    for (i = 0; i < (size_t)kRanks * kCount; ++i) sendBuffers[rank][i] = (float)((rank + 1) * ((int)(i % 11) + 1));
    fill(recvBuffers[rank], kCount, -1.0f);
  }
  if (!runGroup("ncclReduceScatter", launchReduceScatter)) return 0;
  /* rank r keeps block r: element j = r*count+i of every rank's input, summed: 10*(j%11+1) */
  for (rank = 0; rank < kRanks; ++rank)
    for (i = 0; i < kCount; ++i) {
      size_t j = (size_t)rank * kCount + i;
      expectEqual("ReduceScatter", rank, i, recvBuffers[rank][i], (float)(10 * ((int)(j % 11) + 1)));
    }
  return 1;
}

/* Queries and a rejected call: the plain-C view of the communicator and of errors. */
static int queries(void) {
  int version = 0, rank;
  const char* message;
  ncclResult_t result;
  if (!succeeded(ncclGetVersion(&version), "ncclGetVersion")) return 0;
  expectEqual("ncclGetVersion", -1, 0, (float)version, (float)NCCL_VERSION_CODE);
  for (rank = 0; rank < kRanks; ++rank) {
    int count = 0, userRank = -1;
    if (!succeeded(ncclCommCount(comms[rank], &count), "ncclCommCount")) return 0;
    if (!succeeded(ncclCommUserRank(comms[rank], &userRank), "ncclCommUserRank")) return 0;
    expectEqual("ncclCommCount", rank, 0, (float)count, (float)kRanks);
    expectEqual("ncclCommUserRank", rank, 0, (float)userRank, (float)rank);
  }
  result = ncclAllReduce(sendBuffers[0], recvBuffers[0], 1, (ncclDataType_t)ncclNumTypes, ncclSum, comms[0], NULL);
  expectEqual("ncclAllReduce with an unknown datatype", 0, 0, (float)result, (float)ncclInvalidArgument);
  message = ncclGetLastError(comms[0]);
  expectEqual("ncclGetLastError after a rejected call is not empty", 0, 0,
              (float)(message != NULL && message[0] != '\0'), 1.0f);
  return 1;
}

int main(void) {
  int rank, ok;
  for (rank = 0; rank < kRanks; ++rank) {
    sendBuffers[rank] = (float*)malloc(sizeof(float) * kRanks * kCount);
    recvBuffers[rank] = (float*)malloc(sizeof(float) * kRanks * kCount);
    if (sendBuffers[rank] == NULL || recvBuffers[rank] == NULL) {
      fprintf(stderr, "c_program: out of memory\n");
      release(1);
      return 1;
    }
  }
  if (!succeeded(ncclCommInitAll(comms, kRanks, NULL), "ncclCommInitAll")) {
    memset(comms, 0, sizeof comms); /* what a failed init leaves there is not ours to release */
    release(1);
    return 1;
  }
  ok = queries() && allReduce() && broadcast() && allGather() && reduceScatter();
  release(!ok);
  if (!ok || mismatches != 0) {
    fprintf(stderr, "c_program: FAILED (%ld mismatches, %ld checks passed)\n", mismatches, checksPassed);
    return 1;
  }
  printf("c_program: %ld checks passed\n", checksPassed);
  return 0;
}
