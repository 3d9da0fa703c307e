// Tests of the external net-plugin loader and adapter, with tutti's own plugin (its Socket backend
// built as libnccl-net-tutti.so, ncclNetPlugin_v10) and the same shim exporting only
// ncclNetPlugin_v6: loading by path, messages through the adapter, NCCL_NET_PLUGIN's syntax,
// entries that are skipped (with the INFO line saying why), NCCL_NET's choice among plugins and
// built-in backends; device memory by dmabuf through a plugin that takes it (the same shim over the
// IB backend, on the verbs stand-in), and refused where a plugin does not.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/common/env_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/log_support.h"
#include "tests/common/net_pair_support.h"
#include "transports/net/net.h"
#include "transports/net/plugin/plugin_backend.h"
#include "transports/net/plugin/plugin_loader.h"

namespace tutti::transport::net {
namespace {

using tutti_test::ScopedEnv;

const char* const kPluginV10 = TUTTI_TEST_NET_PLUGIN;
const char* const kPluginV6 = TUTTI_TEST_NET_PLUGIN_V6;
const char* const kPluginIb = TUTTI_TEST_NET_PLUGIN_IB;
const char* const kPluginIbV6 = TUTTI_TEST_NET_PLUGIN_IB_V6;
const char* const kPluginV12 = TUTTI_TEST_NET_PLUGIN_V12;

// The IB test plugin's (`library`'s) counts of regMrDmaBuf calls that registered and iflush calls that flushed,
// and the verbs stand-in's of dmabuf registrations and RDMA reads, in this process.
struct DmaBufCounts {
  uint64_t pluginRegistrations = 0, pluginFlushes = 0, verbsRegistrations = 0, verbsReads = 0;
};
DmaBufCounts dmaBufCounts(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library != nullptr);
  auto plugin = reinterpret_cast<void (*)(uint64_t*, uint64_t*)>(dlsym(library, "tutti_test_plugin_dmabuf_counters"));
  dlclose(library);
  auto verbs =
      tutti_test::loadedStandinSymbol<void (*)(uint64_t*, uint64_t*, uint64_t*)>("tutti_standin_dmabuf_counters");
  REQUIRE((plugin != nullptr && verbs != nullptr));
  DmaBufCounts c;
  plugin(&c.pluginRegistrations, &c.pluginFlushes);
  verbs(&c.verbsRegistrations, nullptr, &c.verbsReads);
  return c;
}

NetPlugin loadOne(const char* path) {
  std::vector<NetPlugin> plugins = openNetPlugins({path});
  REQUIRE(plugins.size() == 1);
  return plugins[0];
}

// Messages of many sizes, a registered buffer, and several in flight, through a backend.
void checkMessages(NetBackend& backend) {
  REQUIRE(backend.deviceCount() >= 1);
  NetProperties p = backend.properties(0);
  CHECK(p.name == "lo");
  CHECK(p.hostMemory);
  CHECK_FALSE(p.cudaMemory);
  CHECK(p.maxRecvs == 1);
  CHECK(p.maxMessageBytes == (size_t(1) << 30));
  tutti_test::NetPair pair = tutti_test::connectNetPair(backend);
  uint32_t seed = 7;
  for (size_t bytes : {size_t(0), size_t(1), size_t(4097), size_t(1 << 20) + 3}) {
    INFO(bytes << " bytes");
    std::vector<char> out = tutti_test::randomBytes(bytes, seed++), in(bytes + 64, 'x');
    REQUIRE(tutti_test::exchangeOverNet(pair, out, in) == bytes);  // test() reports what arrived, not the capacity
    CHECK((bytes == 0 || std::memcmp(in.data(), out.data(), bytes) == 0));
    CHECK(in[bytes] == 'x');
  }
  // Registered memory, as the proxy registers its FIFOs: the handles travel with the messages.
  std::vector<char> out = tutti_test::randomBytes(100000, 99), in(100000, 0);
  MemoryRegistration sendReg = pair.send->registerMemory(out.data(), out.size());
  MemoryRegistration recvReg = pair.recv->registerMemory(in.data(), in.size());
  CHECK(tutti_test::exchangeOverNet(pair, out, in, sendReg, recvReg) == out.size());
  CHECK(in == out);
  pair.send->deregisterMemory(sendReg);
  pair.recv->deregisterMemory(recvReg);
  // Several in flight; each request wrapper is reused once its test reported it done.
  for (int round = 0; round < 2; round++) {
    std::vector<std::vector<char>> outs, ins;
    std::vector<NetRequest*> sends, recvs;
    for (int i = 0; i < 6; i++) {
      outs.push_back(tutti_test::randomBytes(size_t(30000 * i + 11), uint32_t(1000 * round + i)));
      ins.emplace_back(outs.back().size());
    }
    for (int i = 0; i < 6; i++) {
      NetRequest* r = pair.recv->irecv(ins[size_t(i)].data(), ins[size_t(i)].size(), 0, {});
      NetRequest* s = pair.send->isend(outs[size_t(i)].data(), outs[size_t(i)].size(), 0, {});
      REQUIRE((r != nullptr && s != nullptr));
      recvs.push_back(r);
      sends.push_back(s);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int i = 0; i < 6; i++) {
      size_t got = 0;
      while (!pair.recv->test(recvs[size_t(i)], &got)) {
        for (auto& s : sends)
          if (s && pair.send->test(s, nullptr)) s = nullptr;
        REQUIRE(std::chrono::steady_clock::now() < deadline);
      }
      CHECK(got == outs[size_t(i)].size());
      CHECK(ins[size_t(i)] == outs[size_t(i)]);
    }
    for (auto& s : sends)
      while (s && !pair.send->test(s, nullptr)) REQUIRE(std::chrono::steady_clock::now() < deadline);
  }
}

}  // namespace

