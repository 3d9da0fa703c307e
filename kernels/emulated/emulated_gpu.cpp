// The emulated CUDA driver's model of the machine (emulated_gpu.h).
#include "kernels/emulated/emulated_gpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/tunables.h"
#include "topology/graph.h"

namespace tutti::kern::emulated {

namespace {

std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t at = 0; at <= text.size() && !text.empty();) {
    const size_t end = std::min(text.find(',', at), text.size());
    parts.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> ranges;  // by base
};
Registry& registry() {
  static Registry r;
  return r;
}

thread_local Context* tCurrent = nullptr;
thread_local CUresult tDetailCode = CUDA_SUCCESS;
thread_local std::string tDetail;
thread_local std::string tText;

}  // namespace

Capabilities capabilities() {
  Capabilities c;
  for (const std::string& lack : splitCommas(tunables::kEmulatedLacks.get())) {
    if (lack == "vmm")
      c.vmm = false;
    else if (lack == "posix-fd")
      c.posixFd = false;
    else if (lack == "dmabuf")
      c.dmabuf = false;
    else if (lack == "gdr")
      c.gdr = false;
    else if (lack == "pageable")
      c.pageable = false;
    else if (!lack.empty())
      throw Error(ErrorCode::InvalidUsage, "TUTTI_EMULATED_LACKS: '" + lack +
                                               "' is not a capability the emulated devices can lack "
                                               "(vmm, posix-fd, dmabuf, gdr, pageable)");
  }
  if (tunables::kEmulatedIpc.get() == "handle") c.posixFd = false;
  if (!c.vmm) c.posixFd = false;  // a descriptor exports virtual memory's allocations only
  return c;
}

bool integrated() { return tunables::kEmulatedMemory.get() != "device"; }

std::string busIdOf(int device) {
  const std::vector<std::string> ids = splitCommas(tunables::kEmulatedBusIds.get());
  for (size_t d = 0; d < ids.size(); d++)
    if (!topo::isBusId(ids[d]))
      throw Error(ErrorCode::InvalidUsage, "TUTTI_EMULATED_BUS_IDS: entry " + std::to_string(d) + " '" + ids[d] +
                                               "' is not a PCI bus id (domain:bus:device.function, e.g. 0000:17:00.0)");
  if (device < 0 || size_t(device) >= ids.size()) return "";
  return topo::normalizeBusId(ids[size_t(device)]);
}

bool peerAccessPossible(int a, int b) {
  if (a == b) return true;
  for (const std::string& entry : splitCommas(tunables::kEmulatedNoPeerAccess.get())) {
    const size_t colon = entry.find(':');
    auto number = [](const std::string& digits) {
      return !digits.empty() && digits.size() < 6 && digits.find_first_not_of("0123456789") == std::string::npos
                 ? std::stoi(digits)
                 : -1;
    };
    const int x = colon == std::string::npos ? -1 : number(entry.substr(0, colon));
    const int y = colon == std::string::npos ? -1 : number(entry.substr(colon + 1));
    if (x < 0 || y < 0 || x == y)
      throw Error(ErrorCode::InvalidUsage,
                  "TUTTI_EMULATED_NO_PEER_ACCESS: entry '" + entry +
                      "' is not a pair of two different emulated devices (device:device, e.g. 0:1)");
    if ((x == a && y == b) || (x == b && y == a)) return false;
  }
  return true;
}

void checkEnvironment() {
  capabilities();
  busIdOf(0);
  peerAccessPossible(-1, -2);
}

Context* primaryContext(int device) {
  static Context contexts[kDevices];
  static const bool numbered = [] {
    for (int d = 0; d < kDevices; d++) contexts[d].device = d;
    return true;
  }();
  (void)numbered;
  return device >= 0 && device < kDevices ? &contexts[device] : nullptr;
}

CUresult Context::health() {
  std::lock_guard<std::mutex> lock(mutex);
  return sticky == CUDA_SUCCESS ? CUDA_SUCCESS : fail(sticky, stickyDetail);
}

