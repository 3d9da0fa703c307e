// The IB backend: device discovery (NCCL_IB_HCA, NCCL_IB_DISABLE), properties, listen and connect.
#include "transports/net/ib/ib_backend.h"

#include <cstring>
#include <random>

#include "base/error.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/tunables.h"
#include "transports/net/ib/ib_comms.h"
#include "transports/net/ib/ib_device.h"
#include "transports/net/ib/ib_hca_filter.h"
#include "transports/net/ib/ib_verbs.h"

namespace tutti::transport::net {
namespace {

using ib::IbDevice;

struct IbHandleLayout {
  uint64_t magic;
  uint64_t nonce;
  uint8_t address[SocketAddress::kWireBytes];
};
static_assert(sizeof(IbHandleLayout) <= kNetHandleBytes, "the IB handle must fit a net handle");

class IbBackend final : public NetBackend {
 public:
  IbBackend(std::shared_ptr<ib::IbVerbs> verbs, std::vector<std::shared_ptr<IbDevice>> devices, SocketAddress address)
      : verbs_(std::move(verbs)), devices_(std::move(devices)), address_(address) {}

  const char* name() const override { return "IB"; }
  int deviceCount() override { return int(devices_.size()); }

  NetProperties properties(int device) override {
    IbDevice& d = deviceOf(device);
    NetProperties p;
    p.name = d.name();
    p.port = d.port();
    p.pciPath = d.pciPath();
    p.guid = d.guid();
    p.speedMbps = d.speedMbps();
    p.hostMemory = true;
    // GPUDirect RDMA only through dmabuf (no peer-memory module path): device memory is reached
    // where the library and device register it by its descriptor.
    p.dmaBuf = d.dmaBuf();
    p.cudaMemory = d.dmaBuf();
    p.maxRecvs = 1;
    p.maxMessageBytes = UINT32_MAX;  // the size travels as 32-bit immediate data
    p.latencyUs = 0;
    p.address = ib::gidText(d.gid());
    return p;
  }

  std::unique_ptr<NetListenComm> listen(int device, NetHandle* handle) override {
    std::shared_ptr<IbDevice> d = devices_.at(size_t(checked(device)));
    Socket listener = Socket::listen(address_);
    IbHandleLayout layout{};
    layout.magic = ib::kIbHandleMagic;
    std::random_device random;
    layout.nonce = (uint64_t(random()) << 32) | random();
    listener.localAddress().toWire(layout.address);
    std::memset(handle->bytes, 0, kNetHandleBytes);
    std::memcpy(handle->bytes, &layout, sizeof layout);
    return ib::makeIbListenComm(d, std::move(listener), layout.nonce);
  }

  std::unique_ptr<NetSendComm> connect(int device, const NetHandle& handle, SteadyTime deadline,
                                       const std::atomic<bool>* abortFlag) override {
    std::shared_ptr<IbDevice> d = devices_.at(size_t(checked(device)));
    IbHandleLayout layout;
    std::memcpy(&layout, handle.bytes, sizeof layout);
    if (layout.magic != ib::kIbHandleMagic)
      throw Error(ErrorCode::Remote, "NET/IB: a listener's handle is not an IB backend's");
    SocketAddress remote = SocketAddress::fromWire(layout.address);
    Socket socket = Socket::connect(remote, deadline, abortFlag, true);  // offered open: a refusal is final
    return ib::makeIbSendComm(d, std::move(socket), remote.toString(), layout.nonce, deadline, abortFlag);
  }

 private:
  int checked(int device) const {
    if (device < 0 || size_t(device) >= devices_.size())
      throw Error(ErrorCode::InvalidArgument,
                  "NET/IB: no device " + std::to_string(device) + " (" + std::to_string(devices_.size()) + " exist)");
    return device;
  }
  IbDevice& deviceOf(int device) { return *devices_[size_t(checked(device))]; }