TEST_CASE("net/plugin: tutti's plugin loads by path as v10 and carries messages through the adapter", "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  NetPlugin plugin = loadOne(kPluginV10);
  CHECK(std::string(plugin.net->name()) == "TuttiSocket");
  CHECK(plugin.net->version() == 10);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  CHECK(std::string(backend->name()) == "TuttiSocket");
  checkMessages(*backend);
}

TEST_CASE("net/plugin: a library exporting only ncclNetPlugin_v6 loads as v6 and carries messages", "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  NetPlugin plugin = loadOne(kPluginV6);
  CHECK(std::string(plugin.net->name()) == "TuttiSocketV6");
  CHECK(plugin.net->version() == 6);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  checkMessages(*backend);
  // A second backend (another communicator) shares the once-per-process initialisation.
  auto again = makePluginBackend(plugin.net, plugin.library);
  tutti_test::NetPair pair = tutti_test::connectNetPair(*again);
  std::vector<char> out = tutti_test::randomBytes(5000, 3), in(5000);
  CHECK(tutti_test::exchangeOverNet(pair, out, in) == 5000);
  CHECK(in == out);
}

TEST_CASE("net/plugin: a library exporting only ncclNetPlugin_v12 (NCCL 2.30) loads as v12 and carries messages",
          "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  NetPlugin plugin = loadOne(kPluginV12);
  CHECK(std::string(plugin.net->name()) == "TuttiSocketV12");
  CHECK(plugin.net->version() == 12);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  checkMessages(*backend);
  // What the v12 properties said, through the adapter: the layout line's stand-in for an address.
  NetProperties p = backend->properties(0);
  CHECK(p.address.find("plugin port") != std::string::npos);
  CHECK(p.address.find("Mbps") != std::string::npos);
}

