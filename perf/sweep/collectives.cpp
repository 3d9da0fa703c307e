// The eleven collectives of the perf sweep: counts and bandwidth factors as nccl-tests defines them, calls, references.
#include "perf/sweep/collectives.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "perf/sweep/alltoallv_pattern.h"
#include "perf/sweep/error.h"
#include "tutti/tutti.h"

namespace tutti::perf {
namespace {

// nccl-tests rounds per-rank blocks down to 16 bytes.
size_t blockOf(size_t count, size_t elementSize, int nranks) {
  return (count / size_t(nranks)) & ~(16 / elementSize - 1);
}

BufferCounts sameCounts(size_t count, size_t, int) { return {count, count, count, 0, 0}; }
BufferCounts gatherCounts(size_t count, size_t elementSize, int nranks) {  // all_gather, gather, hypercube
  size_t block = blockOf(count, elementSize, nranks);
  return {block, block * size_t(nranks), block, block, 0};
}
BufferCounts scatterCounts(size_t count, size_t elementSize, int nranks) {  // reduce_scatter, scatter
  size_t block = blockOf(count, elementSize, nranks);
  return {block * size_t(nranks), block, block, 0, block};
}
BufferCounts alltoallCounts(size_t count, size_t elementSize, int nranks) {
  size_t block = blockOf(count, elementSize, nranks);
  return {block * size_t(nranks), block * size_t(nranks), block, 0, 0};
}

// alltoallv: the count column is the per-peer count nccl-tests derives (0 for a matrix, which gives the sizes), the
// buffers hold the most any rank sends or receives.
BufferCounts allToAllvCounts(size_t count, size_t elementSize, int nranks) {
  const AllToAllvPattern& pattern = allToAllvPattern();
  BufferCounts c;
  c.param = pattern.generated() ? blockOf(count, elementSize, nranks) : 0;
  c.elementSize = elementSize;
  c.nranks = nranks;
  const size_t total = c.param * size_t(nranks) * elementSize;
  // The generated pattern gives every rank the same totals; a matrix needs every rank.
  for (int r = 0; r < (pattern.generated() ? 1 : nranks); r++) {
    c.send = std::max(c.send, pattern.sentElements(r, nranks, total, elementSize));
    c.recv = std::max(c.recv, pattern.receivedElements(r, nranks, total, elementSize));
  }
  return c;
}

// algbw = bytes moved per rank-visible message / time; busbw = algbw * the factor that makes it
// comparable to link bandwidth (nccl-tests' definitions).
void setBandwidth(double bytes, double seconds, double factor, double* algBw, double* busBw) {
  *algBw = bytes / 1.0e9 / seconds;
  *busBw = *algBw * factor;
}
void allReduceBw(size_t count, size_t typeSize, double s, int n, double* a, double* b) {
  setBandwidth(double(count * typeSize), s, 2.0 * (n - 1) / n, a, b);
}
void perRankBlocksBw(size_t count, size_t typeSize, double s, int n, double* a,
                     double* b) {  // gathers, scatters, alltoall
  setBandwidth(double(count * typeSize) * n, s, double(n - 1) / n, a, b);
}
void oneMessageBw(size_t count, size_t typeSize, double s, int, double* a, double* b) {  // broadcast, reduce, sendrecv
  setBandwidth(double(count * typeSize), s, 1.0, a, b);
}
// alltoallv: the bytes the busiest rank sends or receives, as nccl-tests' alltoallv reports them.
void allToAllvBw(size_t count, size_t typeSize, double s, int n, double* a, double* b) {
  const BufferCounts c = allToAllvCounts(count * size_t(n), typeSize, n);
  setBandwidth(double(std::max(c.send, c.recv) * typeSize), s, double(n - 1) / n, a, b);
}
void hypercubeBw(size_t count, size_t typeSize, double s, int n, double* a, double* b) {
  setBandwidth(double(count * typeSize) * (n - 1), s, 1.0, a, b);
}

size_t elementSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

int commRank(ncclComm_t comm) {
  int rank = 0;
  ncclCommUserRank(comm, &rank);
  return rank;
}
int commSize(ncclComm_t comm) {
  int nranks = 1;
  ncclCommCount(comm, &nranks);
  return nranks;
}

ncclResult_t runAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int, ncclComm_t c,
                          cudaStream_t st) {
  return ncclAllReduce(s, r, n, t, op, c, st);
}
ncclResult_t runAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                          cudaStream_t st) {
  return ncclAllGather(s, r, n, t, c, st);
}
ncclResult_t runReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int, ncclComm_t c,
                              cudaStream_t st) {
  return ncclReduceScatter(s, r, n, t, op, c, st);
}
ncclResult_t runBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c,
                          cudaStream_t st) {
  return ncclBroadcast(s, r, n, t, root, c, st);
}
ncclResult_t runReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                       cudaStream_t st) {
  return ncclReduce(s, r, n, t, op, root, c, st);
}
ncclResult_t runAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                         cudaStream_t st) {
  return ncclAlltoAll(s, r, n, t, c, st);
}
ncclResult_t runGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c,
                       cudaStream_t st) {
  return n == 0 ? ncclSuccess : ncclGather(s, r, n, t, root, c, st);
}
ncclResult_t runScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int root, ncclComm_t c,
                        cudaStream_t st) {
  return n == 0 ? ncclSuccess : ncclScatter(s, r, n, t, root, c, st);
}

