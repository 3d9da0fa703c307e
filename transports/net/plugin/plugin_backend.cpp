// tutti's net interface over an external plugin (see plugin_backend.h).
//
// Lifetimes: a plugin request lives from isend/irecv until the test that reports it done (the
// plugin frees it then); tutti's NetRequest for it is a wrapper from the comm's pool, reused after
// that test. Comms close in their destructors, after the proxy has stopped using them; the
// plugin's context (v11) ends with the last of the backend and its comms. The
// plugin's library stays loaded for the process's life (plugin_loader.cpp), so its code outlives
// every comm and any thread it started.
#include "transports/net/plugin/plugin_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "transports/net/plugin/net_plugin_abi.h"

namespace tutti::transport::net {
namespace {

static_assert(kNetHandleBytes >= size_t(abi::kHandleMaxBytes));

ErrorCode codeOf(ncclResult_t result) {
  switch (result) {
    case ncclRemoteError: return ErrorCode::Remote;
    case ncclSystemError: return ErrorCode::System;
    case ncclInvalidArgument: return ErrorCode::InvalidArgument;
    case ncclInvalidUsage: return ErrorCode::InvalidUsage;
    default: return ErrorCode::Internal;
  }
}

// What the backend and every comm it made share: the plugin, its name for messages, and the
// context init gave (finalized when the last of them goes, so no comm outlives it).
struct Session {
  std::shared_ptr<PluginNet> plugin;
  std::string text;  // "NET/Plugin <name> (<library>, v<N>)"
  void* context = nullptr;
  std::mutex commsMutex;
  std::map<int, int> liveComms;  // under commsMutex: send and receive comms open, by plugin device

  ~Session() {
    ncclResult_t result = plugin->finalize(context);
    if (result != ncclSuccess) TUTTI_WARN("%s: finalize failed: %s", text.c_str(), pluginResultName(result));
  }
  void check(ncclResult_t result, const char* call) const {
    if (result != ncclSuccess)
      throw Error(codeOf(result), text + ": " + call + " failed: " + pluginResultName(result) + " (" +
                                      std::to_string(int(result)) + ")");
  }
};
using SessionPtr = std::shared_ptr<Session>;

// One comm of a plugin device counted against its maxComms for as long as it is open: NCCL states
// the limit to its topology; tutti refuses a comm beyond it, naming the limit, rather than let the
// plugin fail in its own words (or not at all).
class CommSlot {
 public:
  CommSlot(SessionPtr session, int device, int maxComms, const char* what)
      : session_(std::move(session)), device_(device) {
    std::lock_guard<std::mutex> lock(session_->commsMutex);
    int& live = session_->liveComms[device_];
    if (maxComms > 0 && live >= maxComms)
      throw Error(ErrorCode::System, session_->text + ": " + what + " on device " + std::to_string(device_) +
                                         " would open its comm number " + std::to_string(live + 1) +
                                         ", beyond the device's maxComms of " + std::to_string(maxComms));
    live++;
  }
  ~CommSlot() {
    std::lock_guard<std::mutex> lock(session_->commsMutex);
    session_->liveComms[device_]--;
  }
  CommSlot(const CommSlot&) = delete;
  CommSlot& operator=(const CommSlot&) = delete;

