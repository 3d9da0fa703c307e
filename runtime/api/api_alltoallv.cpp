// ncclAllToAllv, the all-to-all with a count per pair that NCCLX, RCCL and MSCCL++ share beyond
// NVIDIA's API: its arguments checked, then one send and one receive per peer, as a group.
//
// The blocks travel as the grouped ncclSend/ncclRecv machinery moves them, inside the caller's
// group or a group of their own, so they launch as one operation per communicator, stream-ordered
// on every backend. The self block is a send and a receive to this rank, which the launch turns
// into one local copy. Peers are taken in the order rank + s (sends) and rank - s (receives) for
// s = 0..n-1: the block from a to b is then the s = (b - a) mod n pair at both ends, the same order
// on every connection whatever else the group holds. Each block is marked (Task::partOfAllToAllv)
// and numbered by the call, so that a pair whose counts disagree fails at its first message naming
// ncclAllToAllv, as the executors check every send and receive, and a block never lands in another
// call (a block of 0 elements sends no message: its peer's block of the next call would otherwise
// fill a receive that waits for it).
#include <algorithm>
#include <limits>
#include <vector>

#include "base/log.h"
#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/group.h"

using namespace tutti;

namespace {

constexpr const char* kOperation = "ncclAllToAllv";

// Bytes past the buffer's start that the block of `count` elements at displacement `displ` ends
// at; throws when that overflows the address space.
size_t blockEnd(const ncclComm* comm, size_t displ, size_t count, size_t eltSize, const char* side, int peer) {
  const size_t max = std::numeric_limits<size_t>::max();
  if (count > max - displ || displ + count > max / eltSize)
    throw Error(ErrorCode::InvalidArgument, std::string(kOperation) + ": " + comm->where() + ": the " + side +
                                                " block of rank " + std::to_string(peer) + " (displacement " +
                                                std::to_string(displ) + ", count " + std::to_string(count) +
                                                ") overflows the address space");
  return (displ + count) * eltSize;
}

void checkArray(const ncclComm* comm, const size_t* array, const char* name) {
  if (array == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(kOperation) + ": " + comm->where() + ": " + name +
                                                " is NULL (it needs one entry per rank, " +
                                                std::to_string(comm->identity.nranks) + ")");
}

// The receive blocks must not overlap (two peers would write the same bytes); send blocks may.
void checkReceiveBlocks(const ncclComm* comm, const size_t* recvcounts, const size_t* rdispls) {
  std::vector<int> peers;
  for (int p = 0; p < comm->identity.nranks; p++)
    if (recvcounts[p] > 0) peers.push_back(p);
  std::sort(peers.begin(), peers.end(), [&](int a, int b) { return rdispls[a] < rdispls[b]; });
  for (size_t i = 1; i < peers.size(); i++) {
    const int a = peers[i - 1], b = peers[i];
    if (rdispls[a] + recvcounts[a] > rdispls[b])
      throw Error(ErrorCode::InvalidArgument,
                  std::string(kOperation) + ": " + comm->where() + ": the receive blocks of rank " + std::to_string(a) +
                      " (elements " + std::to_string(rdispls[a]) + ".." + std::to_string(rdispls[a] + recvcounts[a]) +
                      ") and rank " + std::to_string(b) + " (elements " + std::to_string(rdispls[b]) + ".." +
                      std::to_string(rdispls[b] + recvcounts[b]) +
                      ") overlap; every peer's block needs bytes of its own");
  }
}

// Ends the group this call opened, on every path: normally by running it, after a throw by
// dropping it (the group then reports the error as any failed call inside a group does).
class OwnGroup {
 public:
  OwnGroup() { groupStart(); }
  ~OwnGroup() {
    if (open_) {
      groupRecordError(ncclInternalError);
      try {
        groupEnd();
      } catch (const Error&) {
      }
    }
  }
  void end() {
    open_ = false;
    groupEnd();
  }
  OwnGroup(const OwnGroup&) = delete;
  OwnGroup& operator=(const OwnGroup&) = delete;

