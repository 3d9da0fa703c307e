// Entry points for errors, versions, memory, registration, user reduction ops and tutti's own
// extensions.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/tunables.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "kernels/host_reduce.h"
#include "kernels/host_stream.h"
#include "runtime/api/api.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_registry.h"
#include "runtime/comm/connection_setup.h"
#include "runtime/comm/peer_buffers.h"
#include "runtime/comm/topo_init.h"
#include "runtime/diagnostics/flight_recorder_dump.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/group.h"
#include "tutti/tutti.h"

using namespace tutti;

namespace tutti {
const char* lastError();
}

namespace {

// A registration (ncclCommRegister, ncclCommWindowRegister): in the cache, and, the first time
// the range is registered, offered to the host's peer processes to map (runtime/comm/peer_buffers.h).
void* registerBuffer(ncclComm* comm, void* buff, size_t size) {
  bool created = false;
  void* handle = comm->links.registrations.add(buff, size, &created);
  if (created && comm->links.peerBuffers) comm->links.peerBuffers->publish(handle, buff, size);
  return handle;
}

void deregisterBuffer(ncclComm* comm, void* handle, const std::string& where) {
  bool gone = false;
  comm->links.registrations.remove(handle, where, &gone);
  if (gone) comm->links.windows.remove(handle);
  if (gone && comm->links.peerBuffers) comm->links.peerBuffers->withdraw(handle);
}

}  // namespace

TUTTI_API const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the tutti developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}
TUTTI_NCCL_ALIAS(ncclGetErrorString)

TUTTI_API const char* pncclGetLastError(ncclComm_t comm) { return tutti::lastError(); }
TUTTI_NCCL_ALIAS(ncclGetLastError)

TUTTI_API ncclResult_t pncclGetVersion(int* version) {
  return guard("ncclGetVersion", [&] {
    if (version == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    TUTTI_INFO(log::Init, "ncclGetVersion: NCCL API %d, tutti %s", NCCL_VERSION_CODE, TUTTI_VERSION_STRING);
  });
}
TUTTI_NCCL_ALIAS(ncclGetVersion)

TUTTI_API void pncclResetDebugInit() { log::reset(); }
TUTTI_NCCL_ALIAS(ncclResetDebugInit)
TUTTI_API void ncclResetDebugInitInternal() { log::reset(); }

TUTTI_API ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  return guard("ncclMemAlloc", [&] {
    if (ptr == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return;
    // Where communicators made now would run (TUTTI_DEVICE), as NCCL gives device memory.
    *ptr = kern::allocateUserMemory(kern::chooseBackend("ncclMemAlloc"), size);
  });
}
TUTTI_NCCL_ALIAS(ncclMemAlloc)

TUTTI_API ncclResult_t pncclMemFree(void* ptr) {
  kern::freeUserMemory(ptr);
  return ncclSuccess;
}
TUTTI_NCCL_ALIAS(ncclMemFree)

TUTTI_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guard("ncclCommRegister", [&] {
    checkUsableComm("ncclCommRegister", comm);
    if (handle == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclCommRegister: handle is NULL");
    checkBuffer("ncclCommRegister", comm, buff, size, 1, "buff");
    *handle = registerBuffer(comm, buff, size);
  });
}
TUTTI_NCCL_ALIAS(ncclCommRegister)

TUTTI_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guard("ncclCommDeregister", [&] {
    checkComm("ncclCommDeregister", comm);
    deregisterBuffer(comm, handle, "ncclCommDeregister: " + comm->where());
  });
}
TUTTI_NCCL_ALIAS(ncclCommDeregister)

