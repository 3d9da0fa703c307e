// The ten collectives of the perf sweep: counts and bandwidth factors as nccl-tests defines them, calls, references.
#include "perf/sweep/collectives.h"

#include <cstring>
#include <vector>

#include "perf/sweep/error.h"

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

size_t allOutput(const BufferCounts& c, int, int) { return c.recv; }
size_t rootOutput(const BufferCounts& c, int rank, int root) { return rank == root ? c.recv : 0; }

double expectReduced(size_t i, int, int, int, size_t, const InputValue&, const ReducedValue& reduced) {
  return reduced(i);
}
double expectGathered(size_t i, int, int, int, size_t param, const InputValue& input, const ReducedValue&) {
  return input(int(i / param), i % param);
}
double expectScatteredReduction(size_t i, int rank, int, int, size_t param, const InputValue&,
                                const ReducedValue& reduced) {
  return reduced(size_t(rank) * param + i);
}
double expectRootCopy(size_t i, int, int, int root, size_t, const InputValue& input, const ReducedValue&) {
  return input(root, i);
}
double expectAlltoAll(size_t i, int rank, int, int, size_t param, const InputValue& input, const ReducedValue&) {
  return input(int(i / param), size_t(rank) * param + i % param);
}
double expectFromPrevious(size_t i, int rank, int nranks, int, size_t, const InputValue& input, const ReducedValue&) {
  return input((rank - 1 + nranks) % nranks, i);
}
double expectScattered(size_t i, int rank, int, int root, size_t param, const InputValue& input, const ReducedValue&) {
  return input(root, size_t(rank) * param + i);
}

std::optional<std::string> anyRanks(int) { return std::nullopt; }
std::optional<std::string> powerOfTwoRanks(int nranks) {
  if ((nranks & (nranks - 1)) == 0) return std::nullopt;
  return "hypercube needs a power-of-two number of ranks, not " + std::to_string(nranks);
}

const std::vector<Collective>& collectives() {
  static const std::vector<Collective> table = {
      {"all_reduce", "ring", true, false, nullptr, sameCounts, allReduceBw, runAllReduce, allOutput, expectReduced,
       anyRanks},
      {"all_gather", "ring", false, false, nullptr, gatherCounts, perRankBlocksBw, runAllGather, allOutput,
       expectGathered, anyRanks},
      {"reduce_scatter", "ring", true, false, nullptr, scatterCounts, perRankBlocksBw, runReduceScatter, allOutput,
       expectScatteredReduction, anyRanks},
      {"broadcast", "ring", false, true, nullptr, sameCounts, oneMessageBw, runBroadcast, allOutput, expectRootCopy,
       anyRanks},
      {"reduce", "ring", true, true, nullptr, sameCounts, oneMessageBw, runReduce, rootOutput, expectReduced, anyRanks},
      {"alltoall", "direct", false, false, nullptr, alltoallCounts, perRankBlocksBw, runAlltoAll, allOutput,
       expectAlltoAll, anyRanks},
      {"sendrecv", "p2p", true, false, kSendRecvInPlace, sameCounts, oneMessageBw, runSendRecv, allOutput,
       expectFromPrevious, anyRanks},
      {"gather", "direct", false, true, nullptr, gatherCounts, perRankBlocksBw, runGather, rootOutput, expectGathered,
       anyRanks},
      {"scatter", "direct", false, true, nullptr, scatterCounts, perRankBlocksBw, runScatter, allOutput,
       expectScattered, anyRanks},
      {"hypercube", "p2p", false, false, nullptr, gatherCounts, hypercubeBw, runHypercube, allOutput, expectGathered,
       powerOfTwoRanks},
  };
  return table;
}

}  // namespace

const Collective& findCollective(const std::string& name) {
  for (const Collective& c : collectives())
    if (name == c.name) return c;
  throw Error(ErrorCode::InvalidArgument, "unknown collective '" + name + "'");
}

}  // namespace tutti::perf
