// tuttiAllToAllvDevice and tuttiAllToAllvDynamic (tutti/tutti.h), the all-to-alls whose counts live
// in device memory (NCCLX's deviceAllToAllv and alltoallvDynamic): what the host knows is checked
// here (the buffers against the capacities given, the count arrays, the stream), and the call is
// carried by runtime/launch/alltoallv_device.h, which reads the counts in stream order.
#include <algorithm>
#include <limits>
#include <string>

#include "base/log.h"
#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/alltoallv_device.h"
#include "runtime/launch/group.h"

using namespace tutti;

namespace {

// A count array of one entry per rank: not NULL, and reachable. purpose: what it holds.
void checkCountArray(const DeviceCountAllToAllv& c, const size_t* counts, const char* name, const char* purpose) {
  const size_t nranks = size_t(c.comm->identity.nranks);
  if (counts == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(c.operation) + ": " + c.comm->where() + ": " + name +
                                                " is NULL (" + purpose + "one entry per rank, " +
                                                std::to_string(nranks) + ")");
  checkBuffer(c.operation, c.comm, counts, nranks, sizeof(size_t), name);
}

// What both forms check before anything is queued.
void checkCommon(const DeviceCountAllToAllv& c) {
  const size_t recvElems = c.recvCapacity;
  const char* op = c.operation;
  ncclComm* comm = c.comm;
  checkUsableComm(op, comm);
  log::setThreadDevice(comm->identity.device);
  checkType(op, comm, c.type);
  if (groupDepth() > 0)
    throw Error(ErrorCode::InvalidUsage, std::string(op) + ": " + comm->where() +
                                             ": called inside a group (ncclGroupStart): its counts are read only "
                                             "when it runs, so it cannot join a group's launch; calling it inside "
                                             "a group is not supported by tutti yet (call it outside the group)");
  if (!comm->executor.backend->readsArenaAtRun())
    throw Error(ErrorCode::InvalidUsage, std::string(op) + ": " + comm->where() +
                                             ": not supported by tutti yet on the " + comm->executor.backend->name() +
                                             " backend (its executor takes a launch's counts when it is queued)");
  checkCountArray(c, c.sendcounts, "sendcounts", "it needs ");
  if (c.sendbuff != nullptr && c.sendbuff == c.recvbuff)
    throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() +
                                                ": sendbuff and recvbuff are the same buffer; it runs out of place "
                                                "only (in place is not supported by tutti yet)");
  const size_t most = std::numeric_limits<size_t>::max() / kern::dtypeSize(c.type);
  if (c.sendCapacity > most || recvElems > most)
    throw Error(ErrorCode::InvalidArgument, std::string(op) + ": " + comm->where() + ": a capacity of " +
                                                std::to_string(std::max(c.sendCapacity, recvElems)) +
                                                " elements overflows the address space");
  checkBuffer(op, comm, c.sendbuff, c.sendCapacity, kern::dtypeSize(c.type), "sendbuff");
  checkBuffer(op, comm, c.recvbuff, recvElems, kern::dtypeSize(c.type), "recvbuff");
  checkStream(op, comm, c.stream);
}

void logCall(const DeviceCountAllToAllv& c) {
  TUTTI_INFO(log::Coll,
             "%s: opCount %llx sendbuff %p recvbuff %p sendCapacity %zu recvCapacity %zu maxRecvCount %zu datatype %d "
             "comm %p [nranks=%d] stream %p",
             c.operation, (unsigned long long)c.comm->executor.opSeq, c.sendbuff, c.recvbuff, c.sendCapacity,
             c.recvCapacity, c.maxRecvCount, int(c.type), static_cast<void*>(c.comm), c.comm->identity.nranks,
             static_cast<void*>(c.stream));
}

// The call's arguments both forms share.
DeviceCountAllToAllv callOf(const char* operation, const void* sendbuff, const size_t* sendcounts, size_t sendCapacity,
                            void* recvbuff, size_t recvCapacity, ncclDataType_t type, ncclComm_t comm,
                            cudaStream_t stream) {
  DeviceCountAllToAllv c;
  c.operation = operation;
  c.comm = comm;
  c.stream = stream;
  c.type = type;
  c.sendbuff = sendbuff;
  c.recvbuff = recvbuff;
  c.sendcounts = sendcounts;
  c.sendCapacity = sendCapacity;
  c.recvCapacity = recvCapacity;
  return c;
}

}  // namespace

TUTTI_API ncclResult_t tuttiAllToAllvDevice(const void* sendbuff, const size_t* sendcounts, size_t sendCapacity,
                                            void* recvbuff, const size_t* recvcounts, size_t recvCapacity,
                                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  constexpr const char* kOperation = "tuttiAllToAllvDevice";
  return guard(kOperation, [&] {
    checkComm(kOperation, comm);
    DeviceCountAllToAllv c =
        callOf(kOperation, sendbuff, sendcounts, sendCapacity, recvbuff, recvCapacity, datatype, comm, stream);
    c.recvcounts = recvcounts;
    checkCommon(c);
    checkCountArray(c, recvcounts, "recvcounts", "it needs ");
    logCall(c);
    enqueueDeviceCountAllToAllv(c);
  });
}

TUTTI_API ncclResult_t tuttiAllToAllvDynamic(const void* sendbuff, const size_t* sendcounts, size_t sendCapacity,
                                             void* recvbuff, size_t recvCapacity, size_t maxRecvCount,
                                             size_t* recvcounts, ncclDataType_t datatype, ncclComm_t comm,
                                             cudaStream_t stream) {
  constexpr const char* kOperation = "tuttiAllToAllvDynamic";
  return guard(kOperation, [&] {
    checkComm(kOperation, comm);
    DeviceCountAllToAllv c =
        callOf(kOperation, sendbuff, sendcounts, sendCapacity, recvbuff, recvCapacity, datatype, comm, stream);
    c.foundCounts = recvcounts;
    c.maxRecvCount = maxRecvCount;
    checkCommon(c);
    checkCountArray(c, recvcounts, "recvcounts", "the found counts are written there, ");
    logCall(c);
    enqueueDeviceCountAllToAllv(c);
  });
}