// A window is a registration (ncclCommRegister's cache, so collectives on it go zero-copy where
// registered buffers do), made collectively: every rank calls, and NCCL_WIN_COLL_SYMMETRIC windows
// must agree in size. The device-side API over windows (symmetric kernels, LSA pointers) is not
// offered.
TUTTI_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                               int winFlags) {
  return guard("ncclCommWindowRegister", [&] {
    checkUsableComm("ncclCommWindowRegister", comm);
    const std::string where = "ncclCommWindowRegister: " + comm->where();
    if (win == nullptr) throw Error(ErrorCode::InvalidArgument, where + ": win is NULL");
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC)
      throw Error(ErrorCode::InvalidArgument, where + ": winFlags " + std::to_string(winFlags) +
                                                  " is neither NCCL_WIN_DEFAULT (0) nor NCCL_WIN_COLL_SYMMETRIC (1)");
    checkBuffer("ncclCommWindowRegister", comm, buff, size, 1, "buff");
    // Each rank's flags, and its part of the window (where, how large) for one-sided operations;
    // the first registration also makes and maps the signal counters (runtime/comm/windows.h).
    struct Entry {
      int64_t flags;
      Windows::Offer part;
    };
    std::vector<Entry> all(size_t(comm->identity.nranks));
    Entry& mine = all[size_t(comm->identity.rank)];
    mine.flags = winFlags;
    mine.part.address = reinterpret_cast<uintptr_t>(buff);
    mine.part.bytes = size;
    const bool first = !comm->links.windows.ready();
    if (first) comm->links.windows.makeSignals(comm, &mine.part);
    comm->identity.bootstrap->allGather(all.data(), sizeof(Entry));
    WindowParts parts;
    std::vector<Windows::Offer> offers;
    for (const Entry& e : all) {
      parts.address.push_back(e.part.address);
      parts.bytes.push_back(e.part.bytes);
      offers.push_back(e.part);
    }
    if (first) comm->links.windows.mapSignals(comm, offers);
    for (int r = 0; r < comm->identity.nranks; r++) {
      const Entry& e = all[size_t(r)];
      const uint64_t eSize = e.part.bytes;
      if (e.flags != winFlags)
        throw Error(ErrorCode::InvalidUsage, where + " registers with winFlags " + std::to_string(winFlags) +
                                                 " where " + comm->describePeer(r) + " passed " +
                                                 std::to_string(e.flags) + " (every rank must pass the same)");
      if (winFlags == NCCL_WIN_COLL_SYMMETRIC && eSize != size)
        throw Error(ErrorCode::InvalidUsage, where + " registers a symmetric window of " + std::to_string(size) +
                                                 " bytes where " + comm->describePeer(r) + " registers " +
                                                 std::to_string(eSize) +
                                                 " (NCCL_WIN_COLL_SYMMETRIC windows are the same size on every rank)");
    }
    void* handle = registerBuffer(comm, buff, size);
    comm->links.windows.add(handle, std::move(parts));
    *win = reinterpret_cast<ncclWindow_t>(handle);
  });
}
TUTTI_NCCL_ALIAS(ncclCommWindowRegister)

TUTTI_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guard("ncclCommWindowDeregister", [&] {
    checkComm("ncclCommWindowDeregister", comm);
    if (win == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclCommWindowDeregister: " + comm->where() + ": win is NULL");
    deregisterBuffer(comm, win, "ncclCommWindowDeregister: " + comm->where());
  });
}
TUTTI_NCCL_ALIAS(ncclCommWindowDeregister)

