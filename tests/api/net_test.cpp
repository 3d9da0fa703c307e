// Ranks on different hosts (NCCL_HOSTID per process, TCP over loopback): every collective through
// the network transport, mixed with local and shm connections, rank 0's layout line, hostile
// connections to the transport's ports during init, and the faults the network brings: a killed
// rank, an abort from another thread, destroy after a failure.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/log_support.h"
#include "transports/net/net.h"
#include "transports/net/socket/socket_backend.h"
#include "tutti/tutti.h"

using tutti_test::allCases;
using tutti_test::CapturedLog;
using tutti_test::Case;
using tutti_test::check;
using tutti_test::Coll;
using tutti_test::HostLayout;
using tutti_test::runAll;
using tutti_test::runOnHosts;

namespace {

const std::pair<std::string, std::string> kLoopback{"NCCL_SOCKET_IFNAME", "lo"};

// Small counts of every collective, type and op, and a few large ones that take many FIFO laps.
std::vector<Case> netCases(int nranks, bool everyOp) {
  std::vector<Case> cases;
  for (const Case& c : allCases({0, 1, 7, 1023}, nranks))
    if (everyOp || c.op == ncclSum || c.op == ncclAvg) cases.push_back(c);
  for (Coll coll :
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::AlltoAll, Coll::SendRecv})
    cases.push_back(Case{coll, ncclFloat32, ncclSum, (1u << 20) + 3, false, 1 % nranks});
  return cases;
}

std::string hostnameOfThisMachine() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return std::string(name).substr(0, 63);  // as RankInfo carries it
}

// A Socket backend whose every listener, before its handle is given to the peer, receives what an
// attacker could send to its port: random bytes, a hello with the wrong secret, a truncated hello,
// and a hello with absurd socket index and count followed by an absurd message length. The real
// peer's sockets queue behind them, so accept() must get past all four.
class HostileSocketBackend : public tutti::transport::net::NetBackend {
 public:
  static constexpr int kAttacksPerListener = 4;

  const char* name() const override { return "HostileSocket"; }
  int deviceCount() override { return real_->deviceCount(); }
  tutti::transport::net::NetProperties properties(int device) override { return real_->properties(device); }
  std::unique_ptr<tutti::transport::net::NetSendComm> connect(int device,
                                                              const tutti::transport::net::NetHandle& handle,
                                                              tutti::SteadyTime deadline,
                                                              const std::atomic<bool>* abortFlag) override {
    return real_->connect(device, handle, deadline, abortFlag);
  }
  std::unique_ptr<tutti::transport::net::NetListenComm> listen(int device,
                                                               tutti::transport::net::NetHandle* handle) override {
    auto listener = real_->listen(device, handle);
    attack(tutti::transport::net::readSocketHandle(*handle));
    return listener;
  }

 private:
  static void attack(const tutti::transport::net::SocketHandleContents& target) {
    using tutti::transport::net::SocketHello;
    std::atomic<bool> abort{false};
    auto send = [&](const void* data, size_t bytes) {
      tutti::Socket socket = tutti::Socket::connect(target.address, tutti::deadlineAfter(5), &abort);
      socket.sendAll(data, bytes, tutti::deadlineAfter(5), &abort);
    };  // closed here: the listener finds the bytes, then the end of the stream
    std::vector<char> noise(4096);
    std::mt19937 random(uint32_t(target.address.port()));
    for (char& c : noise) c = char(random());
    send(noise.data(), noise.size());
    SocketHello wrongSecret{tutti::transport::net::kSocketHelloMagic, target.nonce ^ 0x5a5aull, 0, target.nsocks};
    send(&wrongSecret, sizeof wrongSecret);
    SocketHello truncated{tutti::transport::net::kSocketHelloMagic, target.nonce, 0, target.nsocks};
    send(&truncated, sizeof truncated / 2);
    struct {
      SocketHello hello;
      uint64_t length;
    } absurd{{tutti::transport::net::kSocketHelloMagic, target.nonce, ~0u, ~0u}, uint64_t(1) << 62};
    send(&absurd, sizeof absurd);
    tutti::log::write(tutti::log::Level::Info, tutti::log::Net, __FILE__, __LINE__,
                      "test attacker: %d hostile connections sent to %s", kAttacksPerListener,
                      target.address.toString().c_str());
  }
  std::unique_ptr<tutti::transport::net::NetBackend> real_ = tutti::transport::net::makeSocketBackend();
};

}  // namespace