Context* currentContext() { return tCurrent; }
void setCurrentContext(Context* context) { tCurrent = context; }

Context* contextOf(CUcontext handle) {
  for (int d = 0; d < kDevices; d++)
    if (handleOf(primaryContext(d)) == handle) return primaryContext(d);
  return nullptr;
}

bool addAllocation(void* base, const Allocation& allocation) {
  Registry& r = registry();
  const uintptr_t at = uintptr_t(base);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto after = r.ranges.lower_bound(at);
  if (after != r.ranges.end() && after->first < at + allocation.bytes) return false;
  if (after != r.ranges.begin()) {
    auto before = std::prev(after);
    if (before->first + before->second.bytes > at) return false;
  }
  r.ranges.emplace(at, allocation);
  return true;
}

bool findAllocation(const void* p, uintptr_t* base, Allocation* allocation) {
  Registry& r = registry();
  const uintptr_t at = uintptr_t(p);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto after = r.ranges.upper_bound(at);
  if (after == r.ranges.begin()) return false;
  auto found = std::prev(after);
  if (at >= found->first + std::max<size_t>(found->second.bytes, 1)) return false;
  if (base) *base = found->first;
  if (allocation) *allocation = found->second;
  return true;
}

bool takeAllocation(void* base, unsigned kinds, Allocation* allocation) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto found = r.ranges.find(uintptr_t(base));
  if (found == r.ranges.end() || (kindBit(found->second.kind) & kinds) == 0) return false;
  if (allocation) *allocation = found->second;
  r.ranges.erase(found);
  return true;
}

int ownerOf(const void* p) {
  Allocation a;
  return findAllocation(p, nullptr, &a) ? a.device : -1;
}

size_t deviceAllocations() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return size_t(std::count_if(r.ranges.begin(), r.ranges.end(), [](const auto& entry) {
    return entry.second.kind == Allocation::Kind::Device || entry.second.kind == Allocation::Kind::Mapped;
  }));
}

namespace {
std::atomic<int64_t> gDeviceBytes{0};
}  // namespace

void countDeviceBytes(int64_t delta) { gDeviceBytes.fetch_add(delta, std::memory_order_relaxed); }
size_t deviceBytes() { return size_t(std::max<int64_t>(gDeviceBytes.load(std::memory_order_relaxed), 0)); }

CUresult fail(CUresult code, const std::string& detail) {
  tDetailCode = code;
  tDetail = detail;
  return code;
}

const char* errorName(CUresult code) {
  switch (code) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED";
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_ILLEGAL_STATE: return "CUDA_ERROR_ILLEGAL_STATE";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    default: return nullptr;
  }
}

const char* errorString(CUresult code) {
  const char* base = "unknown error";
  switch (code) {
    case CUDA_SUCCESS: base = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: base = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: base = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: base = "initialization error"; break;
    case CUDA_ERROR_INVALID_DEVICE: base = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: base = "invalid device context"; break;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: base = "peer access is not supported between these two devices"; break;
    case CUDA_ERROR_INVALID_HANDLE: base = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: base = "named symbol not found"; break;
    case CUDA_ERROR_NOT_READY: base = "device not ready"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: base = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: base = "too many resources requested for launch"; break;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: base = "peer access is already enabled"; break;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: base = "peer access has not been enabled"; break;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
      base = "part or all of the requested memory range is already mapped";
      break;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
      base = "pointer does not correspond to a registered memory region";
      break;
    case CUDA_ERROR_NOT_SUPPORTED: base = "operation not supported"; break;
    case CUDA_ERROR_NO_DEVICE: base = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_ILLEGAL_STATE: base = "the operation is not permitted in the current state"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: base = "operation not permitted when stream is capturing"; break;
    default: return nullptr;
  }
  if (code != tDetailCode || tDetail.empty()) return base;
  tText = std::string(base) + " (emulated driver: " + tDetail + ")";
  return tText.c_str();
}

}  // namespace tutti::kern::emulated
