// tutti's Socket backend as an external NCCL net plugin: libnccl-net-tutti.so exports
// ncclNetPlugin_v10 named "TuttiSocket". Built again with TUTTI_SOCKET_PLUGIN_VERSION=6 or 12 (test
// libraries exporting only ncclNetPlugin_v6, "TuttiSocketV6", or only ncclNetPlugin_v12,
// "TuttiSocketV12") to show that older and newer plugins load, and with TUTTI_PLUGIN_BACKEND_IB=1
// over the IB backend instead (test libraries, "TuttiIB" and the v6 "TuttiIBV6", whose devices
// take device memory by dmabuf where the verbs library can: the adapter's regMrDmaBuf and iflush
// path, tested on the verbs stand-in).
//
// A C-ABI shim over a backend: comms are the backend's comms, a request remembers its comm (test()
// gets only the request), a memory handle is the backend's registration. What it declares and
// keeps to: host memory, and device memory by dmabuf only where the backend's properties report
// dmaBuf (Socket's never do: NCCL_PTR_HOST alone); one receive per irecv (maxRecvs 1), messages up
// to 1 GiB (test reports sizes as int). accept returns at once, with a null comm until the peer is
// in; connect completes in its first call (a Socket or IB connect needs only the listener, which
// exists before its handle is handed out), bounded by TUTTI_TIMEOUT. iflush runs the backend's
// flush before it returns (a request that the next test reports done).
//
// Two knobs make it behave as stricter plugins do, for the tests (read when a comm is made, so a
// test sets them per connection): TUTTI_SOCKET_PLUGIN_NO_SIZES=1, test() leaves the sizes unwritten
// (as google/nccl-fastsocket does; NCCL does not rely on them); TUTTI_SOCKET_PLUGIN_NO_GOODBYE=1,
// closeSend closes without the Socket backend's goodbye (as every plugin but this one does). One
// more for latency measurements: TUTTI_SOCKET_PLUGIN_COMPLETION_LAG_US=N, test() reports a request
// done only N us after the backend finished it (as a plugin whose own threads complete requests).
// And TUTTI_SOCKET_PLUGIN_MAX_COMMS=N declares maxComms N (read by getProperties).
//
// Its copy of tutti's base layer is private to the library (hidden symbols); its log lines go to
// the logger the host hands init, so they land in the host's log (and NCCL_DEBUG_FILE).
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"
#include "transports/net/plugin/net_plugin_abi.h"

#ifndef TUTTI_SOCKET_PLUGIN_VERSION
#define TUTTI_SOCKET_PLUGIN_VERSION 10
#endif

#if TUTTI_PLUGIN_BACKEND_IB
#include <atomic>

#include "transports/net/ib/ib_backend.h"
#if TUTTI_SOCKET_PLUGIN_VERSION == 6
#define TUTTI_PLUGIN_NAME "TuttiIBV6"
#elif TUTTI_SOCKET_PLUGIN_VERSION == 12
#define TUTTI_PLUGIN_NAME "TuttiIBV12"
#else
#define TUTTI_PLUGIN_NAME "TuttiIB"
#endif
#else
#include "transports/net/socket/socket_backend.h"
#if TUTTI_SOCKET_PLUGIN_VERSION == 6
#define TUTTI_PLUGIN_NAME "TuttiSocketV6"
#elif TUTTI_SOCKET_PLUGIN_VERSION == 12
#define TUTTI_PLUGIN_NAME "TuttiSocketV12"
#else
#define TUTTI_PLUGIN_NAME "TuttiSocket"
#endif
#endif

