/* tutti's public C API: the NCCL 2.30.7 interface (types, values, layouts, functions), plain C. */
#ifndef NCCL_H_
#define NCCL_H_

/*
 * Binary compatibility is the point of this header, so a few things are fixed by NVIDIA's
 * and must not be "tidied": enum values, the ncclConfig_t and ncclSimInfo_t layouts and
 * their struct tags, and which types are anonymous. C++ code mangles a parameter of type
 * ncclConfig_t* with the struct tag and an anonymous enum or struct with its typedef name,
 * so a user's C++ library built against NVIDIA's header links against one built against
 * this one only if those names agree.
 *
 * CUDA is optional. A host-only user (TUTTI_DEVICE=host) needs no CUDA installation: unless
 * CUDA's runtime header was included first (or TUTTI_NCCL_H_INCLUDE_CUDA asks us to include
 * it), cudaStream_t is declared here exactly as CUDA declares it, so including CUDA's headers
 * afterwards is still fine.
 */

#include <limits.h> /* INT_MIN */
#include <stddef.h> /* size_t, NULL */
#include <stdint.h> /* the parameter API's fixed-width integers, ncclCommMemStats' uint64_t */

#if defined(TUTTI_NCCL_H_INCLUDE_CUDA)
#include <cuda_runtime.h>
#elif !defined(__DRIVER_TYPES_H__) && !defined(CUDART_VERSION) && !defined(__CUDACC__)
/* CUDA's own declaration (driver_types.h), repeated: C11 and C++ allow an identical typedef
 * twice, so CUDA's headers may still come later (C99 compilers take it as an extension). */
typedef struct CUstream_st* cudaStream_t;
#endif

/*
 * The version tutti implements, which ncclGetVersion also reports: 2.28.9, although every
 * function and type of 2.30.7 is declared below. A program that checks NCCL_VERSION_CODE (or
 * ncclGetVersion) before calling a function of 2.29 or 2.30 then does not reach one that tutti
 * still refuses (one-sided put/signal/wait, ncclCommGrow, suspend/resume); the version moves to
 * 2.30 once they work. The structs below are 2.30.7's, and NCCL_CONFIG_INITIALIZER says so in its
 * own version field (TUTTI_NCCL_CONFIG_VERSION), which is what the library reads to know the layout.
 */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
/* Versions up to 2.8 were coded as X*1000+Y*100+Z; later ones as X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

/* ncclResetDebugInit is kept for binary compatibility but marked deprecated, as NVIDIA does.
 * Compilers without the message form of the attribute get the plain one. */
#if defined(TUTTI_NCCL_NO_DEPRECATION)
#define TUTTI_NCCL_DEPRECATED(message)
#elif defined(__clang__) || (defined(__GNUC__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 5)))
#define TUTTI_NCCL_DEPRECATED(message) __attribute__((deprecated(message)))
#elif defined(__GNUC__)
#define TUTTI_NCCL_DEPRECATED(message) __attribute__((deprecated))
#elif defined(_MSC_VER)
#define TUTTI_NCCL_DEPRECATED(message) __declspec(deprecated(message))
#else
#define TUTTI_NCCL_DEPRECATED(message)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and identifiers ------------------------------------------------------------ */

typedef struct ncclComm* ncclComm_t;            /* a communicator */
typedef struct ncclWindow_vidmem* ncclWindow_t; /* a registered memory window */
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* Made by ncclGetUniqueId on one rank and copied to all others; opaque bytes. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Results ---------------------------------------------------------------------------- */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* since 2.30 */
  ncclNumResults = 9
} ncclResult_t;

/* ---- Constants -------------------------------------------------------------------------- */

#define NCCL_CONFIG_UNDEF_INT INT_MIN /* an ncclConfig_t int field left to the library */
#define NCCL_CONFIG_UNDEF_PTR NULL    /* an ncclConfig_t pointer field left to the library */
#define NCCL_SPLIT_NOCOLOR -1         /* ncclCommSplit color: this rank joins no new comm */
#define NCCL_UNDEF_FLOAT -1.0f        /* ncclSimInfo_t.estimatedTime before simulation */
#define NCCL_API_MAGIC 0xcafebeef     /* ncclConfig_t.magic, set by NCCL_CONFIG_INITIALIZER */

/* ncclCommWindowRegister flags */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01  /* every rank registers a buffer of the same size */
#define NCCL_WIN_STRICT_ORDERING 0x02 /* since 2.30 */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags */
#define NCCL_SHRINK_DEFAULT 0x00 /* the parent is healthy: shrink it as it is */
#define NCCL_SHRINK_ABORT 0x01   /* abort the parent's pending operations first */

