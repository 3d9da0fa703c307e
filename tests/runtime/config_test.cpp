// Tests of readConfig: defaults, every field, older (2.14 to 2.29) and newer (2.31) ncclConfig_t layouts, bad values.
#include <catch2/catch.hpp>

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/error.h"
#include "runtime/api/config.h"
#include "tests/common/env_support.h"

namespace {

// NCCL_COMM_BLOCKING set (or unset) for one test, the old value put back afterwards.
struct ScopedBlockingEnv : tutti_test::ScopedEnv {
  explicit ScopedBlockingEnv(const char* value) : ScopedEnv("NCCL_COMM_BLOCKING", value) {}
};

// The layouts older NCCL headers declared (taken from each release's nccl.h), to check that
// readConfig reads no more than the caller's header knew about.
struct ConfigV2_14 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
struct ConfigV2_17 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
};
struct ConfigV2_18 {
  ConfigV2_17 upTo2_17;
  int splitShare;
};
static_assert(sizeof(ConfigV2_14) == 24 && sizeof(ConfigV2_17) == 40 && sizeof(ConfigV2_18) == 48);
static_assert(offsetof(ConfigV2_18, splitShare) == offsetof(ncclConfig_t, splitShare));
// 2.26 put trafficClass in what had been 2.18's tail padding: same size, one more field.
static_assert(offsetof(ncclConfig_t, trafficClass) + sizeof(int) == sizeof(ConfigV2_18));

constexpr unsigned char kGarbage = 0xA5;  // as an int: negative, so invalid in every int field

// A buffer as large as a newer header's struct, filled with garbage, holding the fields of
// `layout` at its start (up to fieldBytes: its tail padding stays garbage too). Whatever
// readConfig reads beyond the fields the old header declared is garbage and makes it fail.
template <typename Layout>
struct OldConfig {
  alignas(ncclConfig_t) unsigned char bytes[2 * sizeof(ncclConfig_t)];
  OldConfig(const Layout& layout, size_t fieldBytes) {
    std::memset(bytes, kGarbage, sizeof bytes);
    std::memcpy(bytes, &layout, fieldBytes);
  }
  const ncclConfig_t* get() const { return reinterpret_cast<const ncclConfig_t*>(bytes); }
};

std::string messageOf(const ncclConfig_t* config) {
  try {
    tutti::readConfig(config, "ncclCommInitRankConfig");
  } catch (const tutti::Error& error) {
    CHECK(error.code() == tutti::ErrorCode::InvalidArgument);
    return error.message();
  }
  FAIL("readConfig accepted a bad config");
  return {};
}

}  // namespace

TEST_CASE("config: NULL gives the defaults, blocking from NCCL_COMM_BLOCKING") {
  {
    ScopedBlockingEnv env(nullptr);
    tutti::CommConfig config = tutti::readConfig(nullptr, "test");
    CHECK(config == tutti::CommConfig{});
    CHECK(config.blocking);
    CHECK(config.headerVersion == 0);
    CHECK_FALSE(config.minCTAs.has_value());
    CHECK(config.netName.empty());
    CHECK(config.ctaPolicy == NCCL_CTA_POLICY_DEFAULT);
  }
  {
    ScopedBlockingEnv env("0");
    CHECK_FALSE(tutti::readConfig(nullptr, "test").blocking);
  }
  {
    ScopedBlockingEnv env("1");
    CHECK(tutti::readConfig(nullptr, "test").blocking);
  }
}

TEST_CASE("config: NCCL_CONFIG_INITIALIZER gives the defaults, and a set field wins over the env") {
  ScopedBlockingEnv env("0");
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  tutti::CommConfig config = tutti::readConfig(&user, "test");
  CHECK_FALSE(config.blocking);  // unset in the struct: NCCL_COMM_BLOCKING decides
  // The initializer carries the version of its struct's layout, 2.30.7's (nccl.h says why that
  // differs from NCCL_VERSION_CODE).
  CHECK(config.headerVersion == NCCL_VERSION(2, 30, 7));
  tutti::CommConfig expected;
  expected.blocking = false;
  expected.headerVersion = NCCL_VERSION(2, 30, 7);
  CHECK(config == expected);

  user.blocking = 1;
  CHECK(tutti::readConfig(&user, "test").blocking);
}