namespace tutti::transport::net {
namespace {

constexpr size_t kMaxMessageBytes = abi::kMaxNetBytesBeforeV9;

#if TUTTI_PLUGIN_BACKEND_IB
std::unique_ptr<NetBackend> makeBackend() { return makeIbBackend(); }
// What the tests count: the calls that registered device memory, and the flushes run.
std::atomic<uint64_t> dmaBufRegistrations{0}, flushes{0};
void counted(std::atomic<uint64_t>& counter) { counter.fetch_add(1); }
#else
std::unique_ptr<NetBackend> makeBackend() { return makeSocketBackend(); }
struct NoCounter {};
NoCounter dmaBufRegistrations, flushes;
void counted(NoCounter&) {}
#endif

// The backend and what getProperties hands out (its strings must outlive the call).
struct PluginState {
  std::unique_ptr<NetBackend> backend;
  std::vector<NetProperties> properties;
};
// Made by the first init, kept for the process (before v11 the ABI has no way to end a plugin).
PluginState* state = nullptr;
std::mutex stateMutex;
abi::Logger hostLogger = nullptr;  // set once, by the first init

void toHostLogger(log::Level level, uint64_t subsys, const char* file, int line, const char* message) {
  hostLogger(int(level), (unsigned long)subsys, file, line, "%s", message);
}

struct Comm;

struct Request {
  Comm* comm;
  NetRequest* request;  // null: an iflush, done when made (or a request the backend finished)
  size_t bytes = 0;     // what the backend reported, once it finished
  std::chrono::steady_clock::time_point reportAt{};  // with a completion lag: when test() may say done
};

// A send or receive comm, and its requests not yet reported done (freed with it if it closes
// before they are: a host that gives up on a connection closes it with requests in flight).
struct Comm {
  std::unique_ptr<NetSendComm> send;
  std::unique_ptr<NetRecvComm> recv;
  std::vector<std::unique_ptr<Request>> requests;
  // The strictness knobs (see the top), as they were when the comm was made.
  bool writesSizes = !knob("TUTTI_SOCKET_PLUGIN_NO_SIZES");
  bool saysGoodbye = !knob("TUTTI_SOCKET_PLUGIN_NO_GOODBYE");
  std::chrono::microseconds completionLag{number("TUTTI_SOCKET_PLUGIN_COMPLETION_LAG_US")};

  static bool knob(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && std::strcmp(value, "1") == 0;
  }
  static long number(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? std::max(0L, std::atol(value)) : 0L;
  }

  void* add(NetRequest* r) {
    if (r == nullptr) return nullptr;
    requests.push_back(std::make_unique<Request>(Request{this, r}));
    return requests.back().get();
  }
  void remove(Request* r) {
    for (auto& q : requests)
      if (q.get() == r) {
        q = std::move(requests.back());
        requests.pop_back();
        return;
      }
  }
};

ncclResult_t resultOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::Remote:
    case ErrorCode::Timeout: return ncclRemoteError;
    case ErrorCode::System:
    case ErrorCode::Aborted: return ncclSystemError;
    case ErrorCode::InvalidArgument: return ncclInvalidArgument;
    case ErrorCode::InvalidUsage: return ncclInvalidUsage;
    default: return ncclInternalError;
  }
}

// Runs one call of the ABI: no exception crosses it; a failure is logged and returned as a result.
template <typename Body>
ncclResult_t guarded(const char* call, Body body) {
  try {
    body();
    return ncclSuccess;
  } catch (const Error& e) {
    TUTTI_WARN("NET/" TUTTI_PLUGIN_NAME ": %s: %s", call, e.what());
    return resultOf(e.code());
  } catch (const std::exception& e) {
    TUTTI_WARN("NET/" TUTTI_PLUGIN_NAME ": %s: %s", call, e.what());
    return ncclInternalError;
  }
}

NetBackend& backend() {
  if (state == nullptr) throw Error(ErrorCode::InvalidUsage, "the plugin was used before init");
  return *state->backend;
}

const NetProperties& propertiesOf(int device) {
  if (state == nullptr || device < 0 || size_t(device) >= state->properties.size())
    throw Error(ErrorCode::InvalidArgument, "no device " + std::to_string(device));
  return state->properties[size_t(device)];
}