// An in-place sendrecv sends from and receives into one buffer in one group: NCCL calls that invalid
// usage (the receive may land before the send has read the bytes it overwrites), so whatever such
// a row would show is an accident of timing, on NCCL as on tutti. nccl-tests runs it all the same.
constexpr const char* kSendRecvInPlace =
    "an in-place sendrecv sends from and receives into one buffer in one group, which NCCL calls invalid usage "
    "(the receive may overwrite what is still to be sent): not run; the in-place columns read 0 and N/A";

// nccl-tests does not check an in-place alltoallv, and ncclAllToAllv refuses one.
constexpr const char* kAllToAllvInPlace =
    "alltoallv runs out of place only (ncclAllToAllv refuses sendbuff == recvbuff): not run; the in-place columns "
    "read 0 and N/A";

// rma_perf: put+signal has no in-place form (the put's bytes go to another rank's window).
constexpr const char* kRmaInPlace =
    "a put goes from the local buffer into another rank's window, which has no in-place form: not run; the in-place "
    "columns read 0 and N/A";

// Each rank sends to the next and receives from the previous, as one group.
ncclResult_t runSendRecv(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                         cudaStream_t st) {
  int rank = commRank(c), nranks = commSize(c);
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  ncclResult_t send = ncclSend(s, n, t, (rank + 1) % nranks, c, st);
  ncclResult_t recv = ncclRecv(r, n, t, (rank - 1 + nranks) % nranks, c, st);
  ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call
  return send != ncclSuccess ? send : recv != ncclSuccess ? recv : end;
}

// alltoallv: rank's blocks are packed in its send buffer in destination order and land in its receive buffer in
// source order, as in nccl-tests; count is the per-peer count, from which the generated pattern's total follows.
struct AllToAllvBlocks {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
};
void blocksOf(size_t count, ncclDataType_t t, ncclComm_t c, AllToAllvBlocks& b) {
  const AllToAllvPattern& pattern = allToAllvPattern();
  const int rank = commRank(c), nranks = commSize(c);
  const size_t size = elementSize(t), total = count * size_t(nranks) * size;
  b.sendCounts.assign(size_t(nranks), 0);
  b.sendDispls.assign(size_t(nranks), 0);
  b.recvCounts.assign(size_t(nranks), 0);
  b.recvDispls.assign(size_t(nranks), 0);
  size_t sent = 0, received = 0;
  for (int p = 0; p < nranks; p++) {
    b.sendCounts[size_t(p)] = pattern.peerBytes(rank, p, nranks, total) / size;
    b.recvCounts[size_t(p)] = pattern.peerBytes(p, rank, nranks, total) / size;
    b.sendDispls[size_t(p)] = sent;
    b.recvDispls[size_t(p)] = received;
    sent += b.sendCounts[size_t(p)];
    received += b.recvCounts[size_t(p)];
  }
}