/* ncclCommRevoke flags (none defined yet; pass 0) */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclCommSuspend flags */
#define NCCL_SUSPEND_MEM 0x01 /* release the communicator's dynamic allocations */

/* ---- Communicator configuration --------------------------------------------------------- */

/* Fields are only ever appended; `size` tells the library how much of the struct the caller's
 * header knew about. Always start from NCCL_CONFIG_INITIALIZER, then set what you need. */
typedef struct ncclConfig_v23000 {
  size_t size;          /* sizeof(ncclConfig_t) as the caller compiled it */
  unsigned int magic;   /* 0xcafebeef */
  unsigned int version; /* NCCL_VERSION of the caller's header */
  int blocking;         /* 0: init and collectives may return ncclInProgress */
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName; /* network backend by name, e.g. "Socket" or "IB" */
  int splitShare;      /* children of ncclCommSplit share the parent's resources */
  int trafficClass;
  const char* commName; /* shown in logs */
  int collnetEnable;
  int CTAPolicy;   /* NCCL_CTA_POLICY_* */
  int shrinkShare; /* children of ncclCommShrink share the parent's resources */
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;      /* since 2.29 */
  int numRmaCtx;           /* since 2.29: contexts of one-sided operations */
  int maxP2pPeers;         /* since 2.30 */
  int graphStreamOrdering; /* since 2.30 */
} ncclConfig_t;

/* The layout version NCCL_CONFIG_INITIALIZER writes into ncclConfig_t.version: 2.30.7's. */
#define TUTTI_NCCL_CONFIG_VERSION 23007

#define NCCL_CONFIG_INITIALIZER                                                                            \
  {                                                                                                        \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, TUTTI_NCCL_CONFIG_VERSION, NCCL_CONFIG_UNDEF_INT /* blocking */, \
        NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */, NCCL_CONFIG_UNDEF_INT /* minCTAs */,                   \
        NCCL_CONFIG_UNDEF_INT /* maxCTAs */, NCCL_CONFIG_UNDEF_PTR /* netName */,                          \
        NCCL_CONFIG_UNDEF_INT /* splitShare */, NCCL_CONFIG_UNDEF_INT /* trafficClass */,                  \
        NCCL_CONFIG_UNDEF_PTR /* commName */, NCCL_CONFIG_UNDEF_INT /* collnetEnable */,                   \
        NCCL_CONFIG_UNDEF_INT /* CTAPolicy */, NCCL_CONFIG_UNDEF_INT /* shrinkShare */,                    \
        NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */, NCCL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */,             \
        NCCL_CONFIG_UNDEF_INT /* nvlinkCentricSched */, NCCL_CONFIG_UNDEF_INT /* graphUsageMode */,        \
        NCCL_CONFIG_UNDEF_INT /* numRmaCtx */, NCCL_CONFIG_UNDEF_INT /* maxP2pPeers */,                    \
        NCCL_CONFIG_UNDEF_INT /* graphStreamOrdering */                                                    \
  }

/* What ncclGroupSimulateEnd reports. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic; /* 0x74685283 */
  unsigned int version;
  float estimatedTime; /* microseconds the group is expected to take */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* ---- Reductions and data types ---------------------------------------------------------- */

/* Only here to measure how wide the compiler makes an enum (see ncclMaxRedOp). */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  /* The count of built-in operators, and the first value ncclRedOpCreatePreMulSum hands out. */
  ncclNumOps = 5,
  /* The largest operator value that keeps ncclRedOp_t as wide as it has always been. */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives and when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* device memory, read while each collective runs */
  ncclScalarHostImmediate = 1 /* host memory, read once before the create call returns */
} ncclScalarResidence_t;

/* What ncclCommMemStats reports (since 2.30). */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of device memory that ncclCommSuspend would release */
  ncclStatGpuMemSuspended = 1, /* 1 while the communicator is suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes of device memory that stay while suspended */
  ncclStatGpuMemTotal = 3      /* all device memory the communicator holds, in bytes */
} ncclCommMemStat_t;

/* One entry of ncclWaitSignal's list (since 2.29): wait for opCnt more signals from `peer` on
 * signal index sigIdx of context ctx. */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

/* A parameter bound by ncclParamBind (since 2.30); owned by the library, never freed. */
typedef struct ncclParamHandle* ncclParamHandle_t;