 private:
  SessionPtr session_;
  int device_;
};

// Calls `attempt` until it yields a comm, the deadline passes or the flag is raised; sleeps
// between attempts (from 10 us, doubling to 1 ms), as a plugin's connect and accept ask.
template <typename Attempt>
void* pollUntilConnected(const Session& plugin, const char* what, SteadyTime deadline,
                         const std::atomic<bool>* abortFlag, Attempt attempt) {
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    void* comm = nullptr;
    plugin.check(attempt(&comm), what);
    if (comm != nullptr) return comm;
    if (abortFlag != nullptr && abortFlag->load())
      throw Error(ErrorCode::Aborted, plugin.text + ": " + what + ": aborted");
    if (SteadyClock::now() >= deadline)
      throw Error(ErrorCode::Timeout,
                  plugin.text + ": " + what + " did not complete before the deadline (TUTTI_TIMEOUT)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

struct PluginRequest : NetRequest {
  void* request = nullptr;
};

// How long a flush may take before it is an error: as long as the IB backend gives its own.
constexpr double kFlushSeconds = 10;

// What a send comm and a receive comm share: the plugin's comm, registrations, requests.
class PluginComm {
 public:
  PluginComm(SessionPtr session, void* comm) : session_(std::move(session)), comm_(comm) {}

  MemoryRegistration registerMemory(void* data, size_t bytes) {
    void* mhandle = nullptr;
    session_->check(plugin().regMr(comm_, data, bytes, abi::kPtrHost, &mhandle), "regMr");
    return MemoryRegistration{mhandle};
  }

  // Device memory, registered as NCCL registers it: regMrDmaBuf with NCCL_PTR_CUDA. Only offered
  // where the device's properties report dmaBuf (PluginBackend).
  MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) {
    void* mhandle = nullptr;
    ncclResult_t result = plugin().regMrDmaBuf(comm_, data, bytes, abi::kPtrCuda, offset, fd, &mhandle);
    if (result != ncclSuccess)
      throw Error(codeOf(result), session_->text + ": regMrDmaBuf of " + std::to_string(bytes) +
                                      " bytes of device memory (dmabuf fd " + std::to_string(fd) + " at offset " +
                                      std::to_string(offset) + ") failed: " + pluginResultName(result));
    if (mhandle == nullptr)
      throw Error(ErrorCode::Internal, session_->text + ": regMrDmaBuf returned no memory handle");
    dmaBufHandles_.insert(mhandle);
    return MemoryRegistration{mhandle};
  }
  bool isDmaBuf(MemoryRegistration registration) const { return dmaBufHandles_.count(registration.backendData) != 0; }

  void deregisterMemory(MemoryRegistration registration) {
    if (registration.backendData == nullptr) return;
    dmaBufHandles_.erase(registration.backendData);
    ncclResult_t result = plugin().deregMr(comm_, registration.backendData);
    if (result != ncclSuccess) TUTTI_WARN("%s: deregMr failed: %s", session_->text.c_str(), pluginResultName(result));
  }

  // Whether another isend / irecv may be posted: NCCL keeps at most NCCL_NET_MAX_REQUESTS in
  // flight per comm (8 for v6 plugins, 32 later), and a plugin may size its pools by that.
  bool roomForRequest() const { return all_.size() - free_.size() < size_t(plugin().version() == 6 ? 8 : 32); }

  // The plugin's request in a wrapper, or nullptr when the plugin gave none.
  NetRequest* wrap(void* request) {
    if (request == nullptr) return nullptr;
    if (free_.empty()) {
      all_.push_back(std::make_unique<PluginRequest>());
      free_.push_back(all_.back().get());
    }
    PluginRequest* r = free_.back();
    free_.pop_back();
    r->request = request;
    return r;
  }

  bool test(NetRequest* request, size_t* bytes) {
    auto* r = static_cast<PluginRequest*>(request);
    // As NCCL: the size starts at 0 and may stay so (a plugin need not write it); the proxy finds
    // a message's size in tutti's own header instead.
    int done = 0, size = 0;
    session_->check(plugin().test(r->request, &done, &size), "test");
    if (!done) return false;
    if (bytes) *bytes = size_t(std::max(size, 0));
    r->request = nullptr;
    free_.push_back(r);
    return true;
  }

  void* comm() const { return comm_; }
  PluginNet& plugin() const { return *session_->plugin; }
  const Session& session() const { return *session_; }

 private:
  SessionPtr session_;
  void* comm_;
  std::vector<std::unique_ptr<PluginRequest>> all_;
  std::vector<PluginRequest*> free_;
  std::unordered_set<void*> dmaBufHandles_;  // the registrations regMrDmaBuf made: device memory
};

class PluginSendComm final : public NetSendComm {
 public:
  PluginSendComm(SessionPtr session, void* comm, size_t maxBytes, std::unique_ptr<CommSlot> slot)
      : comm_(std::move(session), comm), maxBytes_(maxBytes), slot_(std::move(slot)) {}
  ~PluginSendComm() override {
    ncclResult_t result = comm_.plugin().closeSend(comm_.comm());
    if (result != ncclSuccess)
      TUTTI_WARN("%s: closeSend failed: %s", comm_.session().text.c_str(), pluginResultName(result));
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override { return comm_.registerMemory(data, bytes); }
  MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) override {
    return comm_.registerDmaBuf(data, bytes, fd, offset);
  }
  void deregisterMemory(MemoryRegistration registration) override { comm_.deregisterMemory(registration); }

  NetRequest* isend(const void* data, size_t bytes, int tag, MemoryRegistration registration) override {
    if (bytes > maxBytes_)
      throw Error(ErrorCode::InvalidUsage, comm_.session().text + ": isend of " + std::to_string(bytes) +
                                               " bytes, above the plugin's limit of " + std::to_string(maxBytes_));
    if (!comm_.roomForRequest()) return nullptr;
    void* request = nullptr;
    comm_.session().check(
        comm_.plugin().isend(comm_.comm(), const_cast<void*>(data), bytes, tag, registration.backendData, &request),
        "isend");
    return comm_.wrap(request);
  }

  bool test(NetRequest* request, size_t* bytes) override { return comm_.test(request, bytes); }
  // A plugin has no descriptors to offer: the proxy looks at it at least once a millisecond.
  std::vector<int> pollDescriptors() const override { return {}; }
  // The plugin ABI has no goodbye; closeSend (the destructor) is the plugin's whole ending.
  void closeGracefully() override {}

 private:
  PluginComm comm_;
  size_t maxBytes_;
  std::unique_ptr<CommSlot> slot_;
};

class PluginRecvComm final : public NetRecvComm {
 public:
  // forceFlush: the device's property (receives into host memory are flushed too).
  PluginRecvComm(SessionPtr session, void* comm, size_t maxBytes, bool forceFlush, std::unique_ptr<CommSlot> slot)
      : comm_(std::move(session), comm), maxBytes_(maxBytes), forceFlush_(forceFlush), slot_(std::move(slot)) {}
  ~PluginRecvComm() override {
    ncclResult_t result = comm_.plugin().closeRecv(comm_.comm());
    if (result != ncclSuccess)
      TUTTI_WARN("%s: closeRecv failed: %s", comm_.session().text.c_str(), pluginResultName(result));
  }

  MemoryRegistration registerMemory(void* data, size_t bytes) override { return comm_.registerMemory(data, bytes); }
  MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) override {
    return comm_.registerDmaBuf(data, bytes, fd, offset);
  }
  void deregisterMemory(MemoryRegistration registration) override { comm_.deregisterMemory(registration); }

  NetRequest* irecv(void* data, size_t capacity, int tag, MemoryRegistration registration) override {
    if (!comm_.roomForRequest()) return nullptr;
    void* request = nullptr;
    comm_.session().check(comm_.plugin().irecv(comm_.comm(), data, std::min(capacity, maxBytes_), tag,
                                               registration.backendData, &request),
                          "irecv");
    return comm_.wrap(request);
  }

  bool test(NetRequest* request, size_t* bytes) override { return comm_.test(request, bytes); }
  // As NCCL: a receive into device memory (registered by regMrDmaBuf) is flushed through iflush,
  // and one into host memory only where the plugin's forceFlush asks. The proxy needs the data
  // visible before it hands the slot on, so the flush is waited for here, with a bound.
  void flush(void* data, size_t bytes, MemoryRegistration registration) override {
    if (bytes == 0 || (!forceFlush_ && !comm_.isDmaBuf(registration))) return;
    const Session& session = comm_.session();
    void* request = nullptr;
    session.check(comm_.plugin().iflush(comm_.comm(), data, bytes, registration.backendData, &request), "iflush");
    if (request == nullptr) return;  // the plugin had nothing to do (its flush is disabled)
    const SteadyTime deadline = deadlineAfter(kFlushSeconds);
    for (;;) {
      int done = 0, size = 0;
      session.check(comm_.plugin().test(request, &done, &size), "test (of an iflush)");
      if (done) return;
      if (SteadyClock::now() > deadline)
        throw Error(ErrorCode::System, session.text + ": the iflush of a receive of " + std::to_string(bytes) +
                                           " bytes did not complete within " + std::to_string(int(kFlushSeconds)) +
                                           " s");
      std::this_thread::yield();
    }
  }
  std::vector<int> pollDescriptors() const override { return {}; }
  // The ABI has no goodbye: the peer's closeSend is only its end of the connection.
  bool peerSaysGoodbye() const override { return false; }

 private:
  PluginComm comm_;
  size_t maxBytes_;
  bool forceFlush_;
  std::unique_ptr<CommSlot> slot_;
};

class PluginListenComm final : public NetListenComm {
 public:
  PluginListenComm(SessionPtr session, void* comm, int pluginDevice, const NetProperties& device)
      : session_(std::move(session)),
        comm_(comm),
        pluginDevice_(pluginDevice),
        maxComms_(device.maxComms),
        maxBytes_(device.maxMessageBytes),
        forceFlush_(device.forceFlush) {}
  ~PluginListenComm() override {
    ncclResult_t result = session_->plugin->closeListen(comm_);
    if (result != ncclSuccess)
      TUTTI_WARN("%s: closeListen failed: %s", session_->text.c_str(), pluginResultName(result));
  }