TUTTI_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence, ncclComm_t comm) {
  return guard("ncclRedOpCreatePreMulSum", [&] {
    checkUsableComm("ncclRedOpCreatePreMulSum", comm);
    checkType("ncclRedOpCreatePreMulSum", comm, datatype);
    if (op == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclRedOpCreatePreMulSum: " + comm->where() + ": op is NULL");
    if (scalar == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclRedOpCreatePreMulSum: " + comm->where() + ": scalar is NULL");
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
      throw Error(ErrorCode::InvalidArgument, "ncclRedOpCreatePreMulSum: " + comm->where() +
                                                  ": unknown scalar residence " + std::to_string(int(residence)));
    UserRedOp user;
    user.live = true;
    user.type = datatype;
    user.residence = residence;
    if (residence == ncclScalarHostImmediate)
      std::memcpy(&user.hostValue, scalar, kern::dtypeSize(datatype));
    else
      user.pointer = scalar;  // host backend: "device" memory is host memory, read at each use
    std::lock_guard<std::mutex> lock(comm->redops.mutex);
    size_t slot = 0;
    while (slot < comm->redops.ops.size() && comm->redops.ops[slot].live) slot++;
    if (slot == comm->redops.ops.size()) {
      if (slot + ncclNumOps >= size_t(ncclMaxRedOp))
        throw Error(ErrorCode::InvalidUsage,
                    "ncclRedOpCreatePreMulSum: " + comm->where() + ": too many live reduction ops");
      comm->redops.ops.push_back(user);
    } else {
      comm->redops.ops[slot] = user;
    }
    *op = ncclRedOp_t(ncclNumOps + int(slot));
  });
}
TUTTI_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

TUTTI_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guard("ncclRedOpDestroy", [&] {
    checkComm("ncclRedOpDestroy", comm);
    if (int(op) < ncclNumOps)
      throw Error(ErrorCode::InvalidArgument, "ncclRedOpDestroy: " + comm->where() + ": op " + std::to_string(int(op)) +
                                                  " is a built-in reduction, not one from ncclRedOpCreatePreMulSum");
    std::lock_guard<std::mutex> lock(comm->redops.mutex);
    size_t slot = size_t(op) - ncclNumOps;
    if (slot >= comm->redops.ops.size() || !comm->redops.ops[slot].live)
      throw Error(ErrorCode::InvalidArgument, "ncclRedOpDestroy: " + comm->where() + ": op " + std::to_string(int(op)) +
                                                  " is not a live reduction op of this communicator");
    comm->redops.ops[slot].live = false;
  });
}
TUTTI_NCCL_ALIAS(ncclRedOpDestroy)

// ---- tutti extensions (tutti/tutti.h) ----

TUTTI_API ncclResult_t tuttiStreamCreate(cudaStream_t* stream) {
  return guard("tuttiStreamCreate", [&] {
    if (stream == nullptr) throw Error(ErrorCode::InvalidArgument, "tuttiStreamCreate: stream is NULL");
    *stream = (new kern::HostStream())->handle();
  });
}

TUTTI_API ncclResult_t tuttiStreamSynchronize(cudaStream_t stream) {
  return guard("tuttiStreamSynchronize", [&] {
    if (stream == nullptr) return;  // the NULL stream completes every call before it returns
    kern::HostStream* hs = kern::HostStream::fromHandle(stream);
    if (!hs) throw Error(ErrorCode::InvalidArgument, "tuttiStreamSynchronize: not a host stream");
    hs->synchronize();
  });
}

TUTTI_API ncclResult_t tuttiStreamQuery(cudaStream_t stream) {
  if (stream == nullptr) return ncclSuccess;
  kern::HostStream* hs = kern::HostStream::fromHandle(stream);
  if (!hs)
    return guard("tuttiStreamQuery",
                 [] { throw Error(ErrorCode::InvalidArgument, "tuttiStreamQuery: not a host stream"); });
  return hs->idle() ? ncclSuccess : ncclInProgress;
}

TUTTI_API ncclResult_t tuttiStreamDestroy(cudaStream_t stream) {
  return guard("tuttiStreamDestroy", [&] {
    kern::HostStream* hs = kern::HostStream::fromHandle(stream);
    if (!hs) throw Error(ErrorCode::InvalidArgument, "tuttiStreamDestroy: not a host stream");
    delete hs;
  });
}

TUTTI_API const char* tuttiVersionString(void) { return "tutti " TUTTI_VERSION_STRING " (NCCL 2.28.9 API)"; }

namespace {

// The task a tuttiCommAlgorithm / tuttiCommProtocol query describes, its arguments checked.
Task queriedTask(const char* operation, ncclComm_t comm, const char* collective, size_t count, ncclDataType_t type,
                 const void* out, size_t outBytes) {
  checkComm(operation, comm);
  if (collective == nullptr || out == nullptr || outBytes == 0)
    throw Error(ErrorCode::InvalidArgument,
                std::string(operation) + ": collective and name must not be NULL, nameBytes not 0");
  static const std::pair<const char*, plan::Coll> kinds[] = {{"allreduce", plan::Coll::AllReduce},
                                                             {"allgather", plan::Coll::AllGather},
                                                             {"reducescatter", plan::Coll::ReduceScatter},
                                                             {"broadcast", plan::Coll::Broadcast},
                                                             {"reduce", plan::Coll::Reduce},
                                                             {"alltoall", plan::Coll::AlltoAll},
                                                             {"gather", plan::Coll::Gather},
                                                             {"scatter", plan::Coll::Scatter},
                                                             {"send", plan::Coll::Send},
                                                             {"recv", plan::Coll::Recv}};
  const plan::Coll* kind = nullptr;
  for (auto& [text, k] : kinds)
    if (std::string(collective) == text) kind = &k;
  if (kind == nullptr)
    throw Error(
        ErrorCode::InvalidArgument,
        std::string(operation) + ": unknown collective \"" + collective +
            "\" (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, send, recv)");
  checkUsableComm(operation, comm);
  checkType(operation, comm, type);
  return Task{*kind, nullptr, nullptr, count, type, ncclSum, 0, comm, nullptr};
}

}  // namespace

TUTTI_API ncclResult_t tuttiCommAlgorithm(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t type,
                                          char* name, size_t nameBytes, int* nchannels) {
  return guard("tuttiCommAlgorithm", [&] {
    if (nchannels == nullptr) throw Error(ErrorCode::InvalidArgument, "tuttiCommAlgorithm: nchannels must not be NULL");
    Task task = queriedTask("tuttiCommAlgorithm", comm, collective, count, type, name, nameBytes);
    auto [algorithm, channels] = algorithmFor(task);
    std::snprintf(name, nameBytes, "%s", algorithm.c_str());
    *nchannels = channels;
  });
}

TUTTI_API ncclResult_t tuttiCommProtocol(ncclComm_t comm, const char* collective, size_t count, ncclDataType_t type,
                                         char* name, size_t nameBytes) {
  return guard("tuttiCommProtocol", [&] {
    Task task = queriedTask("tuttiCommProtocol", comm, collective, count, type, name, nameBytes);
    std::snprintf(name, nameBytes, "%s", protocolFor(comm, task).c_str());
  });
}

TUTTI_API ncclResult_t tuttiCommTransports(ncclComm_t comm, char* names, size_t nameBytes, int* nodes) {
  return guard("tuttiCommTransports", [&] {
    checkComm("tuttiCommTransports", comm);
    if (names == nullptr || nodes == nullptr)
      throw Error(ErrorCode::InvalidArgument, "tuttiCommTransports: names or nodes is NULL");
    std::string text = peerTransports(comm);
    if (text.size() + 1 > nameBytes)
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": tuttiCommTransports: \"" + text + "\" needs " +
                                                  std::to_string(text.size() + 1) + " bytes, the buffer has " +
                                                  std::to_string(nameBytes));
    std::memcpy(names, text.c_str(), text.size() + 1);
    *nodes = nodeCount(comm);
  });
}