TEST_CASE("config: every field is read") {
  ScopedBlockingEnv env(nullptr);
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.blocking = 0;
  user.cgaClusterSize = 2;
  user.minCTAs = 3;
  user.maxCTAs = 5;
  user.netName = "Socket";
  user.splitShare = 1;
  user.trafficClass = 106;
  user.commName = "trainer-dp";
  user.collnetEnable = 1;
  user.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  user.shrinkShare = 1;
  user.nvlsCTAs = 7;
  user.nChannelsPerNetPeer = 9;
  user.nvlinkCentricSched = 1;
  user.graphUsageMode = 2;
  user.numRmaCtx = 4;
  user.maxP2pPeers = 16;
  user.graphStreamOrdering = 1;
  tutti::CommConfig config = tutti::readConfig(&user, "test");
  CHECK_FALSE(config.blocking);
  CHECK(config.cgaClusterSize == 2);
  CHECK(config.minCTAs == 3);
  CHECK(config.maxCTAs == 5);
  CHECK(config.netName == "Socket");
  CHECK(config.splitShare);
  CHECK(config.trafficClass == 106);
  CHECK(config.commName == "trainer-dp");
  CHECK(config.collnetEnable);
  CHECK(config.ctaPolicy == NCCL_CTA_POLICY_ZERO);
  CHECK(config.shrinkShare);
  CHECK(config.nvlsCTAs == 7);
  CHECK(config.nChannelsPerNetPeer == 9);
  CHECK(config.nvlinkCentricSched);
  CHECK(config.graphUsageMode == 2);
  CHECK(config.numRmaCtx == 4);
  CHECK(config.maxP2pPeers == 16);
  CHECK(config.graphStreamOrdering);

  std::string line = tutti::describeConfig(config);
  CHECK(line.find("minCTAs=3") != std::string::npos);
  CHECK(line.find("commName=\"trainer-dp\"") != std::string::npos);
  CHECK(line.find("numRmaCtx=4 maxP2pPeers=16 graphStreamOrdering=1") != std::string::npos);
  CHECK(tutti::describeConfig(tutti::CommConfig{}).find("maxCTAs=unset") != std::string::npos);
}

TEST_CASE("config: a struct not made by NCCL_CONFIG_INITIALIZER is refused, naming the call") {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.magic = 0x12345678;
  std::string message = messageOf(&user);
  CHECK(message.find("ncclCommInitRankConfig") == 0);
  CHECK(message.find("NCCL_CONFIG_INITIALIZER") != std::string::npos);
  CHECK(message.find("0x12345678") != std::string::npos);

  ncclConfig_t zeroed;
  std::memset(&zeroed, 0, sizeof zeroed);
  CHECK(messageOf(&zeroed).find("NCCL_CONFIG_INITIALIZER") != std::string::npos);

  // A plausible size but a zero magic: the usual "declared without an initializer" case.
  zeroed.size = sizeof zeroed;
  CHECK(messageOf(&zeroed).find("magic 0x0") != std::string::npos);
}

TEST_CASE("config: versions before 2.14 and sizes below 2.14's struct are refused") {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.version = NCCL_VERSION(2, 13, 4);
  CHECK(messageOf(&user).find("version") != std::string::npos);

  ncclConfig_t small = NCCL_CONFIG_INITIALIZER;
  small.size = 20;
  CHECK(messageOf(&small).find("size 20") != std::string::npos);
}

TEST_CASE("config: a 2.14 struct: blocking read, padding after it ignored") {
  ScopedBlockingEnv env(nullptr);
  ConfigV2_14 layout{sizeof(ConfigV2_14), 0xcafebeef, NCCL_VERSION(2, 14, 3), 0};
  OldConfig<ConfigV2_14> old(layout, offsetof(ConfigV2_14, blocking) + sizeof(int));
  // The bytes where cgaClusterSize now sits are inside 2.14's size (padding): garbage there.
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK_FALSE(config.blocking);
  CHECK_FALSE(config.cgaClusterSize.has_value());
  CHECK(config.headerVersion == NCCL_VERSION(2, 14, 3));
}