/*
 * ---- Functions ---------------------------------------------------------------------------
 * Each function exists twice: ncclX (a weak symbol, so a profiling layer can interpose it)
 * and pncclX (the strong symbol that ncclX forwards to). Every function returns
 * ncclSuccess or an error whose details ncclGetLastError describes.
 */

/* Allocates memory suitable for every optimisation (registration, windows); free with ncclMemFree. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/* Frees memory from ncclMemAlloc. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* Stores the library's NCCL_VERSION_CODE in *version. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Makes the id one rank creates and all ranks pass to ncclCommInitRank*. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Joins rank `rank` of `nranks` to the communicator named by commId, with a configuration. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

/* Joins rank `rank` of `nranks` to the communicator named by commId; collective over all ranks. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates ndev communicators of one clique in this process (devlist NULL: devices 0..ndev-1). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Completes all pending work of comm and releases its shared resources (then destroy it). */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees comm's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops all of comm's operations, wherever they are, and frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops comm's in-flight operations so it can be destroyed, split or shrunk; flags must be 0. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Makes a communicator of the ranks sharing `color`, ordered by `key` (config NULL: inherit). */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* Makes a communicator of comm's ranks minus excludeRanksList (flags: NCCL_SHRINK_*). */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* Makes the id that ncclCommGrow's new ranks join with; one at a time per communicator. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

/* Makes a communicator of comm's ranks (in their places) and nRanks - their count new ones after
 * them. Existing ranks pass comm and rank -1 (the one that made the id passes it too); new ranks
 * pass comm NULL, the id and their rank. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config);

/* Like ncclCommInitRankConfig, with nId ids (the same list on every rank) to spread init load. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

/* The name of a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The message of the last error on this thread (comm may be NULL). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging environment variables; not part of the supported API. */
TUTTI_NCCL_DEPRECATED("ncclResetDebugInit is not part of the supported NCCL API")
void ncclResetDebugInit(void);
TUTTI_NCCL_DEPRECATED("pncclResetDebugInit is not part of the supported NCCL API")
void pncclResetDebugInit(void);

/* The error that stopped comm's asynchronous work, ncclInProgress while a nonblocking call runs. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* The number of ranks in comm. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* The CUDA device comm uses (on the host backend, the device index it was created with). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/* This rank's index in comm. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Registers a buffer with comm so collectives on it can avoid copies. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

/* Undoes ncclCommRegister. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Releases comm's resources (flags: NCCL_SUSPEND_*) until ncclCommResume; comm is unusable meanwhile. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

/* Restores what ncclCommSuspend released. */
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/* One figure of comm's memory (ncclCommMemStat_t) in *value. */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* Registers a memory window (collective over comm; winFlags: NCCL_WIN_*). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

/* Undoes ncclCommWindowRegister. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* The buffer a window of comm was registered with. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* Makes an operator that multiplies each input by *scalar, then sums; valid for comm and datatype. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Frees an operator from ncclRedOpCreatePreMulSum once no call using it is pending. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/*
 * Collectives. Every rank of comm calls each one, in the same order; the call returns once the
 * operation is queued on `stream`. sendbuff == recvbuff (or the offsets named below) runs in place.
 */

/* Reduces count elements over all ranks into recvbuff on `root`. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);

/* Broadcast in place from `root` (the older form of ncclBroadcast). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/* Copies count elements from sendbuff on `root` to recvbuff on every rank. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/* Reduces count elements over all ranks into recvbuff on every rank. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream);

/* Reduces nranks*recvcount elements; rank i keeps block i (in place: recvbuff ==
 * sendbuff + rank*recvcount). */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* Rank i's sendcount elements land at recvbuff + i*sendcount on every rank (in place:
 * sendbuff == recvbuff + rank*sendcount). */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff (count elements) goes to rank j; block i of recvbuff comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);

/* All-to-all with a count per pair (not in NVIDIA's NCCL; NCCLX, RCCL and MSCCL++'s NCCL shim
 * export it with this signature): sendcounts[j] elements from sendbuff + sdispls[j] go to rank j,
 * recvcounts[i] elements from rank i land at recvbuff + rdispls[i]. Counts and displacements are
 * in elements, in host arrays of one entry per rank. Out of place only; receive blocks must not
 * overlap; recvcounts[i] on rank j must equal sendcounts[j] on rank i. */
ncclResult_t ncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                           const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                            const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                            cudaStream_t stream);

