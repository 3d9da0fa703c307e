// The version adapters: one class template instantiated per interface version (6 to 12), each over
// that version's table, each answering in the newest shape (see plugin_net.h).
#include "transports/net/plugin/plugin_net.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <type_traits>

#include "base/log.h"
#include "transports/net/plugin/net_plugin_abi.h"

namespace tutti::transport::net {
namespace {

// What a plugin logs goes to tutti's log, at its level and subsystems (NCCL's subsystem bits
// are tutti's).
void pluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  if (level <= 0 || !log::enabled(log::Level(level), flags)) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  log::write(log::Level(level), flags, file, line, "%s", text);
}

// tutti has no profiler plugin: every event the plugin would open is no event.
ncclResult_t pluginProfilerEvent(void** eventHandle, int, void*, int64_t, void*) {
  if (eventHandle) *eventHandle = nullptr;
  return ncclSuccess;
}

template <int V>
struct Abi;
template <>
struct Abi<6> {
  using Table = abi::NetV6;
  using Props = abi::PropertiesV6;
};
template <>
struct Abi<7> {
  using Table = abi::NetV7;
  using Props = abi::PropertiesV7;
};
template <>
struct Abi<8> {
  using Table = abi::NetV8;
  using Props = abi::PropertiesV8;
};
template <>
struct Abi<9> {
  using Table = abi::NetV9;
  using Props = abi::PropertiesV9;
};
template <>
struct Abi<10> {
  using Table = abi::NetV10;
  using Props = abi::PropertiesV10;
};
template <>
struct Abi<11> {
  using Table = abi::NetV11;
  using Props = abi::PropertiesV11;
};
template <>
struct Abi<12> {
  using Table = abi::NetV12;
  using Props = abi::PropertiesV12;
};

// What the version's calls take as a message size: int before v9 (regMr: before v8).
template <int V>
using MessageSize = std::conditional_t<(V >= 9), size_t, int>;
template <int V>
using RegistrationSize = std::conditional_t<(V >= 8), size_t, int>;

template <int V>
class VersionedNet final : public PluginNet {
 public:
  using Table = typename Abi<V>::Table;
  using Props = typename Abi<V>::Props;

  explicit VersionedNet(Table* table) : table_(table) {}

  const char* name() const override { return table_->name ? table_->name : "(unnamed)"; }
  int version() const override { return V; }

  ncclResult_t init(void** context) override {
    if constexpr (V >= 11) {
      abi::CommConfig config{abi::kTrafficClassUndefined};
      return table_->init(context, 0, &config, pluginLog, pluginProfilerEvent);
    } else {
      // Before v11 a plugin is initialised once for the process.
      std::call_once(initOnce_, [&] {
        if constexpr (V >= 10)
          initResult_ = table_->init(pluginLog, pluginProfilerEvent);
        else
          initResult_ = table_->init(pluginLog);
      });
      *context = nullptr;
      return initResult_;
    }
  }

  ncclResult_t finalize(void* context) override {
    if constexpr (V >= 11)
      return table_->finalize ? table_->finalize(context) : ncclSuccess;
    else
      return ncclSuccess;
  }

  ncclResult_t devices(int* count) override { return table_->devices(count); }

  ncclResult_t properties(int device, NetProperties* out) override {
    Props p{};
    ncclResult_t result = table_->getProperties(device, &p);
    if (result != ncclSuccess) return result;
    out->name = p.name ? p.name : "";
    out->pciPath = p.pciPath ? p.pciPath : "";
    out->guid = p.guid;
    out->hostMemory = (p.ptrSupport & abi::kPtrHost) != 0;
    out->cudaMemory = (p.ptrSupport & abi::kPtrCuda) != 0;
    out->dmaBuf = (p.ptrSupport & abi::kPtrDmaBuf) != 0;
    out->speedMbps = p.speed;
    out->port = p.port;
    out->latencyUs = p.latency;
    out->maxComms = p.maxComms;
    // NCCL groups up to maxRecvs receives in one irecv; a plugin that says less than 1 takes one.
    out->maxRecvs = std::max(p.maxRecvs, 1);
    if constexpr (V >= 8) out->registrationIsGlobal = p.regIsGlobal != 0;
    if constexpr (V >= 9) {
      out->forceFlush = p.forceFlush != 0;
      out->maxMessageBytes = p.maxP2pBytes;
    } else {
      out->maxMessageBytes = abi::kMaxNetBytesBeforeV9;
    }
    return ncclSuccess;
  }

  ncclResult_t listen(void* context, int device, void* handle, void** listenComm) override {
    if constexpr (V >= 11)
      return table_->listen(context, device, handle, listenComm);
    else
      return table_->listen(device, handle, listenComm);
  }

