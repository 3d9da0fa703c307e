// The NCCL net-plugin ABI, versions 6 to 12: the function tables a plugin library exports as
// ncclNetPlugin_v<N> and the property structs they fill, declared from the layouts of NVIDIA's
// published headers (ext-net of NCCL 2.28; src/include/plugin/net/net_v12.h of NCCL 2.30 for v12).
// Each version is frozen; tutti adapts all of them (plugin_net.h) and its own plugin
// (socket_plugin/) exports some (v10, and v6 and v12 for the tests). docs/net-plugins.md says what
// each call and field means and what tutti does with it.
//
// Only what a point-to-point net plugin needs is here: the collective-network tables
// (ncclCollNetPlugin_v<N>) and device offload are not used by tutti.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace tutti::transport::net::abi {

constexpr int kHandleMaxBytes = 128;                      // NCCL_NET_HANDLE_MAXSIZE
constexpr int kPtrHost = 0x1;                             // NCCL_PTR_HOST
constexpr int kPtrCuda = 0x2;                             // NCCL_PTR_CUDA
constexpr int kPtrDmaBuf = 0x4;                           // NCCL_PTR_DMABUF
constexpr int kMaxDevsPerNic = 4;                         // NCCL_NET_MAX_DEVS_PER_NIC (v9..v11)
constexpr int kMaxDevsPerNicV12 = 8;                      // NCCL_NET_MAX_DEVS_PER_NIC_V12
constexpr int kTrafficClassUndefined = -1;                // NCCL_NET_TRAFFIC_CLASS_UNDEF
constexpr size_t kMaxNetBytesBeforeV9 = size_t(1) << 30;  // MAX_NET_SIZE: what NCCL assumes of v6..v8
constexpr int kDeviceHost = 0;                            // ncclNetDeviceType NCCL_NET_DEVICE_HOST (no offload)

// ncclDebugLogger_t and ncclProfilerCallback_t. The log level is ncclDebugLogLevel (an int enum:
// NONE 0, VERSION 1, WARN 2, INFO 3, ABORT 4, TRACE 5); flags are NCCL_DEBUG_SUBSYS bits.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
using ProfilerCallback = ncclResult_t (*)(void** eventHandle, int type, void* parentHandle, int64_t pluginId,
                                          void* extraData);

// ncclNetDeviceHandle_v7..v11_t: passed by pointer only (device offload, never requested by tutti).
struct DeviceHandle {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct VirtualDeviceProps {  // ncclNetVDeviceProps_v9..v11_t
  int ndevs;
  int devs[kMaxDevsPerNic];
};

struct VirtualDevicePropsV12 {  // ncclNetVDeviceProps_v12_t
  int ndevs;
  int devs[kMaxDevsPerNicV12];
};

struct CommConfig {  // ncclNetCommConfig_v10/v11/v12_t
  int trafficClass;
};

// ---- Properties -------------------------------------------------------------------------------

struct PropertiesV6 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;  // kPtr* bits
  int speed;       // Mbps
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;  // receives one irecv may group
};

struct PropertiesV7 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;  // a registration is valid on every comm, not only the one it was made on
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

// v9 and v10 share this layout.
struct PropertiesV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;  // receives must be flushed even into host memory
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps vProps;
  size_t maxP2pBytes;  // the largest point-to-point message
  size_t maxCollBytes;
};
using PropertiesV10 = PropertiesV9;

struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

// v12: more devices per virtual NIC, and the NIC's rail and plane.
struct PropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VirtualDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

struct NetAttrV11;  // setNetAttr's argument (v11 and v12 alike): tutti never calls it

// ---- Function tables --------------------------------------------------------------------------
// Common to all: connect and accept may return a null comm, to be called again until it is not;
// isend and irecv may return a null request (cannot take one now); test reports done and size.

struct NetV6 {
  const char* name;
  ncclResult_t (*init)(Logger logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV6* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
};

// v7: device-offload handles in connect/accept, and two calls for offload.
struct NetV7 {
  const char* name;
  ncclResult_t (*init)(Logger logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV7* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
};

// v8: regMr takes a size_t.
struct NetV8 {
  const char* name;
  ncclResult_t (*init)(Logger logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV8* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
};

// v9: size_t message sizes, virtual devices.
struct NetV9 {
  const char* name;
  ncclResult_t (*init)(Logger logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VirtualDeviceProps* props);
};

// v10: a profiler callback at init, a comm config at connect, profiler handles on isend/irecv.
struct NetV10 {
  const char* name;
  ncclResult_t (*init)(Logger logFunction, ProfilerCallback profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV10* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VirtualDeviceProps* props);
};

// v11: a context per communicator (init per communicator, finalize), the config moves to init.
struct NetV11 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, CommConfig* config, Logger logFunction,
                       ProfilerCallback profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV11* props);
  ncclResult_t (*listen)(void* context, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* context, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VirtualDeviceProps* props);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*setNetAttr)(void* context, NetAttrV11* netAttr);
};

// v12 (NCCL 2.30): the calls of v11, over the v12 properties and virtual devices.
struct NetV12 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, CommConfig* config, Logger logFunction,
                       ProfilerCallback profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, PropertiesV12* props);
  ncclResult_t (*listen)(void* context, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* context, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VirtualDevicePropsV12* props);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*setNetAttr)(void* context, NetAttrV11* netAttr);
};

}  // namespace tutti::transport::net::abi