 private:
  bool open_ = true;
};

}  // namespace

TUTTI_API ncclResult_t pncclAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                      void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return guard(kOperation, [&] {
    checkUsableComm(kOperation, comm);
    log::setThreadDevice(comm->identity.device);
    checkType(kOperation, comm, datatype);
    checkArray(comm, sendcounts, "sendcounts");
    checkArray(comm, sdispls, "sdispls");
    checkArray(comm, recvcounts, "recvcounts");
    checkArray(comm, rdispls, "rdispls");
    const int nranks = comm->identity.nranks, rank = comm->identity.rank;
    const size_t eltSize = kern::dtypeSize(datatype);
    size_t sendBytes = 0, recvBytes = 0;  // how far into each buffer the blocks reach
    size_t sent = 0, received = 0;        // elements, for the log
    for (int p = 0; p < nranks; p++) {
      if (sendcounts[p] > 0)
        sendBytes = std::max(sendBytes, blockEnd(comm, sdispls[p], sendcounts[p], eltSize, "send", p));
      if (recvcounts[p] > 0)
        recvBytes = std::max(recvBytes, blockEnd(comm, rdispls[p], recvcounts[p], eltSize, "receive", p));
      sent += sendcounts[p];
      received += recvcounts[p];
    }
    if (sendbuff != nullptr && sendbuff == recvbuff)
      throw Error(ErrorCode::InvalidArgument,
                  std::string(kOperation) + ": " + comm->where() +
                      ": sendbuff and recvbuff are the same buffer; ncclAllToAllv runs out of place only "
                      "(in place is not supported by tutti yet)");
    checkBuffer(kOperation, comm, sendbuff, sendBytes / eltSize, eltSize, "sendbuff");
    checkBuffer(kOperation, comm, recvbuff, recvBytes / eltSize, eltSize, "recvbuff");
    checkReceiveBlocks(comm, recvcounts, rdispls);
    if (sendcounts[rank] != recvcounts[rank])
      throw Error(ErrorCode::InvalidArgument,
                  std::string(kOperation) + ": " + comm->where() + ": sendcounts[" + std::to_string(rank) +
                      "] = " + std::to_string(sendcounts[rank]) + " but recvcounts[" + std::to_string(rank) + "] = " +
                      std::to_string(recvcounts[rank]) + ": the block a rank sends itself must fit what it receives");
    checkStream(kOperation, comm, stream);
    TUTTI_INFO(log::Coll,
               "%s: opCount %llx sendbuff %p recvbuff %p sent %zu received %zu datatype %d comm %p [nranks=%d] "
               "stream %p",
               kOperation, (unsigned long long)comm->executor.opSeq, sendbuff, recvbuff, sent, received, int(datatype),
               static_cast<void*>(comm), nranks, static_cast<void*>(stream));
    // Every rank numbers its calls alike, so a block that arrives for another call is caught, not taken.
    const uint32_t seq = comm->executor.allToAllvSeq++;
    const char* in = static_cast<const char*>(sendbuff);
    char* out = static_cast<char*>(recvbuff);
    OwnGroup group;
    for (int s = 0; s < nranks; s++) {
      const int to = (rank + s) % nranks, from = (rank + nranks - s) % nranks;
      Task send{plan::Coll::Send,
                sendcounts[to] > 0 ? in + sdispls[to] * eltSize : in,
                nullptr,
                sendcounts[to],
                datatype,
                ncclSum,
                to,
                comm,
                stream};
      Task recv{plan::Coll::Recv,
                nullptr,
                recvcounts[from] > 0 ? out + rdispls[from] * eltSize : out,
                recvcounts[from],
                datatype,
                ncclSum,
                from,
                comm,
                stream};
      send.partOfAllToAllv = recv.partOfAllToAllv = true;
      send.allToAllvSeq = recv.allToAllvSeq = seq;
      enqueueTask(send);
      enqueueTask(recv);
    }
    group.end();
  });
}
TUTTI_NCCL_ALIAS(ncclAllToAllv)