TEST_CASE("net: rank 0 logs the layout: ranks, nodes, transports, each node's interface and address",
          "[net][processes][log]") {
  struct Expected {
    int hosts, ranksPerHost, threadsPerProcess;
    const char* intraNode;
  };
  for (Expected e : {Expected{2, 2, 1, "shm"}, Expected{3, 2, 2, "local"}}) {
    CapturedLog log;
    HostLayout layout;
    layout.hosts = e.hosts;
    layout.ranksPerHost = e.ranksPerHost;
    layout.threadsPerProcess = e.threadsPerProcess;
    layout.environment = {kLoopback};
    // What the perf tool's fingerprint reports: the transports this rank's peers are reached by.
    std::string transports = std::string(e.intraNode) == "shm" ? "net/Socket+shm" : "local+net/Socket";
    auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
      char names[64];
      int nodes = 0;
      TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
      tutti_test::check(names == transports && nodes == e.hosts,
                        "rank " + std::to_string(rank) + ": tuttiCommTransports gave \"" + names + "\" on " +
                            std::to_string(nodes) + " nodes, expected \"" + transports + "\" on " +
                            std::to_string(e.hosts));
    });
    REQUIRE(tutti_test::failuresOf(outcomes) == "");

    std::string expected = "layout: " + std::to_string(e.hosts * e.ranksPerHost) + " ranks on " +
                           std::to_string(e.hosts) + " nodes, intra-node " + e.intraNode + ", inter-node net/Socket";
    for (int n = 0; n < e.hosts; n++)
      expected += "; node " + std::to_string(n) + " " + hostnameOfThisMachine() + " (" +
                  std::to_string(e.ranksPerHost) + " ranks, lo 127.0.0.1)";
    auto lines = log.linesWith("layout: ");
    REQUIRE(lines.size() == 1);  // rank 0 only
    INFO(lines[0]);
    CHECK(lines[0].size() >= expected.size());
    CHECK(lines[0].compare(lines[0].size() - expected.size(), expected.size(), expected) == 0);
    CHECK(lines[0].find(" NCCL INFO comm 0x") != std::string::npos);
  }
}

TEST_CASE("net: ranks alone on their hosts get 1 MiB FIFO slots, cut into 512 KiB chunks below 32 MiB",
          "[net][processes][slots]") {
  struct Expected {
    int ranksPerHost;
    std::vector<std::pair<std::string, std::string>> environment;
    const char* fifo;  // as rank 0's init line states it
  };
  std::vector<Expected> layouts = {{1, {}, "FIFO 4 x 1024 KiB"},
                                   {2, {}, "FIFO 8 x 512 KiB"},  // shared memory inside a host: the default slots
                                   {1, {{"NCCL_BUFFSIZE", "4194304"}}, "FIFO 8 x 512 KiB"}};  // set: it stands
  for (const Expected& e : layouts) {
    CapturedLog log;
    HostLayout layout;
    layout.ranksPerHost = e.ranksPerHost;
    layout.environment = e.environment;
    layout.environment.push_back(kLoopback);
    // Below and above the 32 MiB where whole 1 MiB slots start (tiling::chunkBytesFor); all-gather's
    // operation is its output, 2 x 5 MiB.
    std::vector<Case> cases = {Case{Coll::AllReduce, ncclFloat32, ncclSum, (5u << 18) + 3, false, 0},
                               Case{Coll::AllReduce, ncclFloat32, ncclSum, (33u << 18) + 5, true, 0},
                               Case{Coll::AllReduce, ncclFloat64, ncclMax, (33u << 17) + 1, false, 0},
                               Case{Coll::AllGather, ncclInt32, ncclSum, (5u << 18) + 7, false, 0}};
    if (e.ranksPerHost > 1) cases.resize(2);
    auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
    REQUIRE(tutti_test::failuresOf(outcomes) == "");
    auto lines = log.linesWith(" nranks ");
    REQUIRE(lines.size() >= 1);
    INFO(lines[0]);
    CHECK(lines[0].find(e.fifo) != std::string::npos);
  }
}

