// The function table the stand-in exports, ncclNetPlugin_v<STRICT_PLUGIN_VERSION> (6 to 12, one
// per build of the library), each call adapted to the version-neutral calls of strict_plugin.h.
#include <type_traits>

#include "tests/net_plugin_standin/strict_plugin.h"
#include "transports/net/plugin/net_plugin_abi.h"

#ifndef STRICT_PLUGIN_VERSION
#define STRICT_PLUGIN_VERSION 8
#endif
#if STRICT_PLUGIN_VERSION < 6 || STRICT_PLUGIN_VERSION > 12
#error "STRICT_PLUGIN_VERSION must be 6 to 12"
#endif
#define STRICT_JOIN(a, b) a##b
#define STRICT_TABLE_TYPE(v) STRICT_JOIN(NetV, v)
#define STRICT_PROPS_TYPE(v) STRICT_JOIN(PropertiesV, v)
#define STRICT_SYMBOL(v) STRICT_JOIN(ncclNetPlugin_v, v)

namespace {

namespace abi = tutti::transport::net::abi;
constexpr int V = STRICT_PLUGIN_VERSION;
using Table = abi::STRICT_TABLE_TYPE(STRICT_PLUGIN_VERSION);
using Props = abi::STRICT_PROPS_TYPE(STRICT_PLUGIN_VERSION);
using MessageSize = std::conditional_t<(V >= 9), size_t, int>;
using RegistrationSize = std::conditional_t<(V >= 8), size_t, int>;

template <typename T>
bool negative(T value) {
  if constexpr (std::is_signed_v<T>)
    return value < 0;
  else
    return false;
}

ncclResult_t getProperties(int dev, Props* props) {
  if (props == nullptr) return strict::misuse(ncclInvalidArgument, "getProperties", "props is NULL");
  strict::Properties p{};
  ncclResult_t result = strict::properties(dev, &p);
  if (result != ncclSuccess) return result;
  *props = Props{};
  props->name = const_cast<char*>(p.name);
  props->pciPath = nullptr;  // a virtual NIC: no PCI place
  props->guid = p.guid;
  props->ptrSupport = strict::kPtrHost;
  props->speed = p.speed;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = p.maxRecvs;
#if STRICT_PLUGIN_VERSION >= 7
  props->netDeviceType = abi::kDeviceHost;
#endif
#if STRICT_PLUGIN_VERSION >= 8
  props->regIsGlobal = 0;  // a registration holds only on the comm it was made on
#endif
#if STRICT_PLUGIN_VERSION >= 9
  props->forceFlush = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = p.maxBytes;
  props->maxCollBytes = p.maxBytes;
#endif
#if STRICT_PLUGIN_VERSION >= 11
  props->maxMultiRequestSize = 1;
#endif
#if STRICT_PLUGIN_VERSION >= 12
  props->railId = int16_t(dev);  // one NIC per rail, none split into planes
  props->planeId = 0;
#endif
  return ncclSuccess;
}

ncclResult_t regMr(void* comm, void* data, RegistrationSize size, int type, void** mhandle) {
  if (negative(size)) return strict::misuse(ncclInvalidArgument, "regMr", "negative size %lld", (long long)size);
  return strict::regMr(comm, data, size_t(size), type, mhandle);
}

ncclResult_t isendSized(void* sendComm, void* data, MessageSize size, int tag, void* mhandle, void** request) {
  if (negative(size)) return strict::misuse(ncclInvalidArgument, "isend", "negative size %lld", (long long)size);
  return strict::isend(sendComm, data, size_t(size), tag, mhandle, request);
}

ncclResult_t irecvSized(void* recvComm, int n, void** data, MessageSize* sizes, int* tags, void** mhandles,
                        void** request) {
  if (n < 1 || n > strict::kMaxRecvsLimit || data == nullptr || sizes == nullptr || tags == nullptr ||
      mhandles == nullptr)
    return strict::misuse(ncclInvalidUsage, "irecv", "%d buffers (or a NULL array): at most %d are ever taken", n,
                          strict::kMaxRecvsLimit);
  size_t wide[strict::kMaxRecvsLimit];
  for (int i = 0; i < n; i++) {
    if (negative(sizes[i])) return strict::misuse(ncclInvalidArgument, "irecv", "buffer %d has a negative size", i);
    wide[i] = size_t(sizes[i]);
  }
  return strict::irecv(recvComm, n, data, wide, tags, mhandles, request);
}

ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  if (request == nullptr) return strict::misuse(ncclInvalidArgument, "iflush", "request is NULL");
  return strict::iflush(recvComm, n, data, sizes, mhandles, request);
}

