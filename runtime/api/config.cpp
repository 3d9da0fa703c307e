// Reading a user's ncclConfig_t safely, whatever NCCL header version (2.14 to 2.31) it was compiled with.
#include "runtime/api/config.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/tunables.h"

namespace tutti {

namespace {

constexpr unsigned int kConfigMagic = 0xcafebeef;
constexpr unsigned int kOldestVersion = NCCL_VERSION(2, 14, 0);
// Every header since 2.14 declares at least this much (2.14's struct is this size with padding).
constexpr size_t kSmallestSize = offsetof(ncclConfig_t, cgaClusterSize) + sizeof(int);
// A name longer than this is taken as a pointer to something that is not a name.
constexpr size_t kLongestName = 4096;
// NCCL's own limit on channels per peer; larger values were never valid in any NCCL.
constexpr int kMostChannelsPerNetPeer = 64;

// The header version in which each field first appeared. NCCL only ever appends fields, but a
// new field can land in what was tail padding of the older struct (trafficClass sits in the
// padding of 2.18's struct, which had the same size), so size alone cannot tell whether a
// field was declared: version must agree too.
constexpr unsigned int kSince2_14 = NCCL_VERSION(2, 14, 0);  // blocking
constexpr unsigned int kSince2_17 = NCCL_VERSION(2, 17, 0);  // cgaClusterSize, min/maxCTAs, netName
constexpr unsigned int kSince2_18 = NCCL_VERSION(2, 18, 0);  // splitShare
constexpr unsigned int kSince2_26 = NCCL_VERSION(2, 26, 0);  // trafficClass
constexpr unsigned int kSince2_27 = NCCL_VERSION(2, 27, 0);  // commName .. nvlsCTAs
constexpr unsigned int kSince2_28 = NCCL_VERSION(2, 28, 0);  // nChannelsPerNetPeer, nvlinkCentricSched
constexpr unsigned int kSince2_29 = NCCL_VERSION(2, 29, 0);  // graphUsageMode, numRmaCtx
constexpr unsigned int kSince2_30 = NCCL_VERSION(2, 30, 0);  // maxP2pPeers, graphStreamOrdering
constexpr unsigned int kSince2_31 = NCCL_VERSION(2, 31, 0);  // launchOrderImplicit .. nvlsHostMode

// What headers after 2.30 append to the struct, in their order: 2.31's launchOrderImplicit,
// numRmaSig, rmaEagerInit and hostCftMode, then nvlsHostMode. This library's nccl.h declares
// 2.30's struct, so these are read from the caller's bytes past it, as far as its size reaches.
struct FieldsAfter2_30 {
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
};
constexpr size_t kEndOf2_30 = offsetof(ncclConfig_t, graphStreamOrdering) + sizeof(int);
static_assert(kEndOf2_30 == sizeof(ncclConfig_t), "2.30's struct has no tail padding for a newer field to fill");
// The values 2.31's enums allow (ncclHostCftMode_t, ncclNvlsHostMode_t).
constexpr int kHostCftEnable = 1, kHostCftFallback = 3;
constexpr int kNvlsHostModeAllComponents = (1 << 0) | (1 << 1), kNvlsHostModeDisableAll = INT_MAX;

[[noreturn]] void throwInvalid(const char* operation, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + what);
}

std::string hex(unsigned int value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", value);
  return text;
}

// The caller's struct, copied only as far as the caller's header declared it.
class UserConfig {
 public:
  UserConfig(const ncclConfig_t* config, const char* operation) : operation_(operation) {
    // Read `size` first and nothing beyond it: an older struct may end right there.
    std::memcpy(&size_, config, sizeof size_);
    constexpr size_t kThroughVersion = offsetof(ncclConfig_t, version) + sizeof(unsigned int);
    if (size_ < kThroughVersion)
      throwInvalid(operation, "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (size " +
                                  std::to_string(size_) + ")");
    std::memcpy(&copy_, config, size_ < sizeof copy_ ? size_ : sizeof copy_);
    if (size_ > kEndOf2_30)
      std::memcpy(&after_, reinterpret_cast<const char*>(config) + kEndOf2_30,
                  std::min(size_ - kEndOf2_30, sizeof after_));
    if (copy_.magic != kConfigMagic)
      throwInvalid(operation, "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (magic " +
                                  hex(copy_.magic) + ", expected " + hex(kConfigMagic) + ")");
    if (copy_.version < kOldestVersion)
      throwInvalid(operation, "ncclConfig_t.version " + std::to_string(copy_.version) +
                                  " is older than the oldest supported, 2.14 (" + std::to_string(kOldestVersion) + ")");
    if (size_ < kSmallestSize)
      throwInvalid(operation, "ncclConfig_t.size " + std::to_string(size_) +
                                  " is smaller than any NCCL header's ncclConfig_t (" + std::to_string(kSmallestSize) +
                                  " bytes)");
  }

