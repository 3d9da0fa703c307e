// What the perf sweep knows about each collective: buffer counts, bandwidth factors, the call, the expected result.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "nccl.h"

namespace tutti::perf {

// Element counts of one operation, as nccl-tests derives them from a message size.
struct BufferCounts {
  size_t send = 0;               // elements read from the send buffer
  size_t recv = 0;               // elements written to the receive buffer
  size_t param = 0;              // the count passed to the call (the "count" column)
  size_t sendInPlaceOffset = 0;  // in place: the send buffer is recv + this * rank elements
  size_t recvInPlaceOffset = 0;  // in place: the receive buffer is recv + this * rank elements
  // What a count per pair derives from (alltoallv): the element size and the ranks; 0 for the others.
  size_t elementSize = 0;
  int nranks = 0;
};

// input(rank, index): element index of rank's send buffer. reduced(index): the reduction over ranks
// of input(., index). Both in double; the checker rounds to the type.
using InputValue = std::function<double(int rank, size_t index)>;
using ReducedValue = std::function<double(size_t index)>;

struct Collective {
  const char* name;       // "all_reduce"
  const char* algorithm;  // reported when the library cannot say what its selector runs
  bool usesOp;            // reductions: the redop column and -o apply
  bool usesRoot;          // rooted: the root column and -r apply
  // Why the in-place columns are not measured (they read 0 and N/A), or null where they are.
  const char* noInPlace;
  BufferCounts (*counts)(size_t count, size_t elementSize, int nranks);
  // nccl-tests' algorithm and bus bandwidth (GB/s) for param count elements in seconds.
  void (*bandwidth)(size_t count, size_t typeSize, double seconds, int nranks, double* algBw, double* busBw);
  // Enqueues one operation on stream.
  ncclResult_t (*run)(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                      ncclComm_t comm, cudaStream_t stream);
  // Elements of recv this rank must hold afterwards (0: nothing to check, e.g. a non-root of reduce).
  size_t (*checkedCount)(const BufferCounts& counts, int rank, int root);
  // Expected value of recv element index of rank.
  double (*expected)(size_t index, int rank, int nranks, int root, const BufferCounts& counts, const InputValue& input,
                     const ReducedValue& reduced);
  // Why this collective cannot run on nranks ranks, if it cannot.
  std::optional<std::string> (*unsupported)(int nranks);
  // One-sided operations (rma_perf) instead of run: every rank's receive buffer is registered as a window
  // (ncclCommWindowRegister) once, and one operation puts count elements of send into the peers' windows at
  // windowOffset bytes. Null for the collectives.
  ncclResult_t (*runWindowed)(const void* send, size_t count, ncclDataType_t type, ncclWindow_t window,
                              size_t windowOffset, ncclComm_t comm, cudaStream_t stream);
};

// How alltoallv_perf issues its exchange: a group of ncclSend/ncclRecv (nccl-tests' way), one ncclAllToAllv
// (--ncclalltoallv 1), or one of tutti's calls whose counts live in device memory (--tuttialltoallvdevice 1,
// --tuttialltoallvdynamic 1).
enum class AllToAllvCall { Group, NcclAllToAllv, TuttiDevice, TuttiDynamic };

// The collective of a binary name ("all_reduce", "hypercube", ...); throws perf::Error if unknown, or if `call`
// is not Group for another collective than alltoallv. rmaRoundTrip (--rma_roundtrip 1): rma_perf times a
// put+signal's round trip instead of a ring of puts.
const Collective& findCollective(const std::string& name, AllToAllvCall call = AllToAllvCall::Group,
                                 bool rmaRoundTrip = false);

}  // namespace tutti::perf
