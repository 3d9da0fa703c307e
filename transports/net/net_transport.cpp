// The net transport: the receiver listens and offers the listener's handle, the sender connects,
// the receiver accepts (both in steps that setup polls, interleaved: a plugin's connect may wait
// for the peer's accept); each side then hands its end to the proxy, which owns the FIFO.
//
// It connects any pair (the fallback when nothing closer is allowed), as long as the host can
// reach the FIFOs: the proxy sends from them and receives into them.
//
// One NIC per ring: a connection of channel c goes through the device the runtime names from the
// topology (the port channel c's ring takes on this node), else device c mod the device count, on
// the receiver's side (the listener) and on the sender's (the connecting device) alike. The
// backend's devices are then the topology's NICs (networkPorts). Not so for Socket: its devices
// are the host's interfaces, which discovery lists already with their PCI places, and every
// connection keeps to its first one, the interface NCCL_SOCKET_IFNAME picks first, which peers
// reach as they reach the bootstrap's.
#include "transports/net/net_transport.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/tunables.h"
#include "transports/net/net.h"
#include "transports/net/net_proxy.h"

namespace tutti::transport::net {
namespace {

static_assert(sizeof(net::NetHandle) <= kConnectionOfferBytes);

// The proxy owns the FIFO and the backend's comm; the connection only points at them.
class NetConnection final : public Connection {
 public:
  NetConnection(kern::FifoHeader* fifo, NetProxy& proxy)
      : Connection(fifo, WakeTarget::proxy(proxy.bell()), std::string("net/") + proxy.backend().name()) {}
};

class NetPendingReceive final : public PendingReceive {
 public:
  NetPendingReceive(NetProxy& proxy, const ConnectionRequest& request, std::unique_ptr<net::NetListenComm> listener)
      : proxy_(proxy), request_(request), listener_(std::move(listener)) {}

  std::unique_ptr<Connection> poll(SteadyTime) override {
    auto recvComm = listener_->acceptIfReady();
    if (!recvComm) return nullptr;
    kern::FifoHeader* fifo =
        proxy_.addRecv(std::move(recvComm), request_.peer, request_.channel, request_.tag, request_.workerBell);
    return std::make_unique<NetConnection>(fifo, proxy_);
  }

 private:
  NetProxy& proxy_;
  ConnectionRequest request_;
  std::unique_ptr<net::NetListenComm> listener_;
};

class NetPendingSend final : public PendingSend {
 public:
  NetPendingSend(NetProxy& proxy, const ConnectionRequest& request, std::unique_ptr<net::NetConnecting> connecting)
      : proxy_(proxy), request_(request), connecting_(std::move(connecting)) {}

  std::unique_ptr<Connection> poll(SteadyTime) override {
    auto sendComm = connecting_->poll();
    if (!sendComm) return nullptr;
    kern::FifoHeader* fifo =
        proxy_.addSend(std::move(sendComm), request_.peer, request_.channel, request_.tag, request_.workerBell);
    return std::make_unique<NetConnection>(fifo, proxy_);
  }

 private:
  NetProxy& proxy_;
  ConnectionRequest request_;
  std::unique_ptr<net::NetConnecting> connecting_;
};

class NetTransport final : public Transport {
 public:
  explicit NetTransport(TransportContext& context) : context_(context) {}

  std::string name() const override { return proxy_ ? std::string("net/") + proxy_->backend().name() : "net"; }
  void drainSends(double seconds) override {
    if (proxy_) proxy_->drain(seconds);
  }
  TransportTraits traits() const override { return {.carriesLL = false, .mapsPeerBuffers = false}; }

  // Its FIFOs are host memory, mapped for executors that have memory of their own (NetProxy::add).
  bool canConnect(const PeerPair&, std::string*) const override { return true; }

  // The backend and the proxy, once per communicator (NCCL_NET, ncclConfig_t.netName, TUTTI_NET_REQUIRE).
  void open() override {
    if (proxy_) return;
    std::string requested = context_.netName();
    if (requested.empty()) requested = tunables::kNet.get();
    proxy_ = std::make_unique<NetProxy>(context_, net::openNetBackend(requested, tunables::kNetRequire.get()));
  }

  std::unique_ptr<PendingReceive> offer(const ConnectionRequest& request, ConnectionOffer* offer) override {
    open();
    net::NetHandle handle{};
    auto listener = proxy_->backend().listen(deviceFor(request, "listens"), &handle);
    std::memset(offer, 0, sizeof *offer);
    std::memcpy(offer->bytes, &handle, sizeof handle);
    return std::make_unique<NetPendingReceive>(*proxy_, request, std::move(listener));
  }

  std::unique_ptr<PendingSend> attach(const ConnectionRequest& request, const ConnectionOffer& offer,
                                      SteadyTime deadline) override {
    open();
    net::NetHandle handle;
    std::memcpy(&handle, offer.bytes, sizeof handle);
    auto connecting =
        proxy_->backend().startConnect(deviceFor(request, "connects"), handle, deadline, &context_.abortFlag());
    return std::make_unique<NetPendingSend>(*proxy_, request, std::move(connecting));
  }

  TransportProxy* proxy() override { return proxy_.get(); }

  Endpoint endpoint() override {
    open();
    net::NetProperties nic = proxy_->backend().properties(0);
    return Endpoint{nic.name, nic.address};
  }

  std::vector<topo::NetPort> networkPorts() override {
    open();
    if (!portPerChannel()) return {};
    std::vector<topo::NetPort> ports;
    for (int d = 0; d < proxy_->backend().deviceCount(); d++) {
      net::NetProperties p = proxy_->backend().properties(d);
      ports.push_back(topo::NetPort{p.name, p.pciPath, p.guid, p.speedMbps, p.port, p.maxComms, p.cudaMemory});
    }
    return ports;
  }

 private:
  // Whether channels spread over the backend's devices, which are then the topology's NICs: every
  // backend's but Socket's (see the top of the file).
  bool portPerChannel() const { return std::string(proxy_->backend().name()) != "Socket"; }

  // The device of the request's channel: the topology's, else the channel's turn among the devices.
  int deviceFor(const ConnectionRequest& request, const char* what) {
    net::NetBackend& backend = proxy_->backend();
    const int count = backend.deviceCount();
    if (!portPerChannel() || count <= 1) return 0;
    int device = request.netDevice;
    if (device < 0 || device >= count) {
      if (device >= count)
        TUTTI_WARN("%s: the topology gives channel %d NIC port %d, but NET/%s has %d device(s); using %d",
                   context_.where().c_str(), request.channel, device, backend.name(), count, request.channel % count);
      device = request.channel % count;
    }
    TUTTI_TRACE(log::Net, "%s: %s: %s on NET/%s device %d (%s)", context_.where().c_str(), request.description.c_str(),
                what, backend.name(), device, backend.properties(device).name.c_str());
    return device;
  }

  TransportContext& context_;
  std::unique_ptr<NetProxy> proxy_;
};

}  // namespace

std::unique_ptr<Transport> makeNetTransport(TransportContext& context) {
  return std::make_unique<NetTransport>(context);
}

}  // namespace tutti::transport::net