/* Rank i's count elements land at recvbuff + i*count on `root` (in place: sendbuff ==
 * recvbuff + root*count). */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* Block i of sendbuff on `root` (count elements) goes to rank i's recvbuff (in place:
 * recvbuff == sendbuff + root*count). */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* Point to point: sends count elements to `peer`, which posts a matching ncclRecv. Put sends
 * and receives that must progress together in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* Receives count elements from `peer`, which posts a matching ncclSend. */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/*
 * One-sided operations (since 2.29). The target's application takes no part; a call returns once
 * queued on `stream`. sigIdx and ctx select a signal and a context (0 unless the communicator's
 * config provides more); flags must be 0.
 */

/* Writes count elements of localbuff into peer's window peerWin at byte offset peerWinOffset,
 * then raises one signal there. */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);

/* Raises one signal at `peer`, without data. */
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

/* Waits, in stream order, for the signals nDesc descriptors describe. */
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/*
 * Groups. Calls between ncclGroupStart and the matching ncclGroupEnd are collected and
 * launched together at the outermost ncclGroupEnd: needed when one thread drives several
 * ranks, and for fusing operations. Groups nest.
 */

/* Opens a group. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/* Closes a group; the outermost one launches everything collected. */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Closes a group without launching it and estimates how long it would take. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/*
 * ---- Parameters (since 2.30) -------------------------------------------------------------
 * Every NCCL_* and TUTTI_* variable the library reads, by its name. Values are read when asked,
 * so a change to the environment shows at once. Strings returned stay valid until the same
 * function is next called on the same thread.
 */

/* Binds the parameter named `key` (e.g. "NCCL_BUFFSIZE") to *out. */
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);

/* The value of a number or flag parameter as an integer of the named width; ncclInvalidArgument
 * when the value does not fit the type or the parameter is text. */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);

/* The value of any parameter as text. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);

/* The value in its own representation (int64_t for numbers and sizes, one byte 0/1 for flags, the
 * characters and a NUL for text), copied into out; *len is the bytes it takes, also on failure. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);

/* The value of the parameter named `key` as text, and its length. */
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);

/* The names of every parameter. */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);

/* Prints every parameter, its value, where that came from and what it does, to stdout. */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#if defined(TUTTI_NCCL_DEVICE_API)
/*
 * ---- Device-API host functions -----------------------------------------------------------
 * NVIDIA's library exports these but declares them only in its nccl_device/ headers, which
 * are CUDA C++. The library defines TUTTI_NCCL_DEVICE_API to see them; applications use
 * NVIDIA's device headers. Only the layout of ncclTeam_t (returned by value) matters here;
 * the other types are passed by pointer and left opaque.
 */
typedef struct ncclTeam {
  int nRanks;
  int rank;
  int stride;
} ncclTeam_t;

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclCommProperties ncclCommProperties_t;
typedef struct ncclGinOutboxHandle ncclGinOutboxHandle_t;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle_t;
/* Passed by value, so its layout matters: the base of a multicast mapping. */
typedef struct ncclMultimemHandle {
  void* mcBasePtr;
} ncclMultimemHandle_t;

/* What the communicator offers device code (since 2.30). */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);

/* Device addresses of a window's memory (since 2.30): at a peer, at a load/store-team rank, and
 * multicast ones. */
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                          void** outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                           void** outPtr);

/* Asks for network outboxes, or all-to-all inboxes over `peers`, of 2^size_log2 bytes per block
 * in the next ncclDevCommCreate (since 2.30). */
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle_t* outHandle,
                                            ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2, ncclGinOutboxHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              ncclGinInboxA2AHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                               ncclGinInboxA2AHandle_t* outHandle,
                                               ncclDevResourceRequirements_t* outReq);

/* Builds the device-side communicator that kernels using the device API receive. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs, ncclDevComm_t* outDevComm);

/* Frees what ncclDevCommCreate built. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);

/* The team of all ranks. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);

/* The team of ranks whose memory this rank can load and store directly. */
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);

/* The team of ranks at this rank's position in every load/store team. */
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);

/* Rank `rank` of `team` as a rank of the world team. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);

/* Rank `rank` of `team` as a rank of the load/store team. */
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Asks for nBarriers load/store barriers over `team` in the next ncclDevCommCreate. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);

/* Asks for nBarriers network (GPU-initiated) barriers over `team` in the next ncclDevCommCreate. */
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);

/* The slots a low-latency all-to-all needs for maxElts elements of maxEltSize bytes. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* Asks for a low-latency all-to-all buffer (nBlocks x nSlots) in the next ncclDevCommCreate. */
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);
#endif /* TUTTI_NCCL_DEVICE_API */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
