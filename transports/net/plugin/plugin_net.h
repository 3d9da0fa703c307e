// One external net plugin's function table, whichever interface version (6 to 12) it exports,
// behind one set of calls in the newest shape: the version adapters (plugin_net.cpp) widen sizes,
// add the arguments older tables lack and map properties, as NCCL's own compatibility layer does.
#pragma once

#include <memory>
#include <string>

#include "nccl.h"
#include "transports/net/net.h"

namespace tutti::transport::net {

class PluginNet {
 public:
  virtual ~PluginNet() = default;
  // The name the plugin gives itself (what NCCL_NET selects), and the interface version in use.
  virtual const char* name() const = 0;
  virtual int version() const = 0;

  // v11 and v12 initialise once per backend (a context per communicator, finalize ends it); older
  // versions initialise once per process (later calls return the first result) and finalize does
  // nothing, since they have no way to end.
  virtual ncclResult_t init(void** context) = 0;
  virtual ncclResult_t finalize(void* context) = 0;
  virtual ncclResult_t devices(int* count) = 0;
  // The device's properties in tutti's terms; sizes older versions cannot state are NCCL's defaults.
  virtual ncclResult_t properties(int device, NetProperties* out) = 0;
  virtual ncclResult_t listen(void* context, int device, void* handle, void** listenComm) = 0;
  // May leave *comm null: call again (the connection is still being made).
  virtual ncclResult_t connect(void* context, int device, void* handle, void** sendComm) = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t bytes, int pointerType, void** mhandle) = 0;
  // Device memory by its dmabuf descriptor: [data, data + bytes) starts `offset` bytes into `fd`.
  // Every version from v6 has the call; hasDmaBufCalls() says whether the table fills it (and iflush).
  virtual ncclResult_t regMrDmaBuf(void* comm, void* data, size_t bytes, int pointerType, uint64_t offset, int fd,
                                   void** mhandle) = 0;
  virtual bool hasDmaBufCalls() const = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  // One message each; may leave *request null (no request can be taken now).
  virtual ncclResult_t isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle, void** request) = 0;
  virtual ncclResult_t irecv(void* recvComm, void* data, size_t capacity, int tag, void* mhandle, void** request) = 0;
  // Starts making one received message in device memory visible to the GPU; may leave *request
  // null (the plugin has nothing to do), else test() completes it.
  virtual ncclResult_t iflush(void* recvComm, void* data, size_t bytes, void* mhandle, void** request) = 0;
  // *bytes: what was sent, or what arrived (at most the posted capacity).
  virtual ncclResult_t test(void* request, int* done, int* bytes) = 0;
  virtual ncclResult_t closeSend(void* sendComm) = 0;
  virtual ncclResult_t closeRecv(void* recvComm) = 0;
  virtual ncclResult_t closeListen(void* listenComm) = 0;
};

// The adapter for the newest table `library` (a dlopen handle) exports, trying ncclNetPlugin_v12
// down to ncclNetPlugin_v6; nullptr when it exports none of them.
std::unique_ptr<PluginNet> findPluginNet(void* library);

// "ncclSystemError" and so on, for messages.
const char* pluginResultName(ncclResult_t result);

}  // namespace tutti::transport::net
