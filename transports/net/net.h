// The net interface: what a network backend offers the proxy, shaped like NCCL's net plugin
// (devices and their properties, listen / connect / accept, memory registration, isend / irecv /
// test, flush, close), so that external NCCL net plugins adapt to it (plugin/). Backends register
// by name, plugins join them (NCCL_NET_PLUGIN); NCCL_NET (or ncclConfig_t.netName) picks one.
//
// Connection setup calls startConnect and acceptIfReady as NCCL calls a plugin's connect and
// accept: again and again, interleaved, never waiting for the peer (a plugin's connect may
// complete only once the peer's accept has answered it), under the runtime's deadline and abort
// flag. connect and accept also come whole, bounded by a deadline and an abort flag, for callers
// that set up one connection alone. Other differences from the plugin ABI: errors are tutti::Error
// naming the peer and errno instead of result codes; a closed comm is a destroyed object (close ==
// destructor).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"

namespace tutti::transport::net {

// What a device can do, as NCCL's ncclNetProperties_t describes it.
struct NetProperties {
  std::string name;     // interface name, e.g. "eth0"
  std::string pciPath;  // sysfs path of the device, "" when unknown
  uint64_t guid = 0;
  bool hostMemory = true;             // isend/irecv accept host pointers
  bool cudaMemory = false;            // ... and device memory (GPUDirect RDMA), registered by registerDmaBuf
  bool dmaBuf = false;                // registerDmaBuf works: device memory is registered by its dmabuf descriptor
  bool registrationIsGlobal = false;  // a registration serves every comm, not only its own
  bool forceFlush = false;            // received data needs flush() even where it otherwise would not
  int speedMbps = 0;                  // link speed, 0 when unknown
  int port = 0;
  float latencyUs = 0;
  int maxComms = 65536;
  int maxRecvs = 1;                   // grouped receives per irecv
  size_t maxMessageBytes = SIZE_MAX;  // the largest message isend / irecv take
  std::string address;                // the address this device listens on (for logs)
};

// Opaque bytes the listening side hands to the connecting side out of band (over the bootstrap).
constexpr size_t kNetHandleBytes = 128;
struct NetHandle {
  uint8_t bytes[kNetHandleBytes];
};

// What registerMemory returns; backends that need nothing return an empty handle.
struct MemoryRegistration {
  void* backendData = nullptr;
};

// Registration of device memory by its dmabuf descriptor (GPUDirect RDMA): [data, data + bytes)
// is the executor's address range, which starts `offset` bytes into the dmabuf `fd` (the caller's;
// the backend does not keep it). The default, for backends whose properties report dmaBuf=false,
// refuses with an error saying so; `side` and `peer` name the comm for it. (Inline: the socket
// plugin library carries the Socket backend without the registry.)
[[noreturn]] inline MemoryRegistration refuseDmaBuf(const char* side, const std::string& peer) {
  throw Error(
      ErrorCode::InvalidUsage,
      std::string("registerDmaBuf on a ") + side + " comm" + (peer.empty() ? "" : " with " + peer) +
          ": this network backend cannot register device memory by dmabuf (its properties report dmaBuf=false)");
}

// An outstanding isend/irecv; test() completes it.
class NetRequest {
 public:
  virtual ~NetRequest() = default;
};

// One direction of one connection, sending side.
class NetSendComm {
 public:
  virtual ~NetSendComm() = default;
  virtual MemoryRegistration registerMemory(void* data, size_t bytes) = 0;
  // Device memory by its dmabuf (see refuseDmaBuf); deregisterMemory ends it. Throws naming the
  // device and peer when the backend or the descriptor refuses.
  virtual MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) {
    (void)data, (void)bytes, (void)fd, (void)offset;
    return refuseDmaBuf("send", "");
  }
  virtual void deregisterMemory(MemoryRegistration registration) = 0;
  // Starts sending `bytes`; nullptr when the comm cannot take another request now (retry later).
  virtual NetRequest* isend(const void* data, size_t bytes, int tag, MemoryRegistration registration) = 0;
  // Makes progress; true (and the request is freed) once done. Throws tutti::Error on failure.
  virtual bool test(NetRequest* request, size_t* bytes) = 0;
  // File descriptors whose readiness means progress may be possible (for poll); may be empty.
  virtual std::vector<int> pollDescriptors() const = 0;
  // What readiness of pollDescriptors() means progress: room to write (a socket's POLLOUT, the
  // default) or, when true, something to read (a completion channel's POLLIN).
  virtual bool pollsForInput() const { return false; }
  // Called by the proxy just before it sleeps on pollDescriptors(), never while it or a worker
  // polls: a backend whose descriptors turn readable only once armed (a verbs completion channel)
  // arms them here. True: something was armed, and the proxy makes one more pass before it sleeps,
  // since what arrived before the arming raises no event.
  virtual bool armForSleep() { return false; }
  // True when every request isend has taken completes without further calls here (an HCA carries
  // the write; test() only collects its completion), so that the proxy need not hurry back for
  // them when a worker lets the comms go. False (the default) while a message needs this host's
  // help to leave: bytes still to write to a socket, a message waiting for the receiver's go.
  virtual bool completesUnattended() const { return false; }
  // Tells the peer that no message follows, so that the end of the connection is not an error
  // there (a peer that dies without it is). Best effort; never blocks. Called after a drain.
  virtual void closeGracefully() = 0;
};