namespace {

// The node of comm's topology that a tuttiCommNode* call names.
const topo::NodeSystem& topologyNode(const char* operation, const ncclComm* comm, int node) {
  checkComm(operation, comm);
  const std::vector<topo::NodeSystem>* nodes =
      comm->planning.topology ? &comm->planning.topology->system.nodes : nullptr;
  if (nodes == nullptr || node < 0 || size_t(node) >= nodes->size())
    throw Error(ErrorCode::InvalidArgument, comm->where() + ": " + operation + ": node " + std::to_string(node) +
                                                " is not one of the " + std::to_string(nodes ? nodes->size() : 0) +
                                                " of the communicator's topology");
  return (*nodes)[size_t(node)];
}

// The CPUs a <cpu affinity> mask holds: hex words, comma-separated as hwloc and NCCL write them.
int cpusInMask(const std::string& mask) {
  int count = 0;
  for (unsigned char c : mask)
    if (std::isxdigit(c)) count += __builtin_popcount(unsigned(std::isdigit(c) ? c - '0' : std::tolower(c) - 'a' + 10));
  return count;
}

}  // namespace

TUTTI_API ncclResult_t tuttiCommNodeTopology(ncclComm_t comm, int node, char* hostname, size_t hostnameBytes,
                                             int* ranks, int* numaNodes, int* cpus, int* gpus, int* nics) {
  return guard("tuttiCommNodeTopology", [&] {
    if (hostname == nullptr || hostnameBytes == 0 || ranks == nullptr || numaNodes == nullptr || cpus == nullptr ||
        gpus == nullptr || nics == nullptr)
      throw Error(ErrorCode::InvalidArgument, "tuttiCommNodeTopology: an output is NULL or hostnameBytes is 0");
    const topo::NodeSystem& system = topologyNode("tuttiCommNodeTopology", comm, node);
    std::snprintf(hostname, hostnameBytes, "%s", system.hostname.c_str());
    *ranks = 0;
    for (const topo::RankPlacement& placement : comm->planning.topology->system.ranks) *ranks += placement.node == node;
    std::vector<int> cpuNodes = system.graph.nodesOf(topo::NodeKind::Cpu);
    *numaNodes = int(cpuNodes.size());
    *cpus = 0;
    for (int cpu : cpuNodes) *cpus += cpusInMask(system.graph.node(cpu).attributeOr("affinity", ""));
    *gpus = int(system.graph.gpus().size());
    *nics = int(system.graph.nets().size());
  });
}

