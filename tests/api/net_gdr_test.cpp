// GPUDirect RDMA through dmabuf between hosts: ranks on the emulated device with its memory counted
// as a GPU's (TUTTI_EMULATED_MEMORY=device), over the IB backend on the verbs stand-in. With
// NCCL_NET_GDR_LEVEL allowing the GPU-NIC path, the network FIFOs' slots are device memory the NIC
// registers by dmabuf (and every receive into them is flushed by an RDMA read); at LOC, or at the
// default PXB where the path is unknown (counted as SYS), they stay host memory. Every case is
// checked against the float64 reference either way. The same again through an external net plugin
// (the IB backend behind the plugin ABI, "TuttiIB"): the adapter's regMrDmaBuf and iflush.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <string>
#include <utility>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tests/common/ibverbs_standin_support.h"
#include "tests/common/log_support.h"

using tutti_test::check;
using tutti_test::Coll;
using tutti_test::HostLayout;
using tutti_test::runOnHosts;

namespace {

std::vector<tutti_test::Case> gdrCases() {
  std::vector<tutti_test::Case> cases;
  for (Coll coll : {Coll::AllReduce, Coll::AllGather})
    for (ncclDataType_t type : {ncclFloat32, ncclFloat64, ncclInt32, ncclBfloat16})
      for (size_t count : {size_t(1), size_t(1023), (size_t(1) << 18) + 3})
        cases.push_back(tutti_test::Case{coll, type, ncclSum, count, false, 0});
  cases.push_back(tutti_test::Case{Coll::AllReduce, ncclFloat32, ncclMax, (size_t(1) << 20) + 5, true, 0});
  return cases;
}

struct StandinCounts {
  uint64_t registrations = 0, live = 0, reads = 0;
};

// This rank process's count of the stand-in's dmabuf registrations and RDMA reads.
StandinCounts standinCounts() {
  auto counters =
      tutti_test::loadedStandinSymbol<void (*)(uint64_t*, uint64_t*, uint64_t*)>("tutti_standin_dmabuf_counters");
  check(counters != nullptr,
        "the verbs stand-in is not loaded in this rank process, or has no tutti_standin_dmabuf_counters");
  StandinCounts c;
  counters(&c.registrations, &c.live, &c.reads);
  return c;
}

struct PluginCounts {
  uint64_t registrations = 0, flushes = 0;
};

// This rank process's count of the IB test plugin's regMrDmaBuf and iflush calls.
PluginCounts pluginCounts() {
  void* library = dlopen(TUTTI_TEST_NET_PLUGIN_IB, RTLD_NOW | RTLD_NOLOAD);
  check(library != nullptr,
        std::string("the IB test plugin is not loaded in this rank process: ") + TUTTI_TEST_NET_PLUGIN_IB);
  auto counters = reinterpret_cast<void (*)(uint64_t*, uint64_t*)>(dlsym(library, "tutti_test_plugin_dmabuf_counters"));
  dlclose(library);  // NOLOAD took a reference; the loader keeps the library for the process
  check(counters != nullptr, "the IB test plugin has no tutti_test_plugin_dmabuf_counters");
  PluginCounts c;
  counters(&c.registrations, &c.flushes);
  return c;
}

// The built-in IB backend, or the IB backend behind the plugin ABI (tutti's adapter in between).
enum class Way { BuiltIn, Plugin };

// 2 hosts, one rank process each, on the emulated device's device memory over IB on the stand-in,
// with `environment` added; runs every case and checks whether the FIFOs were registered by dmabuf:
// the receiving ones (`expectDmaBuf`) and the sending ones (`expectSendDmaBuf`, by the proxy's log).
// Through the plugin, every dmabuf registration and every flush read the stand-in saw must have
// come through the plugin's regMrDmaBuf and iflush.
void runOverIb(std::vector<std::pair<std::string, std::string>> environment, bool expectDmaBuf,
               bool expectSendDmaBuf = false, Way way = Way::BuiltIn) {
  tutti_test::CapturedLog log("INFO", "NET");
  HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 1;
  layout.environment = {{"NCCL_SOCKET_IFNAME", "lo"},
                        {"TUTTI_IBVERBS_LIB", TUTTI_TEST_IBVERBS_STANDIN},
                        {"TUTTI_DEVICE", "emulated"},
                        {"TUTTI_EMULATED_MEMORY", "device"}};
  if (way == Way::BuiltIn) {
    layout.environment.push_back({"NCCL_NET", "IB"});
  } else {
    layout.environment.push_back({"NCCL_NET_PLUGIN", TUTTI_TEST_NET_PLUGIN_IB});
    layout.environment.push_back({"NCCL_NET", "TuttiIB"});
  }
  for (auto& e : environment) layout.environment.push_back(e);
  const std::vector<tutti_test::Case> cases = gdrCases();
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank) + ": ";
    tutti_test::runAll(cases, rank, n, comm);
    const StandinCounts counts = standinCounts();
    if (expectDmaBuf) {
      check(counts.registrations > 0, who + "no network FIFO was registered by dmabuf");
      check(counts.reads > 0, who + "no receive into device memory was flushed by an RDMA read");
    } else {
      check(counts.registrations == 0,
            who + std::to_string(counts.registrations) + " registrations by dmabuf where none was allowed");
      check(counts.reads == 0, who + std::to_string(counts.reads) + " flush reads where nothing is device memory");
    }
    if (way == Way::Plugin) {
      const PluginCounts plugin = pluginCounts();
      check(plugin.registrations == counts.registrations,
            who + "the plugin's regMrDmaBuf registered " + std::to_string(plugin.registrations) +
                " times, the verbs library " + std::to_string(counts.registrations));
      check(plugin.flushes == counts.reads, who + "the plugin's iflush flushed " + std::to_string(plugin.flushes) +
                                                " receives, the verbs library read " + std::to_string(counts.reads));
    }
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
  const size_t receiving = log.linesWith("slots in device memory registered by dmabuf (GPUDirect RDMA)").size();
  const size_t sending = log.linesWith("slots in device memory registered by dmabuf (GPUDirect RDMA read)").size();
  CHECK((receiving > 0) == expectDmaBuf);
  CHECK((sending > 0) == expectSendDmaBuf);
  // Each rank says once per side where its network FIFOs are, and why.
  CHECK(log.linesWith("network receive FIFOs in").size() == 2);
  if (way == Way::Plugin) CHECK(!log.linesWith("NET/Plugin TuttiIB").empty());
}

}  // namespace

