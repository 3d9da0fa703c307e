// IB device ports: opening, GID choice, speed, the registration cache, and async events.
#include "transports/net/ib/ib_device.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"

namespace tutti::transport::net::ib {

std::string gidText(const ibv_gid& gid) {
  char text[48];
  const uint8_t* r = gid.raw;
  snprintf(text, sizeof text, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0], r[1],
           r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
  return text;
}

IbDevice::IbDevice(std::shared_ptr<IbVerbs> verbs, ibv_device* device, int port)
    : verbs_(std::move(verbs)), port_(port) {
  name_ = std::string(verbs_->getDeviceName(device)) + ":" + std::to_string(port);
  context_ = verbs_->openDevice(device);
  if (!context_) throw Error(ErrorCode::System, "NET/IB: ibv_open_device " + name_ + ": " + strerror(errno));
  int rc = verbs_->queryPort(context_, uint8_t(port), &attr_);
  // As NCCL places an HCA: its ibdev_path's device link resolved to the PCI function.
  char resolved[PATH_MAX];
  if (device->ibdev_path[0] != '\0' && realpath((std::string(device->ibdev_path) + "/device").c_str(), resolved))
    pciPath_ = resolved;
  ibv_device_attr deviceAttr{};
  if (rc == 0 && verbs_->queryDevice(context_, &deviceAttr) == 0) guid_ = be64toh(deviceAttr.sys_image_guid);
  if (rc == 0) pd_ = verbs_->allocPd(context_);
  if (rc != 0 || !pd_) {
    verbs_->closeDevice(context_);
    throw Error(ErrorCode::System, "NET/IB: " + std::string(rc ? "ibv_query_port " : "ibv_alloc_pd ") + name_ + ": " +
                                       strerror(rc ? rc : errno));
  }
  // The event thread polls async_fd and a stop pipe; async_fd is made nonblocking so that taking
  // the events never waits.
  int flags = fcntl(context_->async_fd, F_GETFL);
  if (flags < 0 || fcntl(context_->async_fd, F_SETFL, flags | O_NONBLOCK) != 0 || pipe2(stopEvents_, O_CLOEXEC) != 0) {
    int e = errno;
    verbs_->deallocPd(pd_);
    verbs_->closeDevice(context_);
    throw Error(ErrorCode::System, "NET/IB: setting up the async-event thread of " + name_ + ": " + strerror(e));
  }
  events_ = std::thread([this] { watchEvents(); });
}

void IbDevice::watchEvents() {
  for (;;) {
    pollfd fds[2] = {{context_->async_fd, POLLIN, 0}, {stopEvents_[0], POLLIN, 0}};
    int ready = ::poll(fds, 2, 1000);  // the stop pipe ends it; the timeout only bounds the wait
    if (ready < 0 && errno != EINTR) {
      TUTTI_WARN("NET/IB: %s: polling the async-event descriptor failed (%s): port failures are no longer noticed",
                 name_.c_str(), strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    ibv_async_event event{};
    while (verbs_->getAsyncEvent(context_, &event) == 0) {
      handleEvent(event);
      verbs_->ackAsyncEvent(&event);  // every event taken is acknowledged
    }
  }
}

void IbDevice::handleEvent(const ibv_async_event& event) {
  const char* what = verbs_->eventTypeStr(event.event_type);
  bool fatal = event.event_type == IBV_EVENT_DEVICE_FATAL ||
               (event.event_type == IBV_EVENT_PORT_ERR && event.element.port_num == port_);
  if (!fatal) {
    TUTTI_INFO(log::Net, "NET/IB: %s: async event %s (%d)", name_.c_str(), what, int(event.event_type));
    return;
  }
  if (failed_.load(std::memory_order_acquire)) return;
  failure_ = std::string(event.event_type == IBV_EVENT_PORT_ERR ? "port " + std::to_string(port_) + " went down"
                                                                : "the device failed") +
             " (async event " +
             (event.event_type == IBV_EVENT_PORT_ERR ? "IBV_EVENT_PORT_ERR" : "IBV_EVENT_DEVICE_FATAL") + ": " + what +
             ")";
  failed_.store(true, std::memory_order_release);
  TUTTI_WARN("NET/IB: %s: %s; the connections through it fail", name_.c_str(), failure_.c_str());
}

void IbDevice::throwFailure(const char* operation, const std::string& peer) const {
  throw Error(ErrorCode::System,
              std::string("NET/IB: ") + operation + " with " + peer + " on " + name_ + ": " + failure_);
}

IbDevice::~IbDevice() {
  char stop = 1;
  (void)!::write(stopEvents_[1], &stop, 1);
  events_.join();
  ::close(stopEvents_[0]);
  ::close(stopEvents_[1]);
  for (CacheEntry& e : cache_) verbs_->deregMr(e.mr);
  verbs_->deallocPd(pd_);
  verbs_->closeDevice(context_);
}

void IbDevice::chooseGid() {
  int wanted = int(tunables::kIbGidIndex.get());
  if (wanted >= 0) {
    if (int rc = verbs_->queryGid(context_, uint8_t(port_), wanted, &gid_))
      throw Error(ErrorCode::InvalidArgument, "NET/IB: " + name_ + ": NCCL_IB_GID_INDEX=" + std::to_string(wanted) +
                                                  " does not exist (the port has " + std::to_string(attr_.gid_tbl_len) +
                                                  " GIDs; ibv_query_gid: " + strerror(rc) + ")");
    gidIndex_ = wanted;
    return;
  }
  gidIndex_ = 0;
  verbs_->queryGid(context_, uint8_t(port_), 0, &gid_);
  if (!ethernet()) return;
  // RoCE: prefer a routable GID (not fe80::/64 link-local, not empty), as RoCE v2 needs.
  for (int i = 0; i < attr_.gid_tbl_len; ++i) {
    ibv_gid g{};
    if (verbs_->queryGid(context_, uint8_t(port_), i, &g) != 0) continue;
    static const uint8_t zero[16] = {};
    if (std::memcmp(g.raw, zero, 16) == 0 || (g.raw[0] == 0xfe && g.raw[1] == 0x80)) continue;
    gidIndex_ = i;
    gid_ = g;
    return;
  }
}

int IbDevice::speedMbps() const {
  int perLane;  // Mb/s, by the active_speed code
  switch (attr_.active_speed) {
    case 1: perLane = 2500; break;
    case 2: perLane = 5000; break;
    case 4:
    case 8: perLane = 10000; break;
    case 16: perLane = 14000; break;
    case 32: perLane = 25000; break;
    case 64: perLane = 50000; break;
    case 128: perLane = 100000; break;
    default: perLane = 0;
  }
  int lanes;
  switch (attr_.active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: lanes = 1;
  }
  return perLane * lanes;
}

void IbDevice::chooseRelaxedOrdering() {
  int64_t mode = tunables::kIbPciRelaxedOrdering.get();
  if (mode < 0 || mode > 2)
    throw Error(ErrorCode::InvalidUsage,
                "NET/IB: NCCL_IB_PCI_RELAXED_ORDERING=" + std::to_string(mode) + " is not 0, 1 or 2");
  relaxedOrdering_ = false;
  if (mode == 0) return;
  // Relaxed ordering is an optional access flag: libraries that know the optional range drop it
  // where the device or kernel cannot honour it; older ones refuse it. Probe once with a small buffer.
  std::string why;
  if (!verbs_->regMrIova2) {
    why = verbs_->path + " lacks ibv_reg_mr_iova2 (no optional access flags)";
  } else {
    std::vector<char> probe(64);
    ibv_mr* mr = verbs_->regMrIova2(pd_, probe.data(), probe.size(), uint64_t(uintptr_t(probe.data())),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
    if (mr)
      verbs_->deregMr(mr);
    else
      why = std::string("ibv_reg_mr_iova2 with IBV_ACCESS_RELAXED_ORDERING failed: ") + strerror(errno);
  }
  if (why.empty()) {
    relaxedOrdering_ = true;
    return;
  }
  if (mode == 1)
    throw Error(ErrorCode::InvalidUsage,
                "NET/IB: " + name_ + ": NCCL_IB_PCI_RELAXED_ORDERING=1 requires relaxed ordering, but " + why);
  TUTTI_INFO(log::Net, "NET/IB: %s: registrations without relaxed ordering: %s", name_.c_str(), why.c_str());
}

ibv_mr* IbDevice::registerOwned(void* data, size_t bytes, bool relaxedOrdering) {
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = relaxedOrdering_ && relaxedOrdering ? verbs_->regMrIova2(pd_, data, bytes, uint64_t(uintptr_t(data)),
                                                                        kAccess | IBV_ACCESS_RELAXED_ORDERING)
                                                   : verbs_->regMr(pd_, data, bytes, kAccess);
  if (!mr) {
    char range[64];
    snprintf(range, sizeof range, "%p + %zu bytes", data, bytes);
    throw Error(ErrorCode::System, "NET/IB: ibv_reg_mr on " + name_ + " of " + range + ": " + strerror(errno));
  }
  return mr;
}

void IbDevice::deregister(ibv_mr* mr) {
  if (!mr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (CacheEntry& e : cache_)
      if (e.mr == mr) {
        --e.users;
        return;
      }
  }
  verbs_->deregMr(mr);
}

bool IbDevice::isDmaBuf(const ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const CacheEntry& e : cache_)
    if (e.mr == mr) return e.dmaBuf;
  return false;
}

void IbDevice::chooseDmaBuf() {
  dmaBuf_ = false;
  std::string why;
  if (!verbs_->regDmabufMr) {
    why = verbs_->path + " lacks ibv_reg_dmabuf_mr";
  } else {
    errno = 0;
    ibv_mr* probe = verbs_->regDmabufMr(pd_, 0, 0, 0, -1, 0);
    if (probe) verbs_->deregMr(probe);
    if (!probe && (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT))
      why = std::string("ibv_reg_dmabuf_mr is not supported by the device or kernel (") + strerror(errno) + ")";
  }
  dmaBuf_ = why.empty();
  if (!dmaBuf_) TUTTI_INFO(log::Net, "NET/IB: %s: no GPUDirect RDMA through dmabuf: %s", name_.c_str(), why.c_str());
}

ibv_mr* IbDevice::acquireDmaBuf(void* data, size_t bytes, int fd, uint64_t offset, const std::string& peer) {
  char range[160];
  snprintf(range, sizeof range, "%p + %zu bytes (dmabuf fd %d at offset %llu)", data, bytes, fd,
           (unsigned long long)offset);
  auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::System,
                "NET/IB: ibv_reg_dmabuf_mr on " + name_ + " for " + peer + " of " + range + ": " + why);
  };
  if (!dmaBuf_) fail("the device cannot register memory by dmabuf (its properties report dmaBuf=false)");
  struct stat file {};
  if (fstat(fd, &file) != 0) fail(strerror(errno));
  uintptr_t begin = uintptr_t(data), end = begin + bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->dmaBuf && it->fileDevice == uint64_t(file.st_dev) && it->fileInode == uint64_t(file.st_ino) &&
        it->begin <= begin && end <= it->end && it->offset + (begin - it->begin) == offset) {
      ++it->users;
      cache_.splice(cache_.begin(), cache_, it);
      return it->mr;
    }
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (relaxedOrdering_) access |= IBV_ACCESS_RELAXED_ORDERING;
  ibv_mr* mr = verbs_->regDmabufMr(pd_, offset, bytes, uint64_t(begin), fd, access);
  if (!mr) fail(strerror(errno));
  cache_.push_front({mr, begin, end, 1, true, uint64_t(file.st_dev), uint64_t(file.st_ino), offset});
  trimCache();
  return mr;
}

ibv_mr* IbDevice::acquire(const void* data, size_t bytes) {
  uintptr_t begin = uintptr_t(data), end = begin + bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->begin <= begin && end <= it->end) {
      ++it->users;
      cache_.splice(cache_.begin(), cache_, it);
      return it->mr;
    }
  // Register whole pages, so that neighbouring buffers hit the same entry.
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t alignedBegin = begin & ~(page - 1), alignedEnd = (end + page - 1) & ~(page - 1);
  ibv_mr* mr = registerOwned(reinterpret_cast<void*>(alignedBegin), alignedEnd - alignedBegin);
  cache_.push_front({mr, alignedBegin, alignedEnd, 1});
  trimCache();
  return mr;
}

void IbDevice::trimCache() {
  // Keep the cache small: drop the least recently used entries nobody uses.
  for (auto it = cache_.end(); cache_.size() > kCacheEntries && it != cache_.begin();) {
    --it;
    if (it->users == 0) {
      verbs_->deregMr(it->mr);
      it = cache_.erase(it);
    }
  }
}

void IbDevice::release(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (CacheEntry& e : cache_)
    if (e.mr == mr) {
      --e.users;
      return;
    }
}

}  // namespace tutti::transport::net::ib