// Pins this process (and the rank processes it starts, which inherit the set) to the first CPU
// of its set for the scope; the whole set comes back at the end.
class OnOneCore {
 public:
  OnOneCore() {
    REQUIRE(sched_getaffinity(0, sizeof saved_, &saved_) == 0);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
      if (CPU_ISSET(c, &saved_)) first = c;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  }
  ~OnOneCore() { sched_setaffinity(0, sizeof saved_, &saved_); }
  OnOneCore(const OnOneCore&) = delete;
  OnOneCore& operator=(const OnOneCore&) = delete;

 private:
  cpu_set_t saved_;
};

TEST_CASE(
    "net: between hosts, up to 32 MiB, the selector runs no more channels than a rank has cores (one core: one "
    "channel)",
    "[net][processes][tuning]") {
  // The rank processes inherit this process's CPU set; the calibration at init takes each host's
  // cores from its ranks' sets.
  OnOneCore pinned;

  CapturedLog log("INFO", "TUNING");
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = {kLoopback, {"NCCL_MAX_NCHANNELS", "4"}};
  std::vector<Case> cases = {Case{Coll::AllReduce, ncclFloat32, ncclSum, (1u << 20) + 3, false, 0}};
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
  size_t choices = 0;
  for (const std::string& line : log.linesWith(" -> ")) {
    if (line.find("size -> choice") != std::string::npos) continue;  // a table's header
    // "TUNING allreduce   32 MiB -> ring (1) ...": the size is the two words before the arrow
    std::istringstream words(line.substr(0, line.find(" -> ")));
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    REQUIRE(w.size() >= 2);
    double bytes = std::stod(w[w.size() - 2]) * (w.back() == "B"     ? 1
                                                 : w.back() == "KiB" ? 1 << 10
                                                 : w.back() == "MiB" ? 1 << 20
                                                                     : 1 << 30);
    INFO(line);
    if (bytes > double(32 << 20)) continue;  // there the model chooses freely
    CHECK(line.find("( 1)") != std::string::npos);
    choices++;
  }
  CHECK(choices > 20);  // every collective's table, every size
  CHECK(log.linesWith("1 core(s) per host").size() == 1);
}

// The number after `label` in `line` (e.g. "network one way " -> 42.46), or -1.
double numberAfter(const std::string& line, const std::string& label) {
  size_t at = line.find(label);
  return at == std::string::npos ? -1 : std::stod(line.substr(at + label.size()));
}

TEST_CASE("net: the network's one-way time is measured at init, agreed by every rank and used by the model",
          "[net][processes][tuning][calibration]") {
  for (const char* calibrate : {"1", "0"}) {
    DYNAMIC_SECTION("TUTTI_CALIBRATE=" << calibrate) {
      CapturedLog log("INFO", "TUNING");
      HostLayout layout;  // 2 hosts x 2 ranks: two pairs time the network at once
      layout.environment = {kLoopback, {"TUTTI_CALIBRATE", calibrate}};
      auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
        // Every rank's model must hold the same figure, or their choices (and collectives) part.
        double mine = comm->planning.selector->fabric().network.latencyUs;
        std::vector<double> all(size_t(n), 0.0);
        all[size_t(rank)] = mine;
        comm->identity.bootstrap->allGather(all.data(), sizeof(double));
        for (int r = 0; r < n; r++)
          check(all[size_t(r)] == mine, "rank " + std::to_string(r) + " has a network latency of " +
                                            std::to_string(all[size_t(r)]) + " us, rank " + std::to_string(rank) + " " +
                                            std::to_string(mine));
        check(mine > 0 && mine < 1e6, "network latency " + std::to_string(mine) + " us");
      });
      REQUIRE(tutti_test::failuresOf(outcomes) == "");
      auto fabrics = log.linesWith("TUNING host ");
      REQUIRE(fabrics.size() == 1);
      INFO(fabrics[0]);
      double modelled = numberAfter(fabrics[0], "; network ");  // "network 42.5 us 1.2 GB/s"
      auto measured = log.linesWith("network one way ");
      if (std::string(calibrate) == "1") {
        REQUIRE(measured.size() == 1);
        INFO(measured[0]);
        double oneWay = numberAfter(measured[0], "network one way ");
        CHECK(oneWay > 0);
        CHECK(std::abs(modelled - oneWay) <= 0.051);  // printed to 0.1 and 0.01 us
      } else {
        CHECK(measured.empty());
        CHECK(modelled == tutti::sim::Fabric::HostFigures{}.tcp.latencyUs);
      }
    }
  }
}