TEST_CASE("config: a 2.17 struct: its fields read, nothing past its size") {
  ScopedBlockingEnv env(nullptr);
  ConfigV2_17 layout{sizeof(ConfigV2_17),
                     0xcafebeef,
                     NCCL_VERSION(2, 17, 1),
                     NCCL_CONFIG_UNDEF_INT,
                     NCCL_CONFIG_UNDEF_INT,
                     2,
                     4,
                     "IB"};
  OldConfig<ConfigV2_17> old(layout, sizeof layout);
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK(config.blocking);
  CHECK_FALSE(config.cgaClusterSize.has_value());
  CHECK(config.minCTAs == 2);
  CHECK(config.maxCTAs == 4);
  CHECK(config.netName == "IB");
  CHECK_FALSE(config.splitShare);
  CHECK(config.commName.empty());
  CHECK_FALSE(config.nvlinkCentricSched);
}

TEST_CASE("config: a 2.18 struct: trafficClass in its tail padding is not read") {
  ConfigV2_18 layout{{sizeof(ConfigV2_18), 0xcafebeef, NCCL_VERSION(2, 18, 5), 1, NCCL_CONFIG_UNDEF_INT,
                      NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, nullptr},
                     1};
  OldConfig<ConfigV2_18> old(layout, offsetof(ConfigV2_18, splitShare) + sizeof(int));
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK(config.splitShare);
  CHECK_FALSE(config.trafficClass.has_value());

  // The same bytes claiming to come from 2.26 would have a (garbage, invalid) trafficClass.
  layout.upTo2_17.version = NCCL_VERSION(2, 26, 2);
  OldConfig<ConfigV2_18> claimed(layout, offsetof(ConfigV2_18, splitShare) + sizeof(int));
  CHECK(messageOf(claimed.get()).find("trafficClass") != std::string::npos);
}

TEST_CASE("config: a 2.28 struct: the fields of 2.29 and 2.30 after it are not read") {
  ScopedBlockingEnv env(nullptr);
  ncclConfig_t layout = NCCL_CONFIG_INITIALIZER;
  layout.size = offsetof(ncclConfig_t, graphUsageMode);  // 2.28's 80 bytes on LP64
  layout.version = NCCL_VERSION(2, 28, 9);
  layout.nvlinkCentricSched = 1;
  OldConfig<ncclConfig_t> old(layout, offsetof(ncclConfig_t, graphUsageMode));
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK(config.nvlinkCentricSched);
  CHECK_FALSE(config.graphUsageMode.has_value());
  CHECK_FALSE(config.numRmaCtx.has_value());
  CHECK_FALSE(config.maxP2pPeers.has_value());
  CHECK_FALSE(config.graphStreamOrdering);
}

TEST_CASE("config: a 2.29 struct: graphUsageMode and numRmaCtx read, 2.30's fields not") {
  ScopedBlockingEnv env(nullptr);
  ncclConfig_t layout = NCCL_CONFIG_INITIALIZER;
  layout.size = offsetof(ncclConfig_t, maxP2pPeers);  // 2.29's 88 bytes on LP64
  layout.version = NCCL_VERSION(2, 29, 7);
  layout.graphUsageMode = 1;
  layout.numRmaCtx = 2;
  OldConfig<ncclConfig_t> old(layout, offsetof(ncclConfig_t, maxP2pPeers));
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK(config.graphUsageMode == 1);
  CHECK(config.numRmaCtx == 2);
  CHECK_FALSE(config.maxP2pPeers.has_value());
  CHECK_FALSE(config.graphStreamOrdering);

  // The same bytes claiming 2.30 but with 2.29's size: still nothing past the size is read.
  layout.version = NCCL_VERSION(2, 30, 7);
  OldConfig<ncclConfig_t> claimed(layout, offsetof(ncclConfig_t, maxP2pPeers));
  CHECK_FALSE(tutti::readConfig(claimed.get(), "test").maxP2pPeers.has_value());
}