TEST_CASE(
    "net gdr: NCCL_NET_GDR_LEVEL=SYS puts the receiving FIFOs in device memory registered by dmabuf, flushed by RDMA "
    "reads",
    "[net][processes][gdr]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "SYS"}}, true);
}

TEST_CASE("net gdr: with NCCL_NET_GDR_READ=1 the sending FIFOs are device memory too", "[net][processes][gdr]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "4"}, {"NCCL_NET_GDR_READ", "1"}}, true, true);
}

TEST_CASE(
    "net gdr: NCCL_NET_GDR_LEVEL=LOC, and the default PXB on a path that is unknown, keep the FIFOs in host memory",
    "[net][processes][gdr]") {
  SECTION("LOC") { runOverIb({{"NCCL_NET_GDR_LEVEL", "LOC"}}, false); }
  SECTION("the default") { runOverIb({}, false); }
}

TEST_CASE(
    "net gdr: a GPU that cannot export dmabufs keeps the FIFOs in host memory, whatever NCCL_NET_GDR_LEVEL allows",
    "[net][processes][gdr][capabilities]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"TUTTI_EMULATED_LACKS", "dmabuf"}}, false);
}

TEST_CASE(
    "net gdr: through a net plugin that takes dmabuf, NCCL_NET_GDR_LEVEL=SYS registers the receiving FIFOs by its "
    "regMrDmaBuf "
    "and flushes through its iflush",
    "[net][processes][gdr][plugin]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "SYS"}}, true, false, Way::Plugin);
}

TEST_CASE("net gdr: through a net plugin with NCCL_NET_GDR_READ=1 the sending FIFOs are device memory too",
          "[net][processes][gdr][plugin]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "SYS"}, {"NCCL_NET_GDR_READ", "1"}}, true, true, Way::Plugin);
}

TEST_CASE("net gdr: through a net plugin, NCCL_NET_GDR_LEVEL=LOC keeps the FIFOs in host memory",
          "[net][processes][gdr][plugin]") {
  runOverIb({{"NCCL_NET_GDR_LEVEL", "LOC"}}, false, false, Way::Plugin);
}