// By default one group of ncclSend/ncclRecv per peer, as nccl-tests' alltoallv_perf measures.
ncclResult_t runAllToAllvGroup(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                               cudaStream_t st) {
  thread_local AllToAllvBlocks b;  // reused: nothing is allocated between timed iterations
  blocksOf(n, t, c, b);
  const size_t size = elementSize(t);
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  for (size_t p = 0; p < b.sendCounts.size() && result == ncclSuccess; p++) {
    if (b.sendCounts[p] > 0)
      result = ncclSend(static_cast<const char*>(s) + b.sendDispls[p] * size, b.sendCounts[p], t, int(p), c, st);
    if (b.recvCounts[p] > 0 && result == ncclSuccess)
      result = ncclRecv(static_cast<char*>(r) + b.recvDispls[p] * size, b.recvCounts[p], t, int(p), c, st);
  }
  ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call
  return result != ncclSuccess ? result : end;
}

// With --ncclalltoallv 1: the same blocks through one ncclAllToAllv.
ncclResult_t runAllToAllvCall(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                              cudaStream_t st) {
  thread_local AllToAllvBlocks b;
  blocksOf(n, t, c, b);
  return ncclAllToAllv(s, b.sendCounts.data(), b.sendDispls.data(), r, b.recvCounts.data(), b.recvDispls.data(), t, c,
                       st);
}

// The counts of tutti's device-count calls, in memory from ncclMemAlloc (the host's in host mode, where the sweep
// writes them; on a device backend tutti refuses these calls, unwritten). Written only when the blocks change: a
// queued iteration may still be reading them.
struct DeviceCounts {
  size_t* send = nullptr;
  size_t* recv = nullptr;
  size_t nranks = 0, count = 0, sendTotal = 0, recvTotal = 0, recvMost = 0;
  ncclDataType_t type = ncclInt8;
  ~DeviceCounts() {
    if (send) ncclMemFree(send);
    if (recv) ncclMemFree(recv);
  }
  ncclResult_t update(size_t n, ncclDataType_t t, ncclComm_t c) {
    const size_t ranks = size_t(commSize(c));
    if (send != nullptr && ranks == nranks && n == count && t == type) return ncclSuccess;
    if (send == nullptr || ranks != nranks) {
      if (send) ncclMemFree(send);
      if (recv) ncclMemFree(recv);
      send = recv = nullptr;
      void *s = nullptr, *r = nullptr;
      ncclResult_t result = ncclMemAlloc(&s, ranks * sizeof(size_t));
      if (result == ncclSuccess) result = ncclMemAlloc(&r, ranks * sizeof(size_t));
      send = static_cast<size_t*>(s);
      recv = static_cast<size_t*>(r);
      if (result != ncclSuccess) return result;
    }
    thread_local AllToAllvBlocks b;
    blocksOf(n, t, c, b);
    nranks = ranks;
    count = n;
    type = t;
    sendTotal = recvTotal = recvMost = 0;
    for (size_t p = 0; p < ranks; p++) {
      sendTotal += b.sendCounts[p];
      recvTotal += b.recvCounts[p];
      recvMost = std::max(recvMost, b.recvCounts[p]);
    }
    const char* backend = "";
    if (tuttiCommDeviceBackend(c, &backend) == ncclSuccess && std::strcmp(backend, "host") == 0) {
      std::memcpy(send, b.sendCounts.data(), ranks * sizeof(size_t));
      std::memcpy(recv, b.recvCounts.data(), ranks * sizeof(size_t));
    }
    return ncclSuccess;
  }
};

// One per communicator: a thread may run several ranks (-g), and each rank's counts are read after its call returns.
DeviceCounts& deviceCountsOf(ncclComm_t c) {
  thread_local std::map<ncclComm_t, DeviceCounts> counts;
  return counts[c];
}