TUTTI_API ncclResult_t tuttiCommNodeNic(ncclComm_t comm, int node, int nic, char* name, size_t nameBytes,
                                        int* speedMbps) {
  return guard("tuttiCommNodeNic", [&] {
    if (name == nullptr || nameBytes == 0 || speedMbps == nullptr)
      throw Error(ErrorCode::InvalidArgument, "tuttiCommNodeNic: name or speedMbps is NULL, or nameBytes is 0");
    const topo::NodeSystem& system = topologyNode("tuttiCommNodeNic", comm, node);
    std::vector<int> nets = system.graph.nets();
    if (nic < 0 || size_t(nic) >= nets.size())
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": tuttiCommNodeNic: node " + std::to_string(node) +
                                                  " has " + std::to_string(nets.size()) + " NIC port(s), not a port " +
                                                  std::to_string(nic));
    const topo::Node& port = system.graph.node(nets[size_t(nic)]);
    std::snprintf(name, nameBytes, "%s", port.name.c_str());
    *speedMbps = std::atoi(port.attributeOr("speed", "0").c_str());
  });
}

TUTTI_API ncclResult_t tuttiCommDeviceBackend(ncclComm_t comm, const char** name) {
  return guard("tuttiCommDeviceBackend", [&] {
    checkComm("tuttiCommDeviceBackend", comm);
    if (name == nullptr) throw Error(ErrorCode::InvalidArgument, "tuttiCommDeviceBackend: name is NULL");
    *name = kern::registeredName(comm->identity.backendName);  // static, as tutti.h promises
  });
}

TUTTI_API ncclResult_t tuttiCommDescribeWait(ncclComm_t comm, char* text, size_t textBytes) {
  return guard("tuttiCommDescribeWait", [&] {
    if (text == nullptr || textBytes == 0)
      throw Error(ErrorCode::InvalidArgument, "tuttiCommDescribeWait: text is NULL or textBytes is 0");
    text[0] = '\0';
    // Any live communicator, a failed one too: a watchdog asks just before it aborts.
    checkComm("tuttiCommDescribeWait", comm);
    std::string lines = comm->describeWaits();
    if (lines.size() + 1 > textBytes)
      throw Error(ErrorCode::InvalidArgument, comm->where() + ": tuttiCommDescribeWait: the description needs " +
                                                  std::to_string(lines.size() + 1) + " bytes, the buffer has " +
                                                  std::to_string(textBytes));
    std::memcpy(text, lines.c_str(), lines.size() + 1);
  });
}

TUTTI_API ncclResult_t tuttiCommZeroCopyReads(ncclComm_t comm, uint64_t* messages) {
  return guard("tuttiCommZeroCopyReads", [&] {
    if (messages == nullptr) throw Error(ErrorCode::InvalidArgument, "tuttiCommZeroCopyReads: messages is NULL");
    checkComm("tuttiCommZeroCopyReads", comm);
    *messages =
        comm->executor.directReads.load() + (comm->executor.backend ? comm->executor.backend->directReads() : 0);
  });
}

TUTTI_API ncclResult_t tuttiCommDump(ncclComm_t comm, const char* path) {
  return guard("tuttiCommDump", [&] {
    // Any live communicator, a failed one too: its record says what led there.
    checkComm("tuttiCommDump", comm);
    std::string where = path != nullptr ? path : tunables::kFlightRecorder.get();
    if (where.empty())
      throw Error(ErrorCode::InvalidArgument,
                  comm->where() + ": tuttiCommDump: path is NULL and TUTTI_FLIGHT_RECORDER is not set");
    writeFlightRecord(comm, where, "request");
  });
}