// No device offload: whatever handle the caller offers stays empty.
void noOffload(abi::DeviceHandle** device) {
  if (device) *device = nullptr;
}

// The version's differences are chosen by the preprocessor: each build compiles one table shape.
Table makeTable() {
  Table t{};
  t.name = "Strict";
#if STRICT_PLUGIN_VERSION >= 11
  t.init = [](void** context, uint64_t, abi::CommConfig*, abi::Logger log, abi::ProfilerCallback) {
    return strict::init(true, log, context);
  };
  t.listen = strict::listen;
  t.connect = [](void* context, int dev, void* handle, void** send, abi::DeviceHandle** device) {
    noOffload(device);
    return strict::connect(context, dev, handle, send);
  };
#else
#if STRICT_PLUGIN_VERSION == 10
  t.init = [](abi::Logger log, abi::ProfilerCallback) { return strict::init(false, log, nullptr); };
  t.connect = [](int dev, abi::CommConfig*, void* handle, void** send, abi::DeviceHandle** device) {
    noOffload(device);
    return strict::connect(nullptr, dev, handle, send);
  };
#elif STRICT_PLUGIN_VERSION >= 7
  t.init = [](abi::Logger log) { return strict::init(false, log, nullptr); };
  t.connect = [](int dev, void* handle, void** send, abi::DeviceHandle** device) {
    noOffload(device);
    return strict::connect(nullptr, dev, handle, send);
  };
#else
  t.init = [](abi::Logger log) { return strict::init(false, log, nullptr); };
  t.connect = [](int dev, void* handle, void** send) { return strict::connect(nullptr, dev, handle, send); };
#endif
  t.listen = [](int dev, void* handle, void** listen) { return strict::listen(nullptr, dev, handle, listen); };
#endif
  t.devices = strict::devices;
  t.getProperties = getProperties;
#if STRICT_PLUGIN_VERSION >= 7
  t.accept = [](void* listen, void** recv, abi::DeviceHandle** device) {
    noOffload(device);
    return strict::accept(listen, recv);
  };
#else
  t.accept = strict::accept;
#endif
  t.regMr = regMr;
  t.regMrDmaBuf = strict::regMrDmaBuf;
  t.deregMr = strict::deregMr;
#if STRICT_PLUGIN_VERSION >= 10
  t.isend = [](void* send, void* data, size_t size, int tag, void* mhandle, void*, void** request) {
    return isendSized(send, data, size, tag, mhandle, request);
  };
  t.irecv = [](void* recv, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**, void** request) {
    return irecvSized(recv, n, data, sizes, tags, mhandles, request);
  };
#else
  t.isend = isendSized;
  t.irecv = irecvSized;
#endif
  t.iflush = iflush;
  t.test = strict::test;
  t.closeSend = strict::closeSend;
  t.closeRecv = strict::closeRecv;
  t.closeListen = strict::closeListen;
#if STRICT_PLUGIN_VERSION >= 7
  t.getDeviceMr = [](void*, void*, void**) { return strict::unsupported("getDeviceMr"); };
  t.irecvConsumed = [](void*, int, void*) { return strict::unsupported("irecvConsumed"); };
#endif
#if STRICT_PLUGIN_VERSION >= 12
  t.makeVDevice = [](int*, abi::VirtualDevicePropsV12*) { return strict::unsupported("makeVDevice"); };
#elif STRICT_PLUGIN_VERSION >= 9
  t.makeVDevice = [](int*, abi::VirtualDeviceProps*) { return strict::unsupported("makeVDevice"); };
#endif
#if STRICT_PLUGIN_VERSION >= 11
  t.finalize = strict::finalize;
  t.setNetAttr = [](void*, abi::NetAttrV11*) { return ncclSuccess; };  // traffic classes are not modelled
#endif
  return t;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) Table STRICT_SYMBOL(STRICT_PLUGIN_VERSION) = makeTable();
}