TEST_CASE("net/plugin: a test() that leaves sizes unwritten reports 0, as NCCL's zeroed sizes stay", "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv noSizes("TUTTI_SOCKET_PLUGIN_NO_SIZES", "1");
  NetPlugin plugin = loadOne(kPluginV10);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  tutti_test::NetPair pair = tutti_test::connectNetPair(*backend);
  std::vector<char> out = tutti_test::randomBytes(3000, 5), in(4096);
  // The adapter passes the plugin's silence on (0), never a stale value; the proxy does not rely on it.
  CHECK(tutti_test::exchangeOverNet(pair, out, in) == 0);
  CHECK(std::memcmp(in.data(), out.data(), out.size()) == 0);
}

TEST_CASE("net/plugin: a device's maxComms is held to: a comm beyond it is refused, naming the limit",
          "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  ScopedEnv maxComms("TUTTI_SOCKET_PLUGIN_MAX_COMMS", "3");
  NetPlugin plugin = loadOne(kPluginV10);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  REQUIRE(backend->properties(0).maxComms == 3);
  std::atomic<bool> abort{false};
  {
    tutti_test::NetPair pair = tutti_test::connectNetPair(*backend);  // two comms
    NetHandle handle{};
    auto listener = backend->listen(0, &handle);
    auto third = backend->connect(0, handle, deadlineAfter(10), &abort);
    std::string error = tutti_test::errorOf([&] { listener->accept(deadlineAfter(10), &abort); });
    INFO(error);
    CHECK(error.find("maxComms of 3") != std::string::npos);
  }
  // Closed comms give their places back.
  tutti_test::NetPair again = tutti_test::connectNetPair(*backend);
  std::vector<char> out = tutti_test::randomBytes(100, 1), in(100);
  CHECK(tutti_test::exchangeOverNet(again, out, in) == 100);
}

TEST_CASE("net/plugin: an accept with no peer returns at once when asked to, else ends at its deadline or on abort",
          "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  NetPlugin plugin = loadOne(kPluginV10);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  NetHandle handle{};
  auto listener = backend->listen(0, &handle);
  auto start = std::chrono::steady_clock::now();
  CHECK(listener->acceptIfReady() == nullptr);  // the plugin's accept does not wait for the peer
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  std::atomic<bool> abort{false};
  try {
    listener->accept(deadlineAfter(0.2), &abort);
    FAIL("accept returned without a peer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(std::string(e.what()).find("NET/Plugin TuttiSocket (") != std::string::npos);
  }
  abort = true;
  CHECK_THROWS_MATCHES(listener->accept(deadlineAfter(30), &abort), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::Aborted; }));
}

TEST_CASE("net/plugin: NCCL_NET_PLUGIN names a plugin, a file, a path, a list, or none", "[net][plugin]") {
  using Names = std::vector<std::string>;
  CHECK(netPluginEntries(std::nullopt) == Names{"libnccl-net.so"});  // unset: the default library, if present
  CHECK(netPluginEntries(std::string("none")).empty());
  CHECK(netPluginEntries(std::string("NONE")).empty());
  CHECK(netPluginEntries(std::string("")).empty());
  CHECK(netPluginEntries(std::string("tutti")) == Names{"tutti"});
  CHECK(netPluginEntries(std::string("a,,/opt/x/libnccl-net-b.so,c")) == Names{"a", "/opt/x/libnccl-net-b.so", "c"});
  CHECK(netPluginFileNames("tutti") == Names{"tutti", "libnccl-net-tutti.so"});
  CHECK(netPluginFileNames("libnccl-net-tutti.so") ==
        Names{"libnccl-net-tutti.so"});                              // a library name is used as it is
  CHECK(netPluginFileNames("./plugin.so") == Names{"./plugin.so"});  // so is a path
  CHECK(netPluginFileNames("/opt/x/libfoo.so") == Names{"/opt/x/libfoo.so"});
  CHECK(netPluginFileNames("foo.so") == Names{"foo.so", "libnccl-net-foo.so.so"});  // as NCCL: not lib*.so, so a name
}