TEST_CASE("config: a current version with a short size is read only up to that size") {
  ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
  user.minCTAs = 6;
  user.nvlsCTAs = -5;  // invalid, but beyond the size the caller claims
  user.size = offsetof(ncclConfig_t, netName) + sizeof(const char*);
  tutti::CommConfig config = tutti::readConfig(&user, "test");
  CHECK(config.minCTAs == 6);
  CHECK_FALSE(config.nvlsCTAs.has_value());
}

TEST_CASE("config: a newer, larger struct is accepted and its known fields read") {
  struct NewerConfig {
    ncclConfig_t known;
    int knownAfter2_30[5];  // 2.31's four fields and nvlsHostMode, unset
    int fieldFromTheFuture;
  } newer{NCCL_CONFIG_INITIALIZER,
          {NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
           NCCL_CONFIG_UNDEF_INT},
          12345};
  newer.known.size = sizeof newer;
  newer.known.version = NCCL_VERSION(2, 33, 0);
  newer.known.maxCTAs = 8;
  tutti::CommConfig config = tutti::readConfig(&newer.known, "test");
  CHECK(config.maxCTAs == 8);
  CHECK(config.headerVersion == NCCL_VERSION(2, 33, 0));
}

// NCCL 2.31's struct: 2.30's, then four ints (2.31.2's header); a later header adds nvlsHostMode.
struct ConfigV2_31 {
  ncclConfig_t upTo2_30;
  int launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode;
};
struct ConfigV2_31WithNvls {
  ConfigV2_31 upTo2_31;
  int nvlsHostMode;
};
static_assert(sizeof(ConfigV2_31) == 112 && offsetof(ConfigV2_31, launchOrderImplicit) == 96);
static_assert(offsetof(ConfigV2_31WithNvls, nvlsHostMode) == 112);

TEST_CASE("config: a 2.31 struct: its four new fields read, nothing past its size") {
  ConfigV2_31 layout{NCCL_CONFIG_INITIALIZER, 1, 4, 1, 2};
  layout.upTo2_30.size = sizeof layout;
  layout.upTo2_30.version = NCCL_VERSION(2, 31, 2);
  OldConfig<ConfigV2_31> old(layout, sizeof layout);  // garbage where nvlsHostMode would be
  tutti::CommConfig config = tutti::readConfig(old.get(), "test");
  CHECK(config.launchOrderImplicit);
  CHECK(config.numRmaSig == 4);
  CHECK(config.rmaEagerInit);
  CHECK(config.hostCftMode == 2);
  CHECK_FALSE(config.nvlsHostMode.has_value());

  // The same bytes from a header that says 2.30: its struct ends before them.
  layout.upTo2_30.version = NCCL_VERSION(2, 30, 7);
  OldConfig<ConfigV2_31> older(layout, sizeof layout);
  tutti::CommConfig asOlder = tutti::readConfig(older.get(), "test");
  CHECK_FALSE(asOlder.numRmaSig.has_value());
  CHECK_FALSE(asOlder.launchOrderImplicit);

  // Left unset by the initializer: the defaults.
  ConfigV2_31 unset{NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                    NCCL_CONFIG_UNDEF_INT};
  unset.upTo2_30.size = sizeof unset;
  unset.upTo2_30.version = NCCL_VERSION(2, 31, 2);
  tutti::CommConfig defaults = tutti::readConfig(&unset.upTo2_30, "test");
  CHECK_FALSE(defaults.numRmaSig.has_value());
  CHECK_FALSE(defaults.hostCftMode.has_value());
  CHECK_FALSE(defaults.rmaEagerInit);

  // nvlsHostMode where the size reaches it.
  ConfigV2_31WithNvls withNvls{layout, 3};
  withNvls.upTo2_31.upTo2_30.size = sizeof withNvls;
  withNvls.upTo2_31.upTo2_30.version = NCCL_VERSION(2, 31, 2);
  CHECK(tutti::readConfig(&withNvls.upTo2_31.upTo2_30, "test").nvlsHostMode == 3);
  withNvls.nvlsHostMode = INT_MAX;  // every NVLS part off
  CHECK(tutti::readConfig(&withNvls.upTo2_31.upTo2_30, "test").nvlsHostMode == INT_MAX);
}