  unsigned int version() const { return copy_.version; }

  // An int field, or nullopt when the caller's header lacked it or the caller left it unset.
  std::optional<int> integer(int ncclConfig_t::*member, unsigned int since) const {
    if (!declared(member, since) || copy_.*member == NCCL_CONFIG_UNDEF_INT) return std::nullopt;
    return copy_.*member;
  }

  // A field of a header after 2.30 (FieldsAfter2_30), as integer() reads those of 2.30's struct.
  std::optional<int> later(int FieldsAfter2_30::*member) const {
    const size_t offset = kEndOf2_30 + static_cast<size_t>(reinterpret_cast<const char*>(&(after_.*member)) -
                                                           reinterpret_cast<const char*>(&after_));
    if (copy_.version < kSince2_31 || offset + sizeof(int) > size_ || after_.*member == NCCL_CONFIG_UNDEF_INT)
      return std::nullopt;
    return after_.*member;
  }

  // A string field, empty when absent, unset or NULL.
  std::string name(const char* ncclConfig_t::*member, unsigned int since, const char* field) const {
    if (!declared(member, since) || copy_.*member == NCCL_CONFIG_UNDEF_PTR) return {};
    const char* text = copy_.*member;
    size_t length = strnlen(text, kLongestName + 1);
    if (length > kLongestName)
      throwInvalid(operation_, std::string("ncclConfig_t.") + field + " is longer than " +
                                   std::to_string(kLongestName) + " characters (not a string?)");
    return std::string(text, length);
  }

 private:
  template <typename T>
  bool declared(T ncclConfig_t::*member, unsigned int since) const {
    size_t offset =
        static_cast<size_t>(reinterpret_cast<const char*>(&(copy_.*member)) - reinterpret_cast<const char*>(&copy_));
    return copy_.version >= since && offset + sizeof(T) <= size_;
  }

  const char* operation_;
  size_t size_ = 0;
  ncclConfig_t copy_{};
  FieldsAfter2_30 after_{};
};

bool readFlag(const char* operation, const char* field, std::optional<int> value, bool fallback) {
  if (!value) return fallback;
  if (*value != 0 && *value != 1)
    throwInvalid(operation,
                 std::string("ncclConfig_t.") + field + " is " + std::to_string(*value) + "; it must be 0 or 1");
  return *value == 1;
}

std::optional<int> readAtLeast(const char* operation, const char* field, std::optional<int> value, int lowest,
                               int highest = INT_MAX) {
  if (value && (*value < lowest || *value > highest))
    throwInvalid(operation, std::string("ncclConfig_t.") + field + " is " + std::to_string(*value) +
                                "; it must be between " + std::to_string(lowest) + " and " + std::to_string(highest));
  return value;
}

bool defaultBlocking() { return tunables::kCommBlocking.get(); }

}  // namespace