  std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    auto slot = std::make_unique<CommSlot>(session_, pluginDevice_, maxComms_, "accept");
    void* recv = pollUntilConnected(*session_, "accept", deadline, abortFlag,
                                    [&](void** comm) { return session_->plugin->accept(comm_, comm); });
    return std::make_unique<PluginRecvComm>(session_, recv, maxBytes_, forceFlush_, std::move(slot));
  }

  std::unique_ptr<NetRecvComm> acceptIfReady() override {
    auto slot = std::make_unique<CommSlot>(session_, pluginDevice_, maxComms_, "accept");
    void* recv = nullptr;
    session_->check(session_->plugin->accept(comm_, &recv), "accept");
    return recv ? std::make_unique<PluginRecvComm>(session_, recv, maxBytes_, forceFlush_, std::move(slot)) : nullptr;
  }

 private:
  SessionPtr session_;
  void* comm_;
  int pluginDevice_;
  int maxComms_;
  size_t maxBytes_;
  bool forceFlush_;
};

class PluginBackend final : public NetBackend {
 public:
  explicit PluginBackend(SessionPtr session) : session_(std::move(session)) {
    int count = 0;
    session_->check(plugin().devices(&count), "devices");
    for (int d = 0; d < count; d++) {
      NetProperties p;
      session_->check(plugin().properties(d, &p), "getProperties");
      decideDmaBuf(d, &p);
      describeAddress(&p);
      if (p.hostMemory) devices_.push_back(DeviceEntry{d, p});
    }
    if (devices_.empty())
      throw Error(ErrorCode::System,
                  session_->text + ": none of its " + std::to_string(count) +
                      " device(s) takes host memory (NCCL_PTR_HOST), which tutti's proxy sends from");
  }