TEST_CASE("config: out-of-range values of 2.31's fields are refused, naming the field") {
  struct BadValue {
    const char* field;
    void (*set)(ConfigV2_31WithNvls&);
  };
  const BadValue cases[] = {
      {"launchOrderImplicit", [](ConfigV2_31WithNvls& c) { c.upTo2_31.launchOrderImplicit = 2; }},
      {"numRmaSig", [](ConfigV2_31WithNvls& c) { c.upTo2_31.numRmaSig = -1; }},
      {"rmaEagerInit", [](ConfigV2_31WithNvls& c) { c.upTo2_31.rmaEagerInit = -3; }},
      {"hostCftMode", [](ConfigV2_31WithNvls& c) { c.upTo2_31.hostCftMode = 4; }},
      {"hostCftMode", [](ConfigV2_31WithNvls& c) { c.upTo2_31.hostCftMode = 0; }},
      {"nvlsHostMode", [](ConfigV2_31WithNvls& c) { c.nvlsHostMode = 4; }},
      {"nvlsHostMode", [](ConfigV2_31WithNvls& c) { c.nvlsHostMode = -2; }},
  };
  for (const BadValue& bad : cases) {
    ConfigV2_31WithNvls user{{NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,
                              NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT},
                             NCCL_CONFIG_UNDEF_INT};
    user.upTo2_31.upTo2_30.size = sizeof user;
    user.upTo2_31.upTo2_30.version = NCCL_VERSION(2, 31, 2);
    bad.set(user);
    INFO(bad.field);
    std::string message = messageOf(&user.upTo2_31.upTo2_30);
    CHECK(message.find(std::string("ncclConfig_t.") + bad.field) != std::string::npos);
  }
}

TEST_CASE("config: out-of-range values are refused, naming the field") {
  struct BadValue {
    const char* field;
    void (*set)(ncclConfig_t&);
  };
  const BadValue cases[] = {
      {"blocking", [](ncclConfig_t& c) { c.blocking = 2; }},
      {"cgaClusterSize", [](ncclConfig_t& c) { c.cgaClusterSize = -2; }},
      {"minCTAs", [](ncclConfig_t& c) { c.minCTAs = 0; }},
      {"maxCTAs", [](ncclConfig_t& c) { c.maxCTAs = -1; }},
      {"minCTAs", [](ncclConfig_t& c) { c.minCTAs = 9, c.maxCTAs = 4; }},
      {"splitShare", [](ncclConfig_t& c) { c.splitShare = 3; }},
      {"trafficClass", [](ncclConfig_t& c) { c.trafficClass = 256; }},
      {"collnetEnable", [](ncclConfig_t& c) { c.collnetEnable = -1; }},
      {"CTAPolicy", [](ncclConfig_t& c) { c.CTAPolicy = 7; }},
      {"shrinkShare", [](ncclConfig_t& c) { c.shrinkShare = 2; }},
      {"nvlsCTAs", [](ncclConfig_t& c) { c.nvlsCTAs = 0; }},
      {"nChannelsPerNetPeer", [](ncclConfig_t& c) { c.nChannelsPerNetPeer = 65; }},
      {"nvlinkCentricSched", [](ncclConfig_t& c) { c.nvlinkCentricSched = 5; }},
      {"graphUsageMode", [](ncclConfig_t& c) { c.graphUsageMode = 3; }},
      {"numRmaCtx", [](ncclConfig_t& c) { c.numRmaCtx = -1; }},
      {"maxP2pPeers", [](ncclConfig_t& c) { c.maxP2pPeers = 0; }},
      {"graphStreamOrdering", [](ncclConfig_t& c) { c.graphStreamOrdering = 2; }},
  };
  for (const BadValue& bad : cases) {
    ncclConfig_t user = NCCL_CONFIG_INITIALIZER;
    bad.set(user);
    INFO(bad.field);
    std::string message = messageOf(&user);
    CHECK(message.find(std::string("ncclConfig_t.") + bad.field) != std::string::npos);
  }
}