// With --tuttialltoallvdevice 1: the same blocks through tuttiAllToAllvDevice, both count arrays in device memory.
ncclResult_t runAllToAllvDevice(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                                cudaStream_t st) {
  DeviceCounts& d = deviceCountsOf(c);
  if (ncclResult_t result = d.update(n, t, c); result != ncclSuccess) return result;
  return tuttiAllToAllvDevice(s, d.send, d.sendTotal, r, d.recv, d.recvTotal, t, c, st);
}

// With --tuttialltoallvdynamic 1: through tuttiAllToAllvDynamic, the receive counts found (into d.recv) with the
// largest block as the maximum.
ncclResult_t runAllToAllvDynamic(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                                 cudaStream_t st) {
  DeviceCounts& d = deviceCountsOf(c);
  if (ncclResult_t result = d.update(n, t, c); result != ncclSuccess) return result;
  return tuttiAllToAllvDynamic(s, d.send, d.sendTotal, r, d.recvTotal, d.recvMost, d.recv, t, c, st);
}

// An all-gather by pairwise exchanges across the hypercube's dimensions, doubling the block each round.
ncclResult_t runHypercube(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t, int, ncclComm_t c,
                          cudaStream_t st) {
  int rank = commRank(c), nranks = commSize(c);
  size_t blockBytes = n * elementSize(t);
  char* recv = static_cast<char*>(r);
  if (recv + size_t(rank) * blockBytes != s) std::memmove(recv + size_t(rank) * blockBytes, s, blockBytes);
  for (int mask = 1; mask < nranks; mask <<= 1) {
    int sendBlock = rank & ~(mask - 1), recvBlock = sendBlock ^ mask;
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    ncclResult_t send = ncclSend(recv + size_t(sendBlock) * blockBytes, n * size_t(mask), t, rank ^ mask, c, st);
    ncclResult_t recvResult = ncclRecv(recv + size_t(recvBlock) * blockBytes, n * size_t(mask), t, rank ^ mask, c, st);
    ncclResult_t end = ncclGroupEnd();
    if (send != ncclSuccess) return send;
    if (recvResult != ncclSuccess) return recvResult;
    if (end != ncclSuccess) return end;
  }
  return ncclSuccess;
}

// rma_perf: one put of count elements into the next rank's window and a signal with it; a count of 0 is a signal
// alone (ncclSignal).
ncclResult_t putToNext(const void* s, size_t n, ncclDataType_t t, ncclWindow_t w, size_t offset, ncclComm_t c,
                       cudaStream_t st) {
  const int next = (commRank(c) + 1) % commSize(c);
  return n == 0 ? ncclSignal(next, 0, 0, 0, c, st) : ncclPutSignal(s, n, t, next, w, offset, 0, 0, 0, c, st);
}
ncclResult_t waitForPrevious(ncclComm_t c, cudaStream_t st) {
  ncclWaitSignalDesc_t desc{};
  desc.opCnt = 1;
  desc.peer = (commRank(c) - 1 + commSize(c)) % commSize(c);
  return ncclWaitSignal(1, &desc, c, st);
}
// The ring of puts, sendrecv_perf's pattern one-sided: each rank puts into the next rank's window and waits for the
// previous rank's signal. In a group (-g, -m) tutti runs the puts before the waits.
ncclResult_t runPutRing(const void* s, size_t n, ncclDataType_t t, ncclWindow_t w, size_t offset, ncclComm_t c,
                        cudaStream_t st) {
  ncclResult_t put = putToNext(s, n, t, w, offset, c, st);
  return put != ncclSuccess ? put : waitForPrevious(c, st);
}
// A round trip around the ring: rank 0 puts into rank 1's window, which puts into rank 2's once rank 0's signal has
// come, and so on back to rank 0 (with two ranks, a ping-pong). Stream order keeps each put behind its wait.
ncclResult_t runPutRoundTrip(const void* s, size_t n, ncclDataType_t t, ncclWindow_t w, size_t offset, ncclComm_t c,
                             cudaStream_t st) {
  if (commRank(c) == 0) {
    ncclResult_t put = putToNext(s, n, t, w, offset, c, st);
    return put != ncclSuccess ? put : waitForPrevious(c, st);
  }
  ncclResult_t wait = waitForPrevious(c, st);
  return wait != ncclSuccess ? wait : putToNext(s, n, t, w, offset, c, st);
}