SteadyTime setupDeadline() { return deadlineAfter(double(tunables::kTimeout.get())); }

ncclResult_t pluginInit(abi::Logger logger) {
  return guarded("init", [&] {
    std::lock_guard<std::mutex> lock(stateMutex);
    if (state != nullptr) return;
    if (logger != nullptr && hostLogger == nullptr) {
      hostLogger = logger;
      log::redirect(toHostLogger);
    }
    auto fresh = std::make_unique<PluginState>();
    fresh->backend = makeBackend();
    for (int d = 0; d < fresh->backend->deviceCount(); d++) fresh->properties.push_back(fresh->backend->properties(d));
    state = fresh.release();
  });
}

ncclResult_t pluginDevices(int* count) {
  return guarded("devices", [&] { *count = backend().deviceCount(); });
}

// The fields every version has.
template <typename Props>
void fillCommonProperties(int device, Props* props) {
  const NetProperties& p = propertiesOf(device);
  props->name = const_cast<char*>(p.name.c_str());
  props->pciPath = const_cast<char*>(p.pciPath.c_str());
  props->guid = p.guid;
  props->ptrSupport = abi::kPtrHost | (p.dmaBuf ? abi::kPtrCuda | abi::kPtrDmaBuf : 0);
  props->speed = p.speedMbps;
  props->port = p.port;
  props->latency = p.latencyUs;
  // TUTTI_SOCKET_PLUGIN_MAX_COMMS (tests): a smaller limit than the backend's, to be held to.
  const long maxComms = Comm::number("TUTTI_SOCKET_PLUGIN_MAX_COMMS");
  props->maxComms = maxComms > 0 ? int(std::min(maxComms, long(p.maxComms))) : p.maxComms;
  props->maxRecvs = 1;
}

ncclResult_t pluginListen(int device, void* handle, void** listenComm) {
  return guarded("listen", [&] {
    propertiesOf(device);
    NetHandle h{};
    auto listener = backend().listen(device, &h);
    std::memcpy(handle, h.bytes, size_t(abi::kHandleMaxBytes));
    *listenComm = listener.release();
  });
}

ncclResult_t pluginConnect(int device, void* handle, void** sendComm) {
  return guarded("connect", [&] {
    NetHandle h{};
    std::memcpy(h.bytes, handle, size_t(abi::kHandleMaxBytes));
    auto comm = std::make_unique<Comm>();
    comm->send = backend().connect(device, h, setupDeadline(), nullptr);
    *sendComm = comm.release();
  });
}

// Returns at once: a null comm until the connector's sockets are all in (NCCL calls again).
ncclResult_t pluginAccept(void* listenComm, void** recvComm) {
  return guarded("accept", [&] {
    *recvComm = nullptr;
    std::unique_ptr<NetRecvComm> recv = static_cast<NetListenComm*>(listenComm)->acceptIfReady();
    if (!recv) return;
    auto comm = std::make_unique<Comm>();
    comm->recv = std::move(recv);
    *recvComm = comm.release();
  });
}

ncclResult_t pluginRegMr(void* comm, void* data, size_t bytes, int type, void** mhandle) {
  return guarded("regMr", [&] {
    if (type != abi::kPtrHost)
      throw Error(ErrorCode::InvalidArgument, "only host memory (NCCL_PTR_HOST) can be registered");
    Comm* c = static_cast<Comm*>(comm);
    MemoryRegistration r = c->send ? c->send->registerMemory(data, bytes) : c->recv->registerMemory(data, bytes);
    *mhandle = new MemoryRegistration(r);
  });
}