  std::shared_ptr<ib::IbVerbs> verbs_;  // outlives the devices (declared first, destroyed last)
  std::vector<std::shared_ptr<IbDevice>> devices_;
  SocketAddress address_;  // where listeners take the TCP connections that set QPs up
};

}  // namespace

std::unique_ptr<NetBackend> makeIbBackend() {
  if (tunables::kIbDisable.get()) throw Error(ErrorCode::System, "NET/IB: disabled by NCCL_IB_DISABLE");
  if (int64_t qps = tunables::kIbQpsPerConnection.get(); qps < 1 || qps > ib::kMaxQps)
    throw Error(ErrorCode::InvalidUsage, "NET/IB: NCCL_IB_QPS_PER_CONNECTION=" + std::to_string(qps) +
                                             " is not between 1 and " + std::to_string(ib::kMaxQps));
  if (int64_t ar = tunables::kIbAdaptiveRouting.get(); ar < -1 || ar > 1)
    throw Error(ErrorCode::InvalidUsage,
                "NET/IB: NCCL_IB_ADAPTIVE_ROUTING=" + std::to_string(ar) + " is not 0, 1 or -1 (unset)");
  std::shared_ptr<ib::IbVerbs> verbs;
  try {
    verbs = ib::loadIbVerbs();
  } catch (const Error& e) {
    TUTTI_INFO(log::Net, "NET/IB: IB is unavailable: %s", e.what());
    throw;
  }
  ib::HcaFilter filter(tunables::kIbHca.get());
  std::vector<std::shared_ptr<IbDevice>> devices;
  std::string seen;
  int count = 0;
  ibv_device** list = verbs->getDeviceList(&count);
  if (!list) throw Error(ErrorCode::System, "NET/IB: ibv_get_device_list: " + std::string(strerror(errno)));
  try {
    for (int i = 0; i < count; ++i) {
      std::string name = verbs->getDeviceName(list[i]);
      ibv_context* probe = verbs->openDevice(list[i]);
      ibv_device_attr attr{};
      int ports = 0;
      if (probe && verbs->queryDevice(probe, &attr) == 0) ports = attr.phys_port_cnt;
      if (probe) verbs->closeDevice(probe);
      for (int port = 1; port <= ports; ++port) {
        seen += (seen.empty() ? "" : ", ") + name + ":" + std::to_string(port);
        if (!filter.accepts(name, port)) continue;
        auto device = std::make_shared<IbDevice>(verbs, list[i], port);
        if (!device->active()) {
          TUTTI_INFO(log::Net, "NET/IB: %s is not active (state %d)", device->name().c_str(),
                     int(device->portAttr().state));
          continue;
        }
        device->chooseGid();
        device->chooseRelaxedOrdering();
        device->chooseDmaBuf();
        TUTTI_INFO(log::Net, "NET/IB: %s, %s, %d Mb/s, GID index %d %s, relaxed ordering %s, dmabuf %s",
                   device->name().c_str(), device->ethernet() ? "RoCE" : "InfiniBand", device->speedMbps(),
                   device->gidIndex(), ib::gidText(device->gid()).c_str(), device->relaxedOrdering() ? "on" : "off",
                   device->dmaBuf() ? "on" : "off");
        devices.push_back(std::move(device));
      }
    }
  } catch (...) {
    verbs->freeDeviceList(list);
    throw;
  }
  verbs->freeDeviceList(list);
  if (devices.empty())
    throw Error(
        ErrorCode::System,
        "NET/IB: no active port" +
            std::string(tunables::kIbHca.get().empty() ? "" : " matches NCCL_IB_HCA=" + tunables::kIbHca.get()) +
            " (ports seen: " + (seen.empty() ? "none" : seen) + ", through " + verbs->path + ")");
  // The TCP side channel that sets QPs up goes over the bootstrap's interface choice.
  std::vector<NetworkInterface> interfaces = findNetworkInterfaces();
  if (interfaces.empty())
    throw Error(ErrorCode::System, "NET/IB: no network interface for the connection set-up channel");
  return std::make_unique<IbBackend>(std::move(verbs), std::move(devices), interfaces.front().address);
}

}  // namespace tutti::transport::net