  const char* name() const override { return plugin().name(); }
  int deviceCount() override { return int(devices_.size()); }
  NetProperties properties(int device) override { return entry(device).properties; }

  std::unique_ptr<NetListenComm> listen(int device, NetHandle* handle) override {
    const DeviceEntry& d = entry(device);
    std::memset(handle->bytes, 0, sizeof handle->bytes);
    void* comm = nullptr;
    session_->check(plugin().listen(session_->context, d.pluginDevice, handle->bytes, &comm), "listen");
    if (comm == nullptr) throw Error(ErrorCode::Internal, session_->text + ": listen returned no listening comm");
    return std::make_unique<PluginListenComm>(session_, comm, d.pluginDevice, d.properties);
  }

  std::unique_ptr<NetSendComm> connect(int device, const NetHandle& handle, SteadyTime deadline,
                                       const std::atomic<bool>* abortFlag) override {
    const DeviceEntry& d = entry(device);
    NetHandle copy = handle;  // the plugin may write to it while connecting
    auto slot = std::make_unique<CommSlot>(session_, d.pluginDevice, d.properties.maxComms, "connect");
    void* send = pollUntilConnected(*session_, "connect", deadline, abortFlag, [&](void** comm) {
      return plugin().connect(session_->context, d.pluginDevice, copy.bytes, comm);
    });
    return std::make_unique<PluginSendComm>(session_, send, d.properties.maxMessageBytes, std::move(slot));
  }