TEST_CASE("net: waits sleep without yielding where proxy threads carry the network (ranks outnumber cores)",
          "[net][processes][tuning]") {
  // Every rank process inherits one core: two ranks per host outnumber it, one rank does not
  // (its worker drives the sockets itself).
  OnOneCore pinned;

  struct Expect {
    int ranksPerHost;
    const char* yield;  // TUTTI_YIELD, "" for unset
    int yields;
    int drivingWorkers;
  };
  for (const Expect& e : {Expect{2, "", 0, 0}, Expect{2, "7", 7, 0}, Expect{1, "", 50, 1}}) {
    DYNAMIC_SECTION(e.ranksPerHost << " rank(s) per host, TUTTI_YIELD=" << e.yield) {
      HostLayout layout;
      layout.ranksPerHost = e.ranksPerHost;
      layout.environment = {kLoopback};
      if (*e.yield) layout.environment.push_back({"TUTTI_YIELD", e.yield});
      auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
        check(comm->settings.yields == e.yields && comm->settings.drivingWorkers == e.drivingWorkers,
              "rank " + std::to_string(rank) + ": " + std::to_string(comm->settings.yields) + " yields, " +
                  std::to_string(comm->settings.drivingWorkers) + " driving workers");
        runAll({Case{Coll::AllReduce, ncclFloat32, ncclSum, (1u << 17) + 5, false, 0}}, rank, comm->identity.nranks,
               comm);
      });
      REQUIRE(tutti_test::failuresOf(outcomes) == "");
    }
  }
}

TEST_CASE(
    "net: a rank whose peers have destroyed their communicators sleeps, and its proxy does not spin on their closed "
    "sockets",
    "[net][processes][idle]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = {kLoopback};
  auto outcomes = runOnHosts(layout, [](int rank, int, ncclComm_t comm) {
    std::vector<float> x(1024, 1.0f);
    TUTTI_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), x.size(), ncclFloat32, ncclSum, comm, nullptr));
    if (rank != 0) return;  // destroys its communicator now, saying goodbye on every connection
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the goodbyes arrive
    auto cpuSeconds = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    double before = cpuSeconds();
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    double cpu = cpuSeconds() - before, wall = tutti_test::secondsSince(start);
    // A thread polling a socket that stays readable (the peer's end of stream) takes a core; an
    // idle process takes a few percent of one at most, even on a loaded machine.
    tutti_test::check(cpu < 0.3 * wall, "rank 0 used " + std::to_string(cpu) + " s of CPU in " + std::to_string(wall) +
                                            " s of waiting after its peer destroyed its communicator");
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("net: hostile connections to every transport port during init are dropped, init and all-reduce succeed",
          "[net][processes][hostile]") {
  tutti::transport::net::registerNetBackend("HostileSocket", [] { return std::make_unique<HostileSocketBackend>(); });
  CapturedLog log;
  HostLayout layout;
  layout.environment = {kLoopback, {"NCCL_NET", "HostileSocket"}, {"TUTTI_NET_REQUIRE", "HostileSocket"}};
  std::vector<Case> cases = {Case{Coll::AllReduce, ncclFloat32, ncclSum, (1u << 18) + 5, false, 0},
                             Case{Coll::AllGather, ncclInt32, ncclSum, 1000, true, 0}};
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");

  // Ring 0 -> 1 (shm) -> 2 (TCP) -> 3 (shm) -> 0 (TCP): two listeners per channel, every one attacked.
  size_t attacked = log.linesWith("test attacker: ").size();
  size_t dropped = log.linesWith("NET/Socket: dropped a connection").size();
  CHECK(attacked >= 2);
  CHECK(attacked % 2 == 0);
  CHECK(dropped == attacked * HostileSocketBackend::kAttacksPerListener);
}