// One direction of one connection, receiving side.
class NetRecvComm {
 public:
  virtual ~NetRecvComm() = default;
  virtual MemoryRegistration registerMemory(void* data, size_t bytes) = 0;
  virtual MemoryRegistration registerDmaBuf(void* data, size_t bytes, int fd, uint64_t offset) {
    (void)data, (void)bytes, (void)fd, (void)offset;
    return refuseDmaBuf("receive", "");
  }
  virtual void deregisterMemory(MemoryRegistration registration) = 0;
  // Posts a receive of at most `capacity` bytes; nullptr when no more can be posted now.
  virtual NetRequest* irecv(void* data, size_t capacity, int tag, MemoryRegistration registration) = 0;
  // Makes progress; true (and the request is freed) once the message has arrived, with its size.
  virtual bool test(NetRequest* request, size_t* bytes) = 0;
  // Makes received data visible to the consumer (GPU memory); host memory needs nothing. Device
  // memory registered by dmabuf: an RDMA read from the buffer, waited for with a bound, as NCCL
  // does (NCCL_GDR_FLUSH_DISABLE=1 skips it).
  virtual void flush(void* data, size_t bytes, MemoryRegistration registration) = 0;
  virtual std::vector<int> pollDescriptors() const = 0;
  // As NetSendComm::armForSleep.
  virtual bool armForSleep() { return false; }
  // Whether the peer's orderly end (closeGracefully) reaches this side as a goodbye, so that an
  // end without one is a fault. False for external plugins: their ABI has no goodbye, and a
  // peer's closeSend after its last message looks like any other closed connection (see
  // net_proxy.h, fault handling).
  virtual bool peerSaysGoodbye() const { return true; }
};

// A listening endpoint: accept() yields the receiving side of a connection.
class NetListenComm {
 public:
  virtual ~NetListenComm() = default;
  // Waits for the peer that was given this listener's handle; drops (and logs) anything else
  // that connects. Throws Timeout / Aborted / Remote.
  virtual std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) = 0;
  // The same without waiting for a peer that is not all in yet: nullptr then (call again; what
  // arrived is kept), as a plugin's accept answers. Either call yields the comm once.
  virtual std::unique_ptr<NetRecvComm> acceptIfReady() = 0;
};

// A connect in progress (NetBackend::startConnect).
class NetConnecting {
 public:
  virtual ~NetConnecting() = default;
  // One step: the comm once connected, nullptr while the peer has not answered yet (call again).
  // Throws tutti::Error on failure.
  virtual std::unique_ptr<NetSendComm> poll() = 0;
};

class NetBackend {
 public:
  virtual ~NetBackend() = default;
  virtual const char* name() const = 0;
  virtual int deviceCount() = 0;
  virtual NetProperties properties(int device) = 0;
  // Listens on `device`; `handle` receives what the connecting side needs.
  virtual std::unique_ptr<NetListenComm> listen(int device, NetHandle* handle) = 0;
  // Connects to the listener described by `handle` from `device`.
  virtual std::unique_ptr<NetSendComm> connect(int device, const NetHandle& handle, SteadyTime deadline,
                                               const std::atomic<bool>* abortFlag) = 0;
  // The same as steps that never wait for the peer's accept (NetConnecting::poll). The default
  // connects whole at once (connect, bounded by deadline and abortFlag), which suits a
  // backend whose connect completes without the acceptor (a TCP connect completes in the
  // listener's backlog, and the IB backend's acceptor answers later on that connection).
  // (Inline, as refuseDmaBuf, for the socket plugin library.)
  virtual std::unique_ptr<NetConnecting> startConnect(int device, const NetHandle& handle, SteadyTime deadline,
                                                      const std::atomic<bool>* abortFlag) {
    class Whole final : public NetConnecting {
     public:
      explicit Whole(std::unique_ptr<NetSendComm> comm) : comm_(std::move(comm)) {}
      std::unique_ptr<NetSendComm> poll() override { return std::move(comm_); }

     private:
      std::unique_ptr<NetSendComm> comm_;
    };
    return std::make_unique<Whole>(connect(device, handle, deadline, abortFlag));
  }
};

// The registry of built-in backends, in order of preference. A backend's factory may throw (no
// device); selection then moves on unless the name was required. The plugins that
// NCCL_NET_PLUGIN loads come before them (plugin/plugin_loader.h).
using NetBackendFactory = std::function<std::unique_ptr<NetBackend>()>;
void registerNetBackend(const std::string& name, NetBackendFactory factory);
std::vector<std::string> netBackendNames();

// The backend to use among the loaded plugins and the built-in backends, in that order:
// `requested` (NCCL_NET or ncclConfig_t.netName; "" = the first that works), `required`
// (TUTTI_NET_REQUIRE: fail rather than fall back). Throws InvalidUsage naming the backends that
// exist when the requested one is unknown, or System when none works.
std::unique_ptr<NetBackend> openNetBackend(const std::string& requested, const std::string& required);

}  // namespace tutti::transport::net