TEST_CASE("net/plugin: entries that do not open, or export no known version, are skipped with an INFO line",
          "[net][plugin]") {
  tutti_test::CapturedLog log("INFO", "NET");
  // A missing plugin, a library that is no plugin, and a good one: only the good one loads.
  std::vector<NetPlugin> plugins = openNetPlugins({"tutti-test-absent", "libm.so.6", kPluginV10});
  REQUIRE(plugins.size() == 1);
  CHECK(std::string(plugins[0].net->name()) == "TuttiSocket");
  auto missing = log.linesWith("\"tutti-test-absent\" could not be opened, skipped");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].find("libnccl-net-tutti-test-absent.so") != std::string::npos);  // the name form was tried too
  CHECK(log.linesWith("libm.so.6 (from NCCL_NET_PLUGIN entry \"libm.so.6\") exports no ncclNetPlugin_v6..v12: skipped")
            .size() == 1);
  // Opened once per process: asking again neither reopens nor logs again.
  CHECK(openNetPlugins({"tutti-test-absent", kPluginV10}).size() == 1);
  CHECK(log.linesWith("\"tutti-test-absent\" could not be opened").size() == 1);
}

TEST_CASE("net/plugin: a plugin that fails to initialise is skipped with an INFO line naming it and why",
          "[net][plugin]") {
  // A copy of the library under another name is a library of its own, not yet initialised in
  // this process whatever the tests before this one did (a plugin initialises once).
  std::filesystem::path copy =
      std::filesystem::temp_directory_path() / ("libnccl-net-initfail-" + std::to_string(getpid()) + ".so");
  std::filesystem::copy_file(kPluginV6, copy, std::filesystem::copy_options::overwrite_existing);
  struct Remove {
    std::filesystem::path path;
    ~Remove() { std::filesystem::remove(path); }
  } removeCopy{copy};
  tutti_test::CapturedLog log("INFO", "NET");
  ScopedEnv plugin("NCCL_NET_PLUGIN", copy.c_str());
  // No interface matches, so the plugin's Socket backend (and then tutti's own) cannot start.
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "=tutti-no-such-interface0");
  try {
    openNetBackend("", "");
    FAIL("a backend opened without interfaces");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::System);
    CHECK(std::string(e.what()).find("TuttiSocketV6") != std::string::npos);
    CHECK(std::string(e.what()).find("Socket: ") != std::string::npos);
  }
  auto skipped = log.linesWith("NET: backend TuttiSocketV6 is not usable");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].find(copy.string()) != std::string::npos);
  CHECK(skipped[0].find("init failed") != std::string::npos);
}

TEST_CASE("net/plugin: NCCL_NET picks among the loaded plugins and the built-in backends by name", "[net][plugin]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  {
    ScopedEnv plugin("NCCL_NET_PLUGIN", (std::string(kPluginV6) + "," + kPluginV10).c_str());
    CHECK(std::string(openNetBackend("", "")->name()) == "TuttiSocketV6");  // plugins first, in the list's order
    CHECK(std::string(openNetBackend("tuttisocket", "")->name()) == "TuttiSocket");
    CHECK(std::string(openNetBackend("Socket", "")->name()) == "Socket");
    CHECK(std::string(openNetBackend("", "TuttiSocket")->name()) == "TuttiSocket");
    try {
      openNetBackend("NoSuchNet", "");
      FAIL("an unknown backend was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidUsage);
      CHECK(std::string(e.what()).find(
                "NCCL_NET=NoSuchNet: no such network backend (available: TuttiSocketV6, TuttiSocket, Socket, IB") !=
            std::string::npos);
    }
  }
  ScopedEnv none("NCCL_NET_PLUGIN", "none");
  CHECK(std::string(openNetBackend("", "")->name()) == "Socket");
  try {
    openNetBackend("TuttiSocket", "");
    FAIL("a plugin was used with NCCL_NET_PLUGIN=none");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("(available: Socket, IB;") != std::string::npos);
  }
}

