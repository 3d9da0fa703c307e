// The device-count all-to-alls on their stream (alltoallv_device.h): blocks bound at the call,
// counts read and set by host jobs in stream order.
#include "runtime/launch/alltoallv_device.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "algorithms/tiling.h"
#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/host_job.h"
#include "runtime/launch/launch.h"

namespace tutti {

namespace {

// One call's state, shared by its jobs; the launches it holds live until the last of them ends.
struct Exchange {
  DeviceCountAllToAllv call;
  std::string where;  // the rank, for messages
  size_t eltSize = 1;
  int nchannels = 1;
  size_t slotBytes = 0;
  std::shared_ptr<CommLaunch> blocks;
  void* stage = nullptr;  // the dynamic form's counts: what this rank sends each peer, then what each sent it
  ~Exchange() {
    if (stage != nullptr) blocks->comm->executor.backend->memory().release(stage);
  }
};

// The blocks in ncclAllToAllv's order (api_alltoallv.cpp): the send to rank + s and the receive
// from rank - s, each marked as a block of the call numbered `seq`.
std::vector<Task> blockTasks(const DeviceCountAllToAllv& c, const void* in, size_t inStride, size_t sendBound,
                             void* out, size_t outStride, size_t recvBound, ncclDataType_t type, uint32_t seq) {
  const int n = c.comm->identity.nranks, rank = c.comm->identity.rank;
  const size_t elt = kern::dtypeSize(type);
  std::vector<Task> tasks;
  for (int s = 0; s < n; s++) {
    const int to = (rank + s) % n, from = (rank + n - s) % n;
    // A self send and its receive become one copy, which needs one count for both.
    const size_t self = std::min(sendBound, recvBound);
    Task send{plan::Coll::Send,
              static_cast<const char*>(in) + size_t(to) * inStride * elt,
              nullptr,
              to == rank ? self : sendBound,
              type,
              ncclSum,
              to,
              c.comm,
              c.stream};
    Task recv{plan::Coll::Recv,
              nullptr,
              static_cast<char*>(out) + size_t(from) * outStride * elt,
              from == rank ? self : recvBound,
              type,
              ncclSum,
              from,
              c.comm,
              c.stream};
    send.partOfAllToAllv = recv.partOfAllToAllv = true;
    send.allToAllvSeq = recv.allToAllvSeq = seq;
    tasks.push_back(send);
    tasks.push_back(recv);
  }
  return tasks;
}

// Sets every block's count and buffer in the bound launch's arena, and its lanes' ranges and
// chunks as a send or receive of that count is cut (comm_launch.cpp: channels by bytes, the chunk
// from the FIFO slot): both ends of a pair hold the same count, so both cut it alike.
void setBlocks(Exchange& x, const size_t* sendCounts, const size_t* sdispls, const size_t* recvCounts,
               const size_t* rdispls) {
  CommLaunch& L = *x.blocks;
  kern::LaunchWork& w = L.work();
  const int rank = L.comm->identity.rank;
  const char* in = static_cast<const char*>(x.call.sendbuff);
  char* out = static_cast<char*>(x.call.recvbuff);
  for (uint32_t i = 0; i < w.nops; i++) {
    const Task& t = L.tasks[i];
    kern::OpWork& op = w.ops()[i];
    const size_t p = size_t(t.root);
    if (t.coll == plan::Coll::Send) {
      op.count = sendCounts[p];
      op.in = in + sdispls[p] * x.eltSize;
      if (t.root == rank) op.out = out + rdispls[p] * x.eltSize;  // the self copy
    } else {
      op.count = recvCounts[p];
      op.out = out + rdispls[p] * x.eltSize;
    }
  }
  for (uint32_t l = 0; l < w.nlanes; l++) {
    kern::LaneWork& lane = w.lanes()[l];
    const size_t count = w.ops()[lane.op].count, bytes = count * x.eltSize;
    const int used = channelsForBytes(bytes, x.nchannels);
    const tiling::Range range =
        lane.channel < used ? tiling::channelRange(count, used, lane.channel) : tiling::Range{0, 0};
    lane.begin = range.begin;
    lane.end = range.end;
    const size_t chunk = plan::joinedChunkBytes(tiling::chunkBytesFor(x.slotBytes, bytes), lane.plan->joinWidth);
    lane.chunkElems = std::max<size_t>(1, chunk / x.eltSize);
  }
}

// Binds the blocks with the host's limits as their counts, then sets them to 0 elements: a launch
// whose counts were never read moves nothing.
void bindBlocks(Exchange& x, size_t sendBound, size_t recvBound, uint32_t seq) {
  const DeviceCountAllToAllv& c = x.call;
  x.blocks = bindLaunch(blockTasks(c, c.sendbuff, 0, sendBound, c.recvbuff, 0, recvBound, c.type, seq), x.nchannels);
  kern::LaunchWork& w = x.blocks->work();
  if (w.nops != x.blocks->tasks.size())
    throw Error(ErrorCode::Internal, std::string(c.operation) + ": " + x.where + ": " + std::to_string(w.nops) +
                                         " operations bound for " + std::to_string(x.blocks->tasks.size()) + " blocks");
  for (uint32_t i = 0; i < w.nops; i++) {
    // A block's bytes are known only when it runs: none is sent by address.
    w.ops()[i].direct = 0;
    w.ops()[i].mapped = nullptr;
  }
  for (uint32_t i = 0; i < w.nconns; i++)
    if (w.conns()[i].ll != 0)
      throw Error(ErrorCode::Internal, std::string(c.operation) + ": " + x.where +
                                           ": a block was bound to LL lines, whose sizes both ends fix at the call");
  const std::vector<size_t> zeros(size_t(c.comm->identity.nranks), 0);
  setBlocks(x, zeros.data(), zeros.data(), zeros.data(), zeros.data());
}

std::vector<size_t> readCounts(const Exchange& x, const size_t* counts) {
  std::vector<size_t> host(size_t(x.blocks->comm->identity.nranks));
  x.blocks->comm->executor.backend->memory().copyOut(host.data(), counts, host.size() * sizeof(size_t));
  return host;
}

[[noreturn]] void refuseCount(const Exchange& x, int from, int to, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage, std::string(x.call.operation) + ": " + x.where + ": the block rank " +
                                           std::to_string(from) + " -> rank " + std::to_string(to) + " " + what);
}

// Exclusive prefix sums of `counts`, each block checked to end within `capacity` elements:
// throws naming the pair (rank `me` and the block's peer, in the direction `sending` says).
std::vector<size_t> packedDispls(const Exchange& x, const std::vector<size_t>& counts, size_t capacity,
                                 const char* capacityName, bool sending) {
  const int me = x.blocks->comm->identity.rank;
  std::vector<size_t> displs(counts.size());
  size_t at = 0;
  for (size_t p = 0; p < counts.size(); p++) {
    displs[p] = at;
    if (counts[p] > capacity - at)
      refuseCount(x, sending ? me : int(p), sending ? int(p) : me,
                  "(count " + std::to_string(counts[p]) + ", at element " + std::to_string(at) + ") passes " +
                      capacityName + " (" + std::to_string(capacity) + " elements)");
    at += counts[p];
  }
  return displs;
}

}  // namespace

