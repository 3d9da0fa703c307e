// Entry points of the collectives, point-to-point calls and groups.
#include <limits>

#include "base/log.h"
#include "kernels/host_reduce.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/group.h"

using namespace tutti;

namespace {

ncclResult_t submit(const char* operation, plan::Coll kind, const void* in, void* out, size_t count,
                    ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return guard(operation, [&] {
    checkUsableComm(operation, comm);
    log::setThreadDevice(comm->identity.device);
    checkType(operation, comm, type);
    bool reducing = kind == plan::Coll::AllReduce || kind == plan::Coll::ReduceScatter || kind == plan::Coll::Reduce;
    if (reducing) checkOp(operation, comm, op, type);
    bool rooted = kind == plan::Coll::Broadcast || kind == plan::Coll::Reduce || kind == plan::Coll::Gather ||
                  kind == plan::Coll::Scatter;
    if (rooted) checkRank(operation, comm, root, "root");
    if (kind == plan::Coll::Send || kind == plan::Coll::Recv) checkRank(operation, comm, root, "peer");
    if (count > std::numeric_limits<size_t>::max() / kern::dtypeSize(type) / size_t(comm->identity.nranks))
      throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + comm->where() + ": count " +
                                                  std::to_string(count) + " overflows the address space");
    BufferUse use = bufferUse(kind, count, comm->identity.nranks, root == comm->identity.rank);
    if (use.readsIn) checkBuffer(operation, comm, in, use.inCount, kern::dtypeSize(type), "sendbuff");
    if (use.writesOut) checkBuffer(operation, comm, out, use.outCount, kern::dtypeSize(type), "recvbuff");
    checkStream(operation, comm, stream);
    TUTTI_INFO(
        log::Coll,
        "%s: opCount %llx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p",
        operation, (unsigned long long)comm->executor.opSeq, in, static_cast<void*>(out), count, int(type), int(op),
        root, static_cast<void*>(comm), comm->identity.nranks, static_cast<void*>(stream));
    enqueueTask(
        Task{kind, use.readsIn ? in : nullptr, use.writesOut ? out : nullptr, count, type, op, root, comm, stream});
  });
}

}  // namespace

TUTTI_API ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclAllReduce", plan::Coll::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclAllReduce)

TUTTI_API ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclAllGather", plan::Coll::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                stream);
}
TUTTI_NCCL_ALIAS(ncclAllGather)

TUTTI_API ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
  return submit("ncclReduceScatter", plan::Coll::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                stream);
}
TUTTI_NCCL_ALIAS(ncclReduceScatter)

TUTTI_API ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclBroadcast", plan::Coll::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                stream);
}
TUTTI_NCCL_ALIAS(ncclBroadcast)

TUTTI_API ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  return submit("ncclBcast", plan::Coll::Broadcast, buff, buff, count, datatype, ncclSum, root, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclBcast)

TUTTI_API ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclReduce", plan::Coll::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclReduce)

TUTTI_API ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclAlltoAll", plan::Coll::AlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclAlltoAll)

TUTTI_API ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                   int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclGather", plan::Coll::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclGather)

TUTTI_API ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return submit("ncclScatter", plan::Coll::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclScatter)

TUTTI_API ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  return submit("ncclSend", plan::Coll::Send, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclSend)

TUTTI_API ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  return submit("ncclRecv", plan::Coll::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}
TUTTI_NCCL_ALIAS(ncclRecv)

TUTTI_API ncclResult_t pncclGroupStart() {
  return guard("ncclGroupStart", [] { groupStart(); });
}
TUTTI_NCCL_ALIAS(ncclGroupStart)

TUTTI_API ncclResult_t pncclGroupEnd() {
  return guard("ncclGroupEnd", [] { groupEnd(); });
}
TUTTI_NCCL_ALIAS(ncclGroupEnd)

TUTTI_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guard("ncclGroupSimulateEnd", [simInfo] {
    if (simInfo == nullptr || simInfo->magic != 0x74685283u || simInfo->size < sizeof(ncclSimInfo_t)) {
      // The group still ends, so the caller's group state stays sane.
      groupRecordError(ncclInvalidArgument);
      try {
        groupEnd();
      } catch (const Error&) {
      }
      throw Error(ErrorCode::InvalidArgument,
                  "ncclGroupSimulateEnd: simInfo is null or not initialised with "
                  "NCCL_SIM_INFO_INITIALIZER; the group's operations were dropped");
    }
    simInfo->estimatedTime = float(groupSimulateEnd());
  });
}
TUTTI_NCCL_ALIAS(ncclGroupSimulateEnd)
