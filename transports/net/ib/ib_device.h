// One IB device port the backend may use: its open context, protection domain, chosen GID, a
// small cache of memory registrations, and the thread that reads the context's async events (a
// port going down or the device failing fails every connection through it).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transports/net/ib/ib_verbs.h"

namespace tutti::transport::net::ib {

class IbDevice {
 public:
  // Opens `device` and queries `port`; throws System naming device:port on failure.
  IbDevice(std::shared_ptr<IbVerbs> verbs, ibv_device* device, int port);
  ~IbDevice();
  IbDevice(const IbDevice&) = delete;
  IbDevice& operator=(const IbDevice&) = delete;

  // Chooses the GID (NCCL_IB_GID_INDEX, or the first routable one on Ethernet); throws naming the
  // index when it does not exist.
  void chooseGid();

  // Decides whether registrations ask for PCI relaxed ordering (NCCL_IB_PCI_RELAXED_ORDERING):
  // where the library has the optional access flags and a probe registration with the flag works.
  // Throws InvalidUsage when the variable requires it (1) and that is not so.
  void chooseRelaxedOrdering();
  bool relaxedOrdering() const { return relaxedOrdering_; }

  // Decides whether device memory can be registered by dmabuf (GPUDirect RDMA): where the library
  // has ibv_reg_dmabuf_mr and a probe call with no descriptor fails for the descriptor (EBADF)
  // rather than for want of support (EOPNOTSUPP, EPROTONOSUPPORT), as NCCL probes it.
  void chooseDmaBuf();
  bool dmaBuf() const { return dmaBuf_; }

  const std::string& name() const { return name_; }  // "mlx5_0:1"
  int port() const { return port_; }
  bool ethernet() const { return attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  bool active() const { return attr_.state == IBV_PORT_ACTIVE; }
  const ibv_port_attr& portAttr() const { return attr_; }
  int gidIndex() const { return gidIndex_; }
  const ibv_gid& gid() const { return gid_; }
  int speedMbps() const;
  // The sysfs directory of the device's PCI function ("" when sysfs does not show one) and the
  // device's system image GUID (what its ports share), for the topology's NIC entries.
  const std::string& pciPath() const { return pciPath_; }
  uint64_t guid() const { return guid_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  IbVerbs& verbs() const { return *verbs_; }

  // A registration covering [data, data + bytes) with local and remote write access, from the
  // cache or new; release() when the request using it is done. Throws naming the range.
  ibv_mr* acquire(const void* data, size_t bytes);
  void release(ibv_mr* mr);
  // Not cached; caller deregisters. `relaxedOrdering` false keeps PCI ordering even where the
  // device uses relaxed ordering: for rings polled by the CPU, whose fields must land in order.
  ibv_mr* registerOwned(void* data, size_t bytes, bool relaxedOrdering = true);
  // Device memory [data, data + bytes) that starts `offset` bytes into the dmabuf `fd`, with local
  // write and remote read and write access, from the cache or new (the cache knows a dmabuf by its
  // file, so that the same range of other memory at a reused address is not taken for it); give it
  // back with deregister(). Throws System naming the device, `peer`, the range, fd and offset.
  ibv_mr* acquireDmaBuf(void* data, size_t bytes, int fd, uint64_t offset, const std::string& peer);
  // Whether `mr` is a dmabuf registration (device memory, which a GDR flush makes visible).
  bool isDmaBuf(const ibv_mr* mr);
  // Ends a registration: a cached one is given back to the cache (release), another deregistered.
  void deregister(ibv_mr* mr);

  // Once an async event said the port went down or the device failed: throws System naming the
  // operation, the peer, device:port and the event. Cheap otherwise (one atomic load).
  void throwIfFailed(const char* operation, const std::string& peer) const {
    if (failed_.load(std::memory_order_acquire)) throwFailure(operation, peer);
  }

 private:
  struct CacheEntry {
    ibv_mr* mr;
    uintptr_t begin, end;
    int users;
    // A dmabuf registration: the descriptor's file and the offset in it at `begin`.
    bool dmaBuf = false;
    uint64_t fileDevice = 0, fileInode = 0, offset = 0;
  };
  void trimCache();  // caller holds mutex_
  static constexpr size_t kCacheEntries = 64;

  void watchEvents();  // the async-event thread's body
  void handleEvent(const ibv_async_event& event);
  [[noreturn]] void throwFailure(const char* operation, const std::string& peer) const;

  std::shared_ptr<IbVerbs> verbs_;
  std::string name_;
  int port_;
  std::string pciPath_;
  uint64_t guid_ = 0;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_port_attr attr_{};
  int gidIndex_ = 0;
  ibv_gid gid_{};
  bool relaxedOrdering_ = false;
  bool dmaBuf_ = false;
  std::mutex mutex_;
  std::list<CacheEntry> cache_;  // most recently used first
  std::atomic<bool> failed_{false};
  std::string failure_;           // what failed it; written once, before failed_ is set
  int stopEvents_[2] = {-1, -1};  // a pipe: the destructor's stop for the event thread
  std::thread events_;
};

std::string gidText(const ibv_gid& gid);

}  // namespace tutti::transport::net::ib