void enqueueDeviceCountAllToAllv(const DeviceCountAllToAllv& call) {
  ncclComm* comm = call.comm;
  const int n = comm->identity.nranks;
  auto x = std::make_shared<Exchange>();
  x->call = call;
  x->where = comm->where();
  x->eltSize = kern::dtypeSize(call.type);
  x->nchannels = std::max(1, comm->settings.nchannels);
  x->slotBytes = comm->settings.slotBytes;
  const bool found = call.foundCounts != nullptr;

  if (!found) {
    // Both counts given: one job reads and sets them, then the blocks run.
    bindBlocks(*x, call.sendCapacity, call.recvCapacity, comm->executor.allToAllvSeq++);
    queueCommJob(comm, call.stream, [x] {
      const std::vector<size_t> sends = readCounts(*x, x->call.sendcounts);
      const std::vector<size_t> recvs = readCounts(*x, x->call.recvcounts);
      const std::vector<size_t> sdispls = packedDispls(*x, sends, x->call.sendCapacity, "sendCapacity", true);
      const std::vector<size_t> rdispls = packedDispls(*x, recvs, x->call.recvCapacity, "recvCapacity", false);
      const int me = x->blocks->comm->identity.rank;
      if (sends[size_t(me)] != recvs[size_t(me)])
        refuseCount(*x, me, me,
                    "is " + std::to_string(sends[size_t(me)]) + " elements in sendcounts but " +
                        std::to_string(recvs[size_t(me)]) + " in recvcounts; a rank's block to itself must agree");
      setBlocks(*x, sends.data(), sdispls.data(), recvs.data(), rdispls.data());
    });
    submitLaunch(x->blocks);
    return;
  }

  // Receive counts found: each rank's counts travel first, one per pair, then the blocks.
  const uint32_t countsSeq = comm->executor.allToAllvSeq++;
  bindBlocks(*x, call.sendCapacity, std::min(call.recvCapacity, call.maxRecvCount), comm->executor.allToAllvSeq++);
  x->stage = comm->executor.backend->memory().allocate(2 * size_t(n) * sizeof(size_t),
                                                       x->where + ": " + call.operation + "'s counts");
  size_t* outgoing = static_cast<size_t*>(x->stage);
  size_t* incoming = outgoing + n;
  std::shared_ptr<CommLaunch> counts =
      bindLaunch(blockTasks(call, outgoing, 1, 1, incoming, 1, 1, ncclUint64, countsSeq), 1);
  queueCommJob(comm, call.stream, [x, outgoing] {
    const std::vector<size_t> sends = readCounts(*x, x->call.sendcounts);
    packedDispls(*x, sends, x->call.sendCapacity, "sendCapacity", true);
    x->blocks->comm->executor.backend->memory().copyIn(outgoing, sends.data(), sends.size() * sizeof(size_t));
  });
  submitLaunch(std::move(counts));
  queueCommJob(comm, call.stream, [x, outgoing, incoming] {
    const int me = x->blocks->comm->identity.rank;
    const size_t nr = size_t(x->blocks->comm->identity.nranks);
    std::vector<size_t> sends(nr), recvs(nr);
    kern::DeviceMemory& memory = x->blocks->comm->executor.backend->memory();
    memory.copyOut(sends.data(), outgoing, nr * sizeof(size_t));
    memory.copyOut(recvs.data(), incoming, nr * sizeof(size_t));
    for (size_t p = 0; p < nr; p++)
      if (recvs[p] > x->call.maxRecvCount)
        refuseCount(*x, int(p), me,
                    "(count " + std::to_string(recvs[p]) + ") is larger than maxRecvCount (" +
                        std::to_string(x->call.maxRecvCount) + " elements)");
    const std::vector<size_t> rdispls = packedDispls(*x, recvs, x->call.recvCapacity, "recvCapacity", false);
    memory.copyIn(x->call.foundCounts, recvs.data(), nr * sizeof(size_t));
    std::vector<size_t> sdispls(nr);
    for (size_t p = 1; p < nr; p++) sdispls[p] = sdispls[p - 1] + sends[p - 1];
    setBlocks(*x, sends.data(), sdispls.data(), recvs.data(), rdispls.data());
  });
  submitLaunch(x->blocks);
}

}  // namespace tutti