  // One call of the plugin's connect per step, on one copy of the handle that lives as long as the
  // attempt (a plugin keeps its progress in it), as NCCL calls it.
  std::unique_ptr<NetConnecting> startConnect(int device, const NetHandle& handle, SteadyTime,
                                              const std::atomic<bool>*) override {
    class Connecting final : public NetConnecting {
     public:
      Connecting(SessionPtr session, int pluginDevice, size_t maxBytes, const NetHandle& handle,
                 std::unique_ptr<CommSlot> slot)
          : session_(std::move(session)),
            pluginDevice_(pluginDevice),
            maxBytes_(maxBytes),
            handle_(handle),
            slot_(std::move(slot)) {}
      std::unique_ptr<NetSendComm> poll() override {
        void* send = nullptr;
        session_->check(session_->plugin->connect(session_->context, pluginDevice_, handle_.bytes, &send), "connect");
        return send ? std::make_unique<PluginSendComm>(session_, send, maxBytes_, std::move(slot_)) : nullptr;
      }

     private:
      SessionPtr session_;
      int pluginDevice_;
      size_t maxBytes_;
      NetHandle handle_;
      std::unique_ptr<CommSlot> slot_;
    };
    const DeviceEntry& d = entry(device);
    auto slot = std::make_unique<CommSlot>(session_, d.pluginDevice, d.properties.maxComms, "connect");
    return std::make_unique<Connecting>(session_, d.pluginDevice, d.properties.maxMessageBytes, handle,
                                        std::move(slot));
  }

 private:
  struct DeviceEntry {
    int pluginDevice;  // the plugin's number for it
    NetProperties properties;
  };

  PluginNet& plugin() const { return *session_->plugin; }

  // Device memory reaches a plugin only by dmabuf (regMrDmaBuf, flushed by iflush), as NCCL
  // registers it where the plugin reports NCCL_PTR_CUDA and NCCL_PTR_DMABUF; tutti has no path for
  // NCCL_PTR_CUDA alone (a peer-memory module's regMr of a device pointer). So dmaBuf, and with it
  // cudaMemory, hold only where the plugin reports both and fills both calls.
  void decideDmaBuf(int device, NetProperties* p) const {
    const bool asked = p->dmaBuf;
    std::string why;
    if (!p->cudaMemory)
      why = "it does not report NCCL_PTR_CUDA";
    else if (!p->dmaBuf)
      why = "it does not report NCCL_PTR_DMABUF";
    else if (!plugin().hasDmaBufCalls())
      why = "its table lacks regMrDmaBuf or iflush";
    p->dmaBuf = p->cudaMemory = why.empty();
    if (p->dmaBuf)
      TUTTI_INFO(log::Net, "%s: device %d (%s) registers device memory by dmabuf (regMrDmaBuf, GPUDirect RDMA)",
                 session_->text.c_str(), device, p->name.c_str());
    else if (asked)
      TUTTI_INFO(log::Net, "%s: device %d (%s) reports NCCL_PTR_DMABUF, but %s: host memory only",
                 session_->text.c_str(), device, p->name.c_str(), why.c_str());
  }

  // A plugin's device has no address tutti can print; what NCCL takes from its properties for the
  // topology (port, speed, latency) stands in for it in the layout line (NetProperties::address).
  static void describeAddress(NetProperties* p) {
    if (!p->address.empty()) return;
    char text[64];
    std::snprintf(text, sizeof text, "(plugin port %d, %d Mbps, latency %g us)", p->port, p->speedMbps,
                  double(p->latencyUs));
    p->address = text;
  }

  const DeviceEntry& entry(int device) const {
    if (device < 0 || size_t(device) >= devices_.size())
      throw Error(ErrorCode::InvalidArgument, session_->text + ": no device " + std::to_string(device) + " (" +
                                                  std::to_string(devices_.size()) + " take host memory)");
    return devices_[size_t(device)];
  }

  SessionPtr session_;
  std::vector<DeviceEntry> devices_;
};

}  // namespace

std::unique_ptr<NetBackend> makePluginBackend(std::shared_ptr<PluginNet> plugin, const std::string& library) {
  std::string text =
      std::string("NET/Plugin ") + plugin->name() + " (" + library + ", v" + std::to_string(plugin->version()) + ")";
  void* context = nullptr;
  ncclResult_t result = plugin->init(&context);
  if (result != ncclSuccess)
    throw Error(ErrorCode::System,
                text + ": init failed: " + pluginResultName(result) + " (" + std::to_string(int(result)) + ")");
  auto session = std::make_shared<Session>();  // from here on, finalized however this ends
  session->plugin = std::move(plugin);
  session->text = std::move(text);
  session->context = context;
  return std::make_unique<PluginBackend>(std::move(session));
}

}  // namespace tutti::transport::net