TEST_CASE(
    "net: over Socket, each host's NICs stay the interfaces sysfs lists, and the selector keeps its default network",
    "[net][processes][nics]") {
  // What discovery should find, read here on its own: every interface of /sys/class/net but
  // loopback and bridges, by name, with its speed (10000 Mb/s, NCCL's guess, where sysfs has none).
  std::vector<std::pair<std::string, int>> interfaces;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net", error)) {
    const std::string name = entry.path().filename().string();
    std::error_code notDirectory;
    if (!std::filesystem::is_directory(entry.path(), notDirectory) || name == "lo") continue;
    if (name.rfind("docker", 0) == 0 || name.rfind("virbr", 0) == 0 || name.rfind("veth", 0) == 0 ||
        name.rfind("br-", 0) == 0)
      continue;
    int speed = -1;
    std::ifstream(entry.path() / "speed") >> speed;
    interfaces.emplace_back(name, speed > 0 ? speed : 10000);
  }
  std::sort(interfaces.begin(), interfaces.end());
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = {kLoopback, {"NCCL_NET", "Socket"}};
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    const std::string me = "rank " + std::to_string(rank) + ": ";
    for (int node = 0; node < n; node++) {
      char host[256];
      int ranks = 0, numa = 0, cpus = 0, gpus = 0, nics = -1;
      TUTTI_NCCL_CHECK(tuttiCommNodeTopology(comm, node, host, sizeof host, &ranks, &numa, &cpus, &gpus, &nics));
      check(size_t(nics) == interfaces.size(), me + "node " + std::to_string(node) + " has " + std::to_string(nics) +
                                                   " NIC port(s), sysfs " + std::to_string(interfaces.size()));
      for (int nic = 0; nic < nics && size_t(nic) < interfaces.size(); nic++) {
        char name[64] = "";
        int speed = -1;
        TUTTI_NCCL_CHECK(tuttiCommNodeNic(comm, node, nic, name, sizeof name, &speed));
        const auto& [wantName, wantSpeed] = interfaces[size_t(nic)];
        check(name == wantName && speed == wantSpeed,
              me + "node " + std::to_string(node) + " NIC " + std::to_string(nic) + " is \"" + name + "\" at " +
                  std::to_string(speed) + " Mb/s, sysfs says \"" + wantName + "\" at " + std::to_string(wantSpeed));
      }
    }
    const tutti::sim::Fabric& fabric = comm->planning.selector->fabric();
    check(fabric.nicsPerNode == 1 && fabric.network.gbps == tutti::sim::Fabric::HostFigures{}.tcp.gbps,
          me + "over Socket the selector's network became " + std::to_string(fabric.nicsPerNode) + " NIC(s) of " +
              std::to_string(fabric.network.gbps) + " GB/s");
    runAll({Case{Coll::AllReduce, ncclFloat64, ncclSum, (size_t(1) << 16) + 3, false, 0}}, rank, n, comm);
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("net: every collective, type and op across 2 hosts x 2 rank processes", "[net][processes][any-net]") {
  HostLayout layout;
  layout.environment = {kLoopback};
  auto cases = netCases(4, true);
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("net: 3 hosts x 2 rank threads each: local connections inside a host, the network between",
          "[net][processes][threads][any-net]") {
  HostLayout layout;
  layout.hosts = 3;
  layout.threadsPerProcess = 2;
  layout.environment = {kLoopback};
  auto cases = netCases(6, false);
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("net: NCCL_SHM_DISABLE=1 sends same-host processes over the network (TCP: striped over several sockets)",
          "[net][processes][any-net]") {
  HostLayout layout;
  layout.hosts = 1;
  layout.ranksPerHost = 3;
  layout.environment = {
      kLoopback, {"NCCL_SHM_DISABLE", "1"}, {"NCCL_SOCKET_NTHREADS", "2"}, {"NCCL_NSOCKS_PERTHREAD", "2"}};
  auto cases = netCases(3, false);
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

TEST_CASE("net: collectives across 2 hosts x 2 rank processes through tutti's external net plugin, v10 and v6",
          "[net][processes][plugin]") {
  auto [library, name] = GENERATE(std::pair<const char*, const char*>{TUTTI_TEST_NET_PLUGIN, "TuttiSocket"},
                                  std::pair<const char*, const char*>{TUTTI_TEST_NET_PLUGIN_V6, "TuttiSocketV6"});
  CapturedLog log("INFO", "NET");
  HostLayout layout;
  layout.environment = {kLoopback, {"NCCL_NET_PLUGIN", library}, {"NCCL_NET", name}};
  std::vector<Case> cases = netCases(4, false);
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) { runAll(cases, rank, n, comm); });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
  // Every rank's network went through the plugin (NCCL_NET admits nothing else), which logged
  // through tutti's log (its interface line comes from the plugin's copy of the Socket backend).
  CHECK(log.linesWith(std::string("NET: using backend ") + name).size() == 4);
  CHECK(log.linesWith("NET/Socket: using lo").size() == 4);
}

TEST_CASE("net: TUTTI_NET_REQUIRE naming a backend that does not exist fails init", "[net][processes]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = {kLoopback, {"TUTTI_NET_REQUIRE", "NoSuchNet"}, {"TUTTI_BOOTSTRAP_TIMEOUT", "10"}};
  auto outcomes = runOnHosts(layout, [](int, int, ncclComm_t) {});
  REQUIRE(outcomes.size() == 2);
  for (auto& o : outcomes) {
    INFO(o.failure);
    CHECK(o.failure.find("TUTTI_NET_REQUIRE=NoSuchNet") != std::string::npos);
  }
}

TEST_CASE("net: a rank killed during all-reduces between hosts fails every survivor with ncclRemoteError",
          "[net][faults][any-net]") {
  HostLayout layout;
  layout.environment = {kLoopback, {"TUTTI_TIMEOUT", "5"}};
  layout.timeoutSeconds = 60;
  const int victim = 3;  // ring 0 -> 1 (shm) -> 2 (TCP) -> 3 (shm) -> 0 (TCP)
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    std::vector<int> pids(size_t(n), 0);
    int me = int(getpid());
    TUTTI_NCCL_CHECK(ncclAllGather(&me, pids.data(), 1, ncclInt32, comm, nullptr));
    std::vector<float> buf(1 << 18, 1.0f);
    ncclResult_t result = ncclSuccess;
    for (int i = 0; i < 100000 && result == ncclSuccess; i++) {
      if (rank == victim && i == 20) raise(SIGKILL);
      result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    std::string message = ncclGetLastError(comm);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    check(result == ncclRemoteError,
          "rank " + std::to_string(rank) + ": the all-reduce returned " + ncclGetErrorString(result) + ": " + message);
    check(async == ncclRemoteError,
          "rank " + std::to_string(rank) + ": ncclCommGetAsyncError gave " + ncclGetErrorString(async));
    // Rank 0 receives from the victim over TCP: it sees the connection end and names the victim.
    if (rank == 0) {
      std::string named = "rank " + std::to_string(victim) + " (";
      check(message.find(named) != std::string::npos &&
                message.find("pid " + std::to_string(pids[victim])) != std::string::npos,
            "rank 0's error does not name rank 3 and its pid " + std::to_string(pids[victim]) + ": " + message);
    }
    // The failed communicator is destroyed by the runner: that must not hang.
  });
  REQUIRE(outcomes.size() == 4);
  for (auto& o : outcomes) {
    INFO("process of rank " << o.firstRank << ": " << o.failure);
    if (o.firstRank == victim)
      CHECK(o.signal == SIGKILL);
    else
      CHECK(o.failure == "");
  }
}

TEST_CASE("net: ncclCommAbort from another thread ends a collective stuck on a peer of another host",
          "[net][faults][abort][any-net]") {
  HostLayout layout;
  layout.ranksPerHost = 1;
  layout.environment = {kLoopback};
  layout.timeoutSeconds = 60;
  auto outcomes = runOnHosts(layout, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> buf(1 << 20, 1.0f);
    if (rank == 1) {
      // Never joins the all-reduce; waits until the peer has given up, then leaves.
      std::this_thread::sleep_for(std::chrono::seconds(2));
      return;
    }
    std::atomic<bool> returned{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ncclCommAbort(comm);
    });
    ncclResult_t result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    returned = true;
    aborter.join();
    check(result != ncclSuccess, "the stuck all-reduce succeeded");
    throw tutti_test::RankFailure("aborted as planned");  // the comm is gone: skip the runner's destroy
  });
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].failure.find("aborted as planned") != std::string::npos);
  CHECK(outcomes[0].failure.find("the stuck all-reduce succeeded") == std::string::npos);
  CHECK(outcomes[1].failure == "");
}