// Device memory (NCCL_PTR_CUDA) by its dmabuf: the backend's registerDmaBuf, which refuses where
// its properties report no dmaBuf (Socket's always).
ncclResult_t pluginRegMrDmaBuf(void* comm, void* data, size_t bytes, int type, uint64_t offset, int fd,
                               void** mhandle) {
  return guarded("regMrDmaBuf", [&] {
    if (type != abi::kPtrCuda)
      throw Error(ErrorCode::InvalidArgument,
                  "regMrDmaBuf takes device memory (NCCL_PTR_CUDA), not type " + std::to_string(type));
    Comm* c = static_cast<Comm*>(comm);
    MemoryRegistration r =
        c->send ? c->send->registerDmaBuf(data, bytes, fd, offset) : c->recv->registerDmaBuf(data, bytes, fd, offset);
    *mhandle = new MemoryRegistration(r);
    counted(dmaBufRegistrations);
  });
}

ncclResult_t pluginDeregMr(void* comm, void* mhandle) {
  return guarded("deregMr", [&] {
    std::unique_ptr<MemoryRegistration> r(static_cast<MemoryRegistration*>(mhandle));
    Comm* c = static_cast<Comm*>(comm);
    if (c->send) c->send->deregisterMemory(*r);
    if (c->recv) c->recv->deregisterMemory(*r);
  });
}

MemoryRegistration registrationOf(void* mhandle) {
  return mhandle ? *static_cast<MemoryRegistration*>(mhandle) : MemoryRegistration{};
}

ncclResult_t pluginIsend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle, void** request) {
  return guarded("isend", [&] {
    *request = nullptr;
    if (bytes > kMaxMessageBytes)
      throw Error(ErrorCode::InvalidArgument, "a message of " + std::to_string(bytes) + " bytes exceeds 1 GiB");
    Comm* c = static_cast<Comm*>(sendComm);
    *request = c->add(c->send->isend(data, bytes, tag, registrationOf(mhandle)));
  });
}

template <typename Size>
ncclResult_t pluginIrecv(void* recvComm, int n, void** data, Size* sizes, int* tags, void** mhandles, void** request) {
  return guarded("irecv", [&] {
    *request = nullptr;
    if (n != 1)
      throw Error(ErrorCode::InvalidArgument,
                  "irecv of " + std::to_string(n) + " messages; the plugin declares maxRecvs 1");
    Comm* c = static_cast<Comm*>(recvComm);
    *request = c->add(c->recv->irecv(data[0], size_t(sizes[0]), tags[0], registrationOf(mhandles[0])));
  });
}

// The backend's flush of one receive (nothing for host memory), run before returning: the request
// only reports it done.
ncclResult_t pluginIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  return guarded("iflush", [&] {
    *request = nullptr;
    if (n != 1)
      throw Error(ErrorCode::InvalidArgument,
                  "iflush of " + std::to_string(n) + " messages; the plugin declares maxRecvs 1");
    Comm* c = static_cast<Comm*>(recvComm);
    if (!c->recv) throw Error(ErrorCode::InvalidArgument, "iflush on a send comm");
    c->recv->flush(data[0], size_t(std::max(sizes[0], 0)), registrationOf(mhandles[0]));
    counted(flushes);
    c->requests.push_back(std::make_unique<Request>(Request{c, nullptr}));
    *request = c->requests.back().get();
  });
}

// Done: *sizes gets what was sent or what arrived, and the request is gone.
ncclResult_t pluginTest(void* request, int* done, int* sizes) {
  return guarded("test", [&] {
    auto* r = static_cast<Request*>(request);
    *done = 0;
    if (r->request != nullptr) {
      NetRequest* pending = r->request;
      if (!(r->comm->send ? r->comm->send->test(pending, &r->bytes) : r->comm->recv->test(pending, &r->bytes))) return;
      r->request = nullptr;  // the backend freed it
      r->reportAt = std::chrono::steady_clock::now() + r->comm->completionLag;
    }
    // A completion lag (as of plugins whose own threads complete requests) holds the report back.
    if (r->comm->completionLag.count() > 0 && std::chrono::steady_clock::now() < r->reportAt) return;
    *done = 1;
    if (sizes && r->comm->writesSizes) *sizes = int(r->bytes);
    r->comm->remove(r);
  });
}