CommConfig readConfig(const ncclConfig_t* config, const char* operation) {
  if (operation == nullptr) operation = "ncclConfig_t";
  CommConfig result;
  result.blocking = defaultBlocking();
  if (config == nullptr) return result;

  UserConfig user(config, operation);
  result.headerVersion = user.version();
  result.blocking = readFlag(operation, "blocking", user.integer(&ncclConfig_t::blocking, kSince2_14), result.blocking);
  result.cgaClusterSize =
      readAtLeast(operation, "cgaClusterSize", user.integer(&ncclConfig_t::cgaClusterSize, kSince2_17), 0);
  result.minCTAs = readAtLeast(operation, "minCTAs", user.integer(&ncclConfig_t::minCTAs, kSince2_17), 1);
  result.maxCTAs = readAtLeast(operation, "maxCTAs", user.integer(&ncclConfig_t::maxCTAs, kSince2_17), 1);
  if (result.minCTAs && result.maxCTAs && *result.minCTAs > *result.maxCTAs)
    throwInvalid(operation, "ncclConfig_t.minCTAs (" + std::to_string(*result.minCTAs) +
                                ") is larger than ncclConfig_t.maxCTAs (" + std::to_string(*result.maxCTAs) + ")");
  result.netName = user.name(&ncclConfig_t::netName, kSince2_17, "netName");
  result.splitShare = readFlag(operation, "splitShare", user.integer(&ncclConfig_t::splitShare, kSince2_18), false);
  result.trafficClass =
      readAtLeast(operation, "trafficClass", user.integer(&ncclConfig_t::trafficClass, kSince2_26), 0, 255);
  result.commName = user.name(&ncclConfig_t::commName, kSince2_27, "commName");
  result.collnetEnable =
      readFlag(operation, "collnetEnable", user.integer(&ncclConfig_t::collnetEnable, kSince2_27), false);
  result.ctaPolicy = readAtLeast(operation, "CTAPolicy", user.integer(&ncclConfig_t::CTAPolicy, kSince2_27),
                                 NCCL_CTA_POLICY_DEFAULT, NCCL_CTA_POLICY_ZERO)
                         .value_or(NCCL_CTA_POLICY_DEFAULT);
  result.shrinkShare = readFlag(operation, "shrinkShare", user.integer(&ncclConfig_t::shrinkShare, kSince2_27), false);
  result.nvlsCTAs = readAtLeast(operation, "nvlsCTAs", user.integer(&ncclConfig_t::nvlsCTAs, kSince2_27), 1);
  result.nChannelsPerNetPeer =
      readAtLeast(operation, "nChannelsPerNetPeer", user.integer(&ncclConfig_t::nChannelsPerNetPeer, kSince2_28), 1,
                  kMostChannelsPerNetPeer);
  result.nvlinkCentricSched =
      readFlag(operation, "nvlinkCentricSched", user.integer(&ncclConfig_t::nvlinkCentricSched, kSince2_28), false);
  result.graphUsageMode =
      readAtLeast(operation, "graphUsageMode", user.integer(&ncclConfig_t::graphUsageMode, kSince2_29), 0, 2);
  result.numRmaCtx = readAtLeast(operation, "numRmaCtx", user.integer(&ncclConfig_t::numRmaCtx, kSince2_29), 0);
  result.maxP2pPeers = readAtLeast(operation, "maxP2pPeers", user.integer(&ncclConfig_t::maxP2pPeers, kSince2_30), 1);
  result.graphStreamOrdering =
      readFlag(operation, "graphStreamOrdering", user.integer(&ncclConfig_t::graphStreamOrdering, kSince2_30), false);
  result.launchOrderImplicit =
      readFlag(operation, "launchOrderImplicit", user.later(&FieldsAfter2_30::launchOrderImplicit), false);
  result.numRmaSig = readAtLeast(operation, "numRmaSig", user.later(&FieldsAfter2_30::numRmaSig), 0);
  result.rmaEagerInit = readFlag(operation, "rmaEagerInit", user.later(&FieldsAfter2_30::rmaEagerInit), false);
  result.hostCftMode = readAtLeast(operation, "hostCftMode", user.later(&FieldsAfter2_30::hostCftMode), kHostCftEnable,
                                   kHostCftFallback);
  result.nvlsHostMode = user.later(&FieldsAfter2_30::nvlsHostMode);
  if (result.nvlsHostMode && *result.nvlsHostMode != kNvlsHostModeDisableAll &&
      (*result.nvlsHostMode < 0 || *result.nvlsHostMode > kNvlsHostModeAllComponents))
    throwInvalid(operation, "ncclConfig_t.nvlsHostMode is " + std::to_string(*result.nvlsHostMode) +
                                "; it must be a combination of the ncclNvlsHostMode_t flags (0 to " +
                                std::to_string(kNvlsHostModeAllComponents) + ") or ncclNvlsHostModeDisable");
  return result;
}

std::string describeConfig(const CommConfig& config) {
  auto number = [](const std::optional<int>& value) { return value ? std::to_string(*value) : std::string("unset"); };
  auto quoted = [](const std::string& text) { return text.empty() ? std::string("unset") : '"' + text + '"'; };
  return "blocking=" + std::to_string(config.blocking) + " cgaClusterSize=" + number(config.cgaClusterSize) +
         " minCTAs=" + number(config.minCTAs) + " maxCTAs=" + number(config.maxCTAs) +
         " netName=" + quoted(config.netName) + " splitShare=" + std::to_string(config.splitShare) +
         " trafficClass=" + number(config.trafficClass) + " commName=" + quoted(config.commName) +
         " collnetEnable=" + std::to_string(config.collnetEnable) + " CTAPolicy=" + std::to_string(config.ctaPolicy) +
         " shrinkShare=" + std::to_string(config.shrinkShare) + " nvlsCTAs=" + number(config.nvlsCTAs) +
         " nChannelsPerNetPeer=" + number(config.nChannelsPerNetPeer) +
         " nvlinkCentricSched=" + std::to_string(config.nvlinkCentricSched) +
         " graphUsageMode=" + number(config.graphUsageMode) + " numRmaCtx=" + number(config.numRmaCtx) +
         " maxP2pPeers=" + number(config.maxP2pPeers) +
         " graphStreamOrdering=" + std::to_string(config.graphStreamOrdering) +
         " launchOrderImplicit=" + std::to_string(config.launchOrderImplicit) +
         " numRmaSig=" + number(config.numRmaSig) + " rmaEagerInit=" + std::to_string(config.rmaEagerInit) +
         " hostCftMode=" + number(config.hostCftMode) + " nvlsHostMode=" + number(config.nvlsHostMode);
}

}  // namespace tutti