  ncclResult_t connect(void* context, int device, void* handle, void** sendComm) override {
    abi::DeviceHandle* offload = nullptr;  // no device offload asked for
    if constexpr (V >= 11) {
      return table_->connect(context, device, handle, sendComm, &offload);
    } else if constexpr (V == 10) {
      abi::CommConfig config{abi::kTrafficClassUndefined};
      return table_->connect(device, &config, handle, sendComm, &offload);
    } else if constexpr (V >= 7) {
      return table_->connect(device, handle, sendComm, &offload);
    } else {
      return table_->connect(device, handle, sendComm);
    }
  }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    if constexpr (V >= 7) {
      abi::DeviceHandle* offload = nullptr;
      return table_->accept(listenComm, recvComm, &offload);
    } else {
      return table_->accept(listenComm, recvComm);
    }
  }

  ncclResult_t regMr(void* comm, void* data, size_t bytes, int pointerType, void** mhandle) override {
    if (!fits<RegistrationSize<V>>(bytes)) return ncclInvalidArgument;
    return table_->regMr(comm, data, RegistrationSize<V>(bytes), pointerType, mhandle);
  }

  // regMrDmaBuf and iflush have one shape in every version (iflush's sizes are int throughout).
  ncclResult_t regMrDmaBuf(void* comm, void* data, size_t bytes, int pointerType, uint64_t offset, int fd,
                           void** mhandle) override {
    if (table_->regMrDmaBuf == nullptr) return ncclInvalidUsage;
    return table_->regMrDmaBuf(comm, data, bytes, pointerType, offset, fd, mhandle);
  }
  bool hasDmaBufCalls() const override { return table_->regMrDmaBuf != nullptr && table_->iflush != nullptr; }

  ncclResult_t deregMr(void* comm, void* mhandle) override { return table_->deregMr(comm, mhandle); }

  ncclResult_t isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle, void** request) override {
    if (!fits<MessageSize<V>>(bytes)) return ncclInvalidArgument;
    *request = nullptr;
    if constexpr (V >= 10)
      return table_->isend(sendComm, data, bytes, tag, mhandle, nullptr, request);
    else
      return table_->isend(sendComm, data, MessageSize<V>(bytes), tag, mhandle, request);
  }

  ncclResult_t irecv(void* recvComm, void* data, size_t capacity, int tag, void* mhandle, void** request) override {
    if (!fits<MessageSize<V>>(capacity)) return ncclInvalidArgument;
    // One receive per call (tutti's proxy posts a slot at a time), so any plugin's maxRecvs fits.
    MessageSize<V> size = MessageSize<V>(capacity);
    void* profilerHandle = nullptr;
    *request = nullptr;  // not NCCL_NET_OPTIONAL_RECV_COMPLETION: every receive completes
    if constexpr (V >= 10)
      return table_->irecv(recvComm, 1, &data, &size, &tag, &mhandle, &profilerHandle, request);
    else
      return table_->irecv(recvComm, 1, &data, &size, &tag, &mhandle, request);
  }

  ncclResult_t iflush(void* recvComm, void* data, size_t bytes, void* mhandle, void** request) override {
    *request = nullptr;
    if (table_->iflush == nullptr) return ncclInvalidUsage;
    if (!fits<int>(bytes)) return ncclInvalidArgument;
    int size = int(bytes);
    return table_->iflush(recvComm, 1, &data, &size, &mhandle, request);
  }

  ncclResult_t test(void* request, int* done, int* bytes) override { return table_->test(request, done, bytes); }
  ncclResult_t closeSend(void* sendComm) override { return table_->closeSend(sendComm); }
  ncclResult_t closeRecv(void* recvComm) override { return table_->closeRecv(recvComm); }
  ncclResult_t closeListen(void* listenComm) override { return table_->closeListen(listenComm); }

 private:
  template <typename Size>
  static bool fits(size_t bytes) {
    if constexpr (std::is_same_v<Size, int>)
      return bytes <= size_t(INT_MAX);
    else
      return true;
  }

  Table* table_;
  std::once_flag initOnce_;
  ncclResult_t initResult_ = ncclSuccess;
};

template <int V>
std::unique_ptr<PluginNet> tryVersion(void* library) {
  std::string symbol = "ncclNetPlugin_v" + std::to_string(V);
  void* table = ::dlsym(library, symbol.c_str());
  if (table == nullptr) return nullptr;
  return std::make_unique<VersionedNet<V>>(static_cast<typename Abi<V>::Table*>(table));
}

}  // namespace

std::unique_ptr<PluginNet> findPluginNet(void* library) {
  // Newest first, as NCCL does: a library that exports several versions is used in its newest.
  for (auto attempt :
       {tryVersion<12>, tryVersion<11>, tryVersion<10>, tryVersion<9>, tryVersion<8>, tryVersion<7>, tryVersion<6>})
    if (std::unique_ptr<PluginNet> net = attempt(library)) return net;
  return nullptr;
}

const char* pluginResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "an unknown result";
  }
}

}  // namespace tutti::transport::net