TEST_CASE(
    "net/plugin: a plugin reporting NCCL_PTR_CUDA and NCCL_PTR_DMABUF takes device memory through regMrDmaBuf, "
    "and receives into it are flushed through iflush",
    "[net][plugin][dmabuf]") {
  tutti_test::IbStandinEnv standin;
  // The v10 table, and the v6 one (the oldest the adapter takes): both have the calls.
  const char* path = nullptr;
  int version = 0;
  SECTION("v10") {
    path = kPluginIb;
    version = 10;
  }
  SECTION("v6") {
    path = kPluginIbV6;
    version = 6;
  }
  NetPlugin plugin = loadOne(path);
  CHECK(std::string(plugin.net->name()) == (version == 10 ? "TuttiIB" : "TuttiIBV6"));
  CHECK(plugin.net->version() == version);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  REQUIRE(backend->deviceCount() >= 1);
  NetProperties p = backend->properties(0);
  CHECK(p.dmaBuf);
  CHECK(p.cudaMemory);
  auto pair = tutti_test::connectNetPair(*backend);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  tutti_test::MemfdMemory source(3), target(3);
  const size_t bytes = page + 77;
  std::vector<char> expected = tutti_test::randomBytes(bytes, 5);
  std::memcpy(source.data + 16, expected.data(), bytes);
  const DmaBufCounts before = dmaBufCounts(path);
  MemoryRegistration sr = pair.send->registerDmaBuf(source.data + 16, bytes, source.fd, 16);
  MemoryRegistration rr = pair.recv->registerDmaBuf(target.data + page, bytes, target.fd, page);
  const DmaBufCounts registered = dmaBufCounts(path);
  CHECK(registered.pluginRegistrations == before.pluginRegistrations + 2);
  CHECK(registered.verbsRegistrations == before.verbsRegistrations + 2);
  REQUIRE(tutti_test::exchangeOverNet(pair, source.data + 16, bytes, target.data + page, bytes, sr, rr) == bytes);
  CHECK(std::memcmp(target.data + page, expected.data(), bytes) == 0);
  // The flush of a receive into device memory is the plugin's iflush, an RDMA read underneath.
  pair.recv->flush(target.data + page, bytes, rr);
  const DmaBufCounts flushed = dmaBufCounts(path);
  CHECK(flushed.pluginFlushes == registered.pluginFlushes + 1);
  CHECK(flushed.verbsReads == registered.verbsReads + 1);
  // A receive into host memory is not flushed (the plugin does not ask for forceFlush).
  std::vector<char> host(64);
  MemoryRegistration hr = pair.recv->registerMemory(host.data(), host.size());
  pair.recv->flush(host.data(), host.size(), hr);
  CHECK(dmaBufCounts(path).pluginFlushes == flushed.pluginFlushes);
  pair.recv->deregisterMemory(hr);
  pair.send->deregisterMemory(sr);
  pair.recv->deregisterMemory(rr);
}

TEST_CASE("net/plugin: a plugin that declares host memory only reports no dmabuf, and its regMrDmaBuf refuses",
          "[net][plugin][dmabuf]") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "lo");
  NetPlugin plugin = loadOne(kPluginV10);
  auto backend = makePluginBackend(plugin.net, plugin.library);
  NetProperties p = backend->properties(0);
  CHECK_FALSE(p.dmaBuf);
  CHECK_FALSE(p.cudaMemory);
  auto pair = tutti_test::connectNetPair(*backend);
  tutti_test::MemfdMemory memory(1);
  const std::string error =
      tutti_test::errorOf([&] { pair.recv->registerDmaBuf(memory.data, memory.bytes, memory.fd, 0); });
  CHECK(error.find("regMrDmaBuf") != std::string::npos);
  CHECK(error.find("TuttiSocket") != std::string::npos);
}

}  // namespace tutti::transport::net