size_t allOutput(const BufferCounts& c, int, int) { return c.recv; }
size_t allToAllvOutput(const BufferCounts& c, int rank, int) {
  return allToAllvPattern().receivedElements(rank, c.nranks, c.param * size_t(c.nranks) * c.elementSize, c.elementSize);
}
size_t rootOutput(const BufferCounts& c, int rank, int root) { return rank == root ? c.recv : 0; }

double expectReduced(size_t i, int, int, int, const BufferCounts&, const InputValue&, const ReducedValue& reduced) {
  return reduced(i);
}
double expectGathered(size_t i, int, int, int, const BufferCounts& counts, const InputValue& input,
                      const ReducedValue&) {
  return input(int(i / counts.param), i % counts.param);
}
double expectScatteredReduction(size_t i, int rank, int, int, const BufferCounts& counts, const InputValue&,
                                const ReducedValue& reduced) {
  return reduced(size_t(rank) * counts.param + i);
}
double expectRootCopy(size_t i, int, int, int root, const BufferCounts&, const InputValue& input, const ReducedValue&) {
  return input(root, i);
}
double expectAlltoAll(size_t i, int rank, int, int, const BufferCounts& counts, const InputValue& input,
                      const ReducedValue&) {
  return input(int(i / counts.param), size_t(rank) * counts.param + i % counts.param);
}
double expectFromPrevious(size_t i, int rank, int nranks, int, const BufferCounts&, const InputValue& input,
                          const ReducedValue&) {
  return input((rank - 1 + nranks) % nranks, i);
}
double expectScattered(size_t i, int rank, int, int root, const BufferCounts& counts, const InputValue& input,
                       const ReducedValue&) {
  return input(root, size_t(rank) * counts.param + i);
}

// Element i of rank's output: from the source whose block holds it, at its place in that source's send buffer.
double expectAllToAllv(size_t i, int rank, int nranks, int, const BufferCounts& counts, const InputValue& input,
                       const ReducedValue&) {
  const AllToAllvPattern& pattern = allToAllvPattern();
  const size_t total = counts.param * size_t(nranks) * counts.elementSize;
  for (int src = 0; src < nranks; src++) {
    const size_t block = pattern.peerBytes(src, rank, nranks, total) / counts.elementSize;
    if (i >= block) {
      i -= block;
      continue;
    }
    size_t before = 0;  // what src sends lower ranks, ahead of this block
    for (int d = 0; d < rank; d++) before += pattern.peerBytes(src, d, nranks, total) / counts.elementSize;
    return input(src, before + i);
  }
  return 0;
}

std::optional<std::string> anyRanks(int) { return std::nullopt; }
std::optional<std::string> powerOfTwoRanks(int nranks) {
  if ((nranks & (nranks - 1)) == 0) return std::nullopt;
  return "hypercube needs a power-of-two number of ranks, not " + std::to_string(nranks);
}