// A sender that has nothing in flight tells its peer that the end of the connection is expected
// (unless TUTTI_SOCKET_PLUGIN_NO_GOODBYE: then it just closes, as other plugins do).
ncclResult_t pluginCloseSend(void* sendComm) {
  return guarded("closeSend", [&] {
    std::unique_ptr<Comm> c(static_cast<Comm*>(sendComm));
    if (c->saysGoodbye) c->send->closeGracefully();
  });
}

ncclResult_t pluginCloseRecv(void* recvComm) {
  return guarded("closeRecv", [&] { delete static_cast<Comm*>(recvComm); });
}

ncclResult_t pluginCloseListen(void* listenComm) {
  return guarded("closeListen", [&] { delete static_cast<NetListenComm*>(listenComm); });
}

// Device offload and virtual devices (v7 on) are not offered.
[[maybe_unused]] ncclResult_t pluginNoDeviceOffload(void*, void*, void**) { return ncclInternalError; }
[[maybe_unused]] ncclResult_t pluginNoRecvConsumed(void*, int, void*) { return ncclInternalError; }
[[maybe_unused]] ncclResult_t pluginNoVirtualDevice(int*, abi::VirtualDeviceProps*) { return ncclInvalidUsage; }
[[maybe_unused]] ncclResult_t pluginNoVirtualDeviceV12(int*, abi::VirtualDevicePropsV12*) { return ncclInvalidUsage; }
// v11 on: the process's state stays (see PluginState); there are no attributes to tune.
[[maybe_unused]] ncclResult_t pluginFinalize(void*) { return ncclSuccess; }
// isend and irecv from v10 on: a profiler handle this plugin does not use.
[[maybe_unused]] ncclResult_t pluginIsendWithProfiler(void* comm, void* data, size_t bytes, int tag, void* mhandle,
                                                      void*, void** request) {
  return pluginIsend(comm, data, bytes, tag, mhandle, request);
}
[[maybe_unused]] ncclResult_t pluginIrecvWithProfiler(void* comm, int n, void** data, size_t* sizes, int* tags,
                                                      void** mhandles, void**, void** request) {
  return pluginIrecv(comm, n, data, sizes, tags, mhandles, request);
}
[[maybe_unused]] ncclResult_t pluginNoNetAttributes(void*, abi::NetAttrV11*) { return ncclSuccess; }

}  // namespace
}  // namespace tutti::transport::net

using namespace tutti::transport::net;

#if TUTTI_SOCKET_PLUGIN_VERSION == 10

extern "C" __attribute__((visibility("default"))) const abi::NetV10 ncclNetPlugin_v10 = {
    TUTTI_PLUGIN_NAME,
    [](abi::Logger logger, abi::ProfilerCallback) { return pluginInit(logger); },
    pluginDevices,
    [](int device, abi::PropertiesV10* props) {
      return guarded("getProperties", [&] {
        *props = abi::PropertiesV10{};
        fillCommonProperties(device, props);
        props->netDeviceType = abi::kDeviceHost;
        props->vProps.ndevs = 1;
        props->vProps.devs[0] = device;
        props->maxP2pBytes = kMaxMessageBytes;
        props->maxCollBytes = kMaxMessageBytes;
      });
    },
    pluginListen,
    // The comm config (a traffic class) has no meaning for TCP here.
    [](int device, abi::CommConfig*, void* handle, void** sendComm, abi::DeviceHandle**) {
      return pluginConnect(device, handle, sendComm);
    },
    [](void* listenComm, void** recvComm, abi::DeviceHandle**) { return pluginAccept(listenComm, recvComm); },
    pluginRegMr,
    pluginRegMrDmaBuf,
    pluginDeregMr,
    pluginIsendWithProfiler,
    pluginIrecvWithProfiler,
    pluginIflush,
    pluginTest,
    pluginCloseSend,
    pluginCloseRecv,
    pluginCloseListen,
    pluginNoDeviceOffload,
    pluginNoRecvConsumed,
    pluginNoVirtualDevice,
};

