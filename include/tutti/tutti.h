/* tutti's C extensions to the NCCL API: host streams, version, device-backend and topology queries, waits,
   all-to-all-v with device counts. */
#ifndef TUTTI_TUTTI_H_
#define TUTTI_TUTTI_H_

#include <stdint.h> /* uint64_t */
#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Host streams: ordered queues run by a worker thread; usable wherever a cudaStream_t is taken
 * by a communicator on the host device backend. (A NULL stream on that backend means "complete
 * before the call returns".)
 */

/* Creates a host stream in *stream. */
ncclResult_t tuttiStreamCreate(cudaStream_t* stream);

/* Waits until everything queued on stream has run; returns the error of a failed operation, if any. */
ncclResult_t tuttiStreamSynchronize(cudaStream_t stream);

/* ncclSuccess when stream is idle, ncclInProgress while work is queued or running. */
ncclResult_t tuttiStreamQuery(cudaStream_t stream);

/* Waits for stream's queued work, then frees it. */
ncclResult_t tuttiStreamDestroy(cudaStream_t stream);

/* The library's name and version, e.g. "tutti 0.1.0 (NCCL 2.28.9 API)". */
const char* tuttiVersionString(void);

/* The device backend comm runs on ("host", "cuda", "emulated", or the name of a backend a program
   registered), in *name (a static string). */
ncclResult_t tuttiCommDeviceBackend(ncclComm_t comm, const char** name);

/* How this rank reaches its peers: the transports the communicator picks for them, distinct names
 * joined by '+' ("local" for ranks of this process, "shm", "net/Socket"; "none" for one rank),
 * written NUL-terminated into names (nameBytes; ncclInvalidArgument if too short), and the
 * number of nodes (hosts, told apart by host hash or NCCL_HOSTID) in *nodes. */
ncclResult_t tuttiCommTransports(ncclComm_t comm, char* names, size_t nameBytes, int* nodes);

/* One node of comm's topology, node from 0 to tuttiCommTransports' *nodes - 1 (every rank sees the
 * same order): its host name, written NUL-terminated into hostname (hostnameBytes; truncated if
 * short), and in *ranks, *numaNodes, *cpus, *gpus and *nics the ranks it holds, its NUMA nodes, the
 * logical CPUs of those NUMA nodes (0 when discovery could not tell), its GPUs and its NIC ports. */
ncclResult_t tuttiCommNodeTopology(ncclComm_t comm, int node, char* hostname, size_t hostnameBytes, int* ranks,
                                   int* numaNodes, int* cpus, int* gpus, int* nics);

/* NIC port nic (0 to tuttiCommNodeTopology's *nics - 1, in device order) of one node of comm: its
 * interface name, written NUL-terminated into name (nameBytes; truncated if short), and its speed in
 * Mb/s in *speedMbps (0 when unknown). */
ncclResult_t tuttiCommNodeNic(ncclComm_t comm, int node, int nic, char* name, size_t nameBytes, int* speedMbps);

/* The algorithm (NCCL_ALGO's name for it) and channel count comm would use for one call, as its
 * selector chooses them, without running anything. collective: "allreduce", "allgather",
 * "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter", "send" or "recv";
 * count as the call would name it. The name is written NUL-terminated into name (nameBytes). */
ncclResult_t tuttiCommAlgorithm(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t type, char* name,
                                size_t nameBytes, int* nchannels);

/* How that call's messages would travel: "LL" (16-byte lines of data and flags, for small
 * operations between device executors on memory transports), "Simple", or "LL+Simple" when some
 * connections take LL and others (the network's) do not. Arguments as tuttiCommAlgorithm's. */
ncclResult_t tuttiCommProtocol(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t type, char* name,
                               size_t nameBytes);

/* What comm's executor workers are blocked on, for a watchdog: one line per worker that sleeps in a
 * wait, naming the operation, channel, tile and step, how long it has waited, and the peer it waits
 * for (data from it, or free FIFO space at it), e.g. "AllReduce #12 (channel 0, tile 1/4, step
 * recvReduceSend) waiting 5.0 s for data from rank 3 (hostb pid 1234)"; lines joined by '\n', ""
 * when no worker waits. Written NUL-terminated into text (textBytes; ncclInvalidArgument if too
 * short, leaving ""). Safe to call from another thread while comm runs, e.g. before ncclCommAbort. */
ncclResult_t tuttiCommDescribeWait(ncclComm_t comm, char* text, size_t textBytes);

/* How many messages comm's rank has read in place in a peer's registered buffer (zero-copy,
 * docs/algorithms.md) since init: from rank threads of this process, or from other processes of the
 * host with cross-memory reads (TUTTI_CMA). Counted by the host executor; 0 on other backends. */
ncclResult_t tuttiCommZeroCopyReads(ncclComm_t comm, uint64_t* messages);

/* Writes comm's flight record (its last TUTTI_FLIGHT_RECORDER_ENTRIES operations, their states and
 * times, and what each worker waits for) as JSON to path: a file, or a directory where the file is
 * named tutti-flight-<host>-<pid>-comm<hash>-rank<rank>.json; NULL: the directory
 * TUTTI_FLIGHT_RECORDER names. tools/tutti-trace reads the ranks' files together. Safe from any
 * thread while comm runs, and on a failed comm. */
ncclResult_t tuttiCommDump(ncclComm_t comm, const char* path);

/*
 * All-to-all-v with counts in device memory (host memory on the host backend), for a router whose
 * counts are written by an earlier operation on the same stream: the counts are read when the
 * operation runs, in stream order, and the call returns once it is queued. Counts in elements,
 * one per rank; each rank's blocks lie back to back (displacements are the counts' exclusive prefix
 * sums). Capacities and maxima come from the host: the exchange is planned from them, and a count
 * past them fails the operation (an asynchronous error, ncclCommGetAsyncError) naming the pair.
 * Outside a group only; out of place; the host backend only for now (docs/not-yet.md).
 */

/* Both count arrays in device memory (NCCLX's deviceAllToAllv): rank r sends sendcounts[p]
 * elements to rank p from sendbuff, and receives recvcounts[p] from p into recvbuff; sendCapacity
 * and recvCapacity are the buffers' sizes in elements. */
ncclResult_t tuttiAllToAllvDevice(const void* sendbuff, const size_t* sendcounts, size_t sendCapacity, void* recvbuff,
                                  const size_t* recvcounts, size_t recvCapacity, ncclDataType_t datatype,
                                  ncclComm_t comm, cudaStream_t stream);

/* Send counts in device memory, receive counts found by the exchange (NCCLX's alltoallvDynamic):
 * the counts travel first, then the blocks, which land back to back in recvbuff (recvCapacity
 * elements) in rank order; the count from each rank is written to recvcounts[p] (device memory),
 * in stream order. A block larger than maxRecvCount fails the operation. */
ncclResult_t tuttiAllToAllvDynamic(const void* sendbuff, const size_t* sendcounts, size_t sendCapacity, void* recvbuff,
                                   size_t recvCapacity, size_t maxRecvCount, size_t* recvcounts,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_TUTTI_H_ */