const std::vector<Collective>& collectives() {
  static const std::vector<Collective> table = {
      {"all_reduce", "ring", true, false, nullptr, sameCounts, allReduceBw, runAllReduce, allOutput, expectReduced,
       anyRanks, nullptr},
      {"all_gather", "ring", false, false, nullptr, gatherCounts, perRankBlocksBw, runAllGather, allOutput,
       expectGathered, anyRanks, nullptr},
      {"reduce_scatter", "ring", true, false, nullptr, scatterCounts, perRankBlocksBw, runReduceScatter, allOutput,
       expectScatteredReduction, anyRanks, nullptr},
      {"broadcast", "ring", false, true, nullptr, sameCounts, oneMessageBw, runBroadcast, allOutput, expectRootCopy,
       anyRanks, nullptr},
      {"reduce", "ring", true, true, nullptr, sameCounts, oneMessageBw, runReduce, rootOutput, expectReduced, anyRanks,
       nullptr},
      {"alltoall", "direct", false, false, nullptr, alltoallCounts, perRankBlocksBw, runAlltoAll, allOutput,
       expectAlltoAll, anyRanks, nullptr},
      {"sendrecv", "p2p", true, false, kSendRecvInPlace, sameCounts, oneMessageBw, runSendRecv, allOutput,
       expectFromPrevious, anyRanks, nullptr},
      {"gather", "direct", false, true, nullptr, gatherCounts, perRankBlocksBw, runGather, rootOutput, expectGathered,
       anyRanks, nullptr},
      {"scatter", "direct", false, true, nullptr, scatterCounts, perRankBlocksBw, runScatter, allOutput,
       expectScattered, anyRanks, nullptr},
      {"hypercube", "p2p", false, false, nullptr, gatherCounts, hypercubeBw, runHypercube, allOutput, expectGathered,
       powerOfTwoRanks, nullptr},
      {"alltoallv", "p2p", false, false, kAllToAllvInPlace, allToAllvCounts, allToAllvBw, runAllToAllvGroup,
       allToAllvOutput, expectAllToAllv, anyRanks, nullptr},
      {"rma", "put+signal ring", false, false, kRmaInPlace, sameCounts, oneMessageBw, nullptr, allOutput,
       expectFromPrevious, anyRanks, runPutRing},
  };
  return table;
}

const Collective& roundTripOfPuts() {
  static const Collective roundTrip = {
      "rma",     "put+signal round trip", false,    false,          kRmaInPlace, sameCounts, oneMessageBw, nullptr,
      allOutput, expectFromPrevious,      anyRanks, runPutRoundTrip};
  return roundTrip;
}

const Collective& allToAllvCall(AllToAllvCall call) {
  static const Collective nccl = {"alltoallv",       "ncclAllToAllv", false,       false,
                                  kAllToAllvInPlace, allToAllvCounts, allToAllvBw, runAllToAllvCall,
                                  allToAllvOutput,   expectAllToAllv, anyRanks,    nullptr};
  static const Collective device = {"alltoallv",       "tuttiAllToAllvDevice", false,       false,
                                    kAllToAllvInPlace, allToAllvCounts,        allToAllvBw, runAllToAllvDevice,
                                    allToAllvOutput,   expectAllToAllv,        anyRanks,    nullptr};
  static const Collective dynamic = {"alltoallv",       "tuttiAllToAllvDynamic", false,       false,
                                     kAllToAllvInPlace, allToAllvCounts,         allToAllvBw, runAllToAllvDynamic,
                                     allToAllvOutput,   expectAllToAllv,         anyRanks,    nullptr};
  return call == AllToAllvCall::TuttiDevice ? device : call == AllToAllvCall::TuttiDynamic ? dynamic : nccl;
}

}  // namespace

const Collective& findCollective(const std::string& name, AllToAllvCall call, bool rmaRoundTrip) {
  if (rmaRoundTrip) {
    if (name != "rma")
      throw Error(ErrorCode::InvalidArgument, "--rma_roundtrip 1 applies to rma_perf only, not " + name + "_perf");
    return roundTripOfPuts();
  }
  if (call != AllToAllvCall::Group) {
    const char* flag = call == AllToAllvCall::NcclAllToAllv ? "--ncclalltoallv"
                       : call == AllToAllvCall::TuttiDevice ? "--tuttialltoallvdevice"
                                                            : "--tuttialltoallvdynamic";
    if (name != "alltoallv")
      throw Error(ErrorCode::InvalidArgument,
                  std::string(flag) + " 1 applies to alltoallv_perf only, not " + name + "_perf");
    return allToAllvCall(call);
  }
  for (const Collective& c : collectives())
    if (name == c.name) return c;
  throw Error(ErrorCode::InvalidArgument, "unknown collective '" + name + "'");
}

}  // namespace tutti::perf