#elif TUTTI_SOCKET_PLUGIN_VERSION == 6

extern "C" __attribute__((visibility("default"))) const abi::NetV6 ncclNetPlugin_v6 = {
    TUTTI_PLUGIN_NAME,
    pluginInit,
    pluginDevices,
    [](int device, abi::PropertiesV6* props) {
      return guarded("getProperties", [&] {
        *props = abi::PropertiesV6{};
        fillCommonProperties(device, props);
      });
    },
    pluginListen,
    pluginConnect,
    pluginAccept,
    [](void* comm, void* data, int bytes, int type, void** mhandle) {
      return pluginRegMr(comm, data, size_t(bytes), type, mhandle);
    },
    pluginRegMrDmaBuf,
    pluginDeregMr,
    [](void* comm, void* data, int bytes, int tag, void* mhandle, void** request) {
      return pluginIsend(comm, data, size_t(bytes), tag, mhandle, request);
    },
    pluginIrecv<int>,
    pluginIflush,
    pluginTest,
    pluginCloseSend,
    pluginCloseRecv,
    pluginCloseListen,
};

#elif TUTTI_SOCKET_PLUGIN_VERSION == 12

extern "C" __attribute__((visibility("default"))) const abi::NetV12 ncclNetPlugin_v12 = {
    TUTTI_PLUGIN_NAME,
    // A context per communicator from v11: this plugin needs none (its state is the process's).
    [](void** context, uint64_t, abi::CommConfig*, abi::Logger logger, abi::ProfilerCallback) {
      *context = nullptr;
      return pluginInit(logger);
    },
    pluginDevices,
    [](int device, abi::PropertiesV12* props) {
      return guarded("getProperties", [&] {
        *props = abi::PropertiesV12{};
        fillCommonProperties(device, props);
        props->netDeviceType = abi::kDeviceHost;
        props->vProps.ndevs = 1;
        props->vProps.devs[0] = device;
        props->maxP2pBytes = kMaxMessageBytes;
        props->maxCollBytes = kMaxMessageBytes;
        props->maxMultiRequestSize = 1;
        props->railId = -1;  // no rail or plane is known for a host interface
        props->planeId = -1;
      });
    },
    [](void*, int device, void* handle, void** listenComm) { return pluginListen(device, handle, listenComm); },
    [](void*, int device, void* handle, void** sendComm, abi::DeviceHandle**) {
      return pluginConnect(device, handle, sendComm);
    },
    [](void* listenComm, void** recvComm, abi::DeviceHandle**) { return pluginAccept(listenComm, recvComm); },
    pluginRegMr,
    pluginRegMrDmaBuf,
    pluginDeregMr,
    pluginIsendWithProfiler,
    pluginIrecvWithProfiler,
    pluginIflush,
    pluginTest,
    pluginCloseSend,
    pluginCloseRecv,
    pluginCloseListen,
    pluginNoDeviceOffload,
    pluginNoRecvConsumed,
    pluginNoVirtualDeviceV12,
    pluginFinalize,
    pluginNoNetAttributes,
};

#else
#error "TUTTI_SOCKET_PLUGIN_VERSION: 10 (libnccl-net-tutti.so), 6 or 12 (the loader's tests)"
#endif

#if TUTTI_PLUGIN_BACKEND_IB
// For the tests (exported by the test library's own map): regMrDmaBuf calls that registered, and
// iflush calls that flushed, in this process.
extern "C" __attribute__((visibility("default"))) void tutti_test_plugin_dmabuf_counters(uint64_t* registrations,
                                                                                         uint64_t* flushed) {
  if (registrations) *registrations = dmaBufRegistrations.load();
  if (flushed) *flushed = flushes.load();
}
#endif
