// NCCL_P2P_LEVEL as NCCL reads it, the default level, and the p2p decision between two GPUs of a
// node at every distance, against the distances the test node was built with.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.h"
#include "tests/common/env_support.h"
#include "tests/common/p2p_topology_support.h"
#include "topology/p2p_level.h"
#include "topology/synthetic.h"

using namespace tutti::topo;

namespace {

constexpr int kGpus = 5;

// The graph index of the test node's GPU n.
int gpuIndex(const NodeSystem& node, int n) {
  return node.graph.find(NodeKind::Gpu, tutti_test::p2pTestBusIds()[size_t(n)]);
}

P2pSettings level(const char* text) {
  P2pSettings s;
  s.levelText = text;
  s.level = parseP2pLevel(text);
  return s;
}

}  // namespace

TEST_CASE("p2p level: names in any case, NCCL's legacy numbers, and its types this graph never yields",
          "[topology][p2p]") {
  for (PathType t :
       {PathType::LOC, PathType::NVL, PathType::NVB, PathType::PIX, PathType::PXB, PathType::PHB, PathType::SYS}) {
    const std::string name = pathTypeName(t);
    CHECK(parseP2pLevel(name) == t);
    std::string lower;
    for (char c : name) lower += char(std::tolower(c));
    CHECK(parseP2pLevel(lower) == t);
  }
  // NCCL's table: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, and anything larger SYS.
  CHECK(parseP2pLevel("0") == PathType::LOC);
  CHECK(parseP2pLevel("1") == PathType::PIX);
  CHECK(parseP2pLevel("2") == PathType::PXB);
  CHECK(parseP2pLevel("3") == PathType::PHB);
  CHECK(parseP2pLevel("4") == PathType::SYS);
  CHECK(parseP2pLevel("5") == PathType::SYS);
  CHECK(parseP2pLevel("17") == PathType::SYS);
  CHECK(parseP2pLevel("C2C") == PathType::NVB);
  CHECK(parseP2pLevel("PXN") == PathType::PXB);
  CHECK(parseP2pLevel("P2C") == PathType::PXB);
  for (const char* bad : {"", "NET", "PCI", "-1", "1x", "SYS "}) {
    INFO(bad);
    try {
      parseP2pLevel(bad);
      FAIL("accepted");
    } catch (const tutti::Error& e) {
      CHECK(e.code() == tutti::ErrorCode::InvalidUsage);
      CHECK(e.message().find("NCCL_P2P_LEVEL") != std::string::npos);
    }
  }
}

TEST_CASE("p2p level: the test node's GPUs are as far apart as it was built", "[topology][p2p]") {
  const NodeSystem node = tutti_test::p2pTestNode();
  for (int a = 0; a < kGpus; a++)
    for (int b = 0; b < kGpus; b++) {
      INFO("GPU " << a << " and GPU " << b);
      const GpuPair pair = gpuPair(node.graph, gpuIndex(node, a), gpuIndex(node, b));
      CHECK(pair.known);
      CHECK(pair.path == tutti_test::p2pTestPath(a, b));
    }
}

TEST_CASE("p2p level: a pair connects peer to peer exactly when its path is no farther than the level",
          "[topology][p2p]") {
  const NodeSystem node = tutti_test::p2pTestNode();
  const PathType order[] = {PathType::LOC, PathType::NVL, PathType::NVB, PathType::PIX,
                            PathType::PXB, PathType::PHB, PathType::SYS};
  for (const char* text : {"NVL", "PIX", "PXB", "PHB", "SYS", "1", "2", "3", "4"}) {
    const P2pSettings settings = level(text);
    for (int a = 0; a < kGpus; a++)
      for (int b = a + 1; b < kGpus; b++) {
        INFO("NCCL_P2P_LEVEL=" << text << ", GPU " << a << " and GPU " << b);
        // Rank of each in NCCL's order, counted here rather than taken from the enum.
        int pathAt = -1, levelAt = -1;
        for (int i = 0; i < 7; i++) {
          if (order[i] == tutti_test::p2pTestPath(a, b)) pathAt = i;
          if (order[i] == *settings.level) levelAt = i;
        }
        const P2pDecision d = decideP2p(gpuPair(node.graph, gpuIndex(node, a), gpuIndex(node, b)), settings);
        CHECK(d.allowed == (pathAt <= levelAt));
        CHECK(d.reason.find(pathTypeName(tutti_test::p2pTestPath(a, b))) != std::string::npos);
        CHECK(d.reason.find(std::string("NCCL_P2P_LEVEL=") + text) != std::string::npos);
        CHECK_FALSE(d.read);  // PCIe paths: NCCL writes
      }
  }
  // LOC, and NCCL_P2P_DISABLE whatever the level, refuse even the nearest pair.
  const GpuPair nearest = gpuPair(node.graph, gpuIndex(node, 0), gpuIndex(node, 1));
  CHECK_FALSE(decideP2p(nearest, level("LOC")).allowed);
  CHECK_FALSE(decideP2p(nearest, level("0")).allowed);
  P2pSettings disabled = level("SYS");
  disabled.disabled = true;
  const P2pDecision d = decideP2p(nearest, disabled);
  CHECK_FALSE(d.allowed);
  CHECK(d.reason.find("NCCL_P2P_DISABLE") != std::string::npos);
}

TEST_CASE("p2p level: unset, PXB on Intel hosts and on AMD hosts with more than two GPUs, SYS on AMD hosts with two",
          "[topology][p2p]") {
  const NodeSystem intel = tutti_test::p2pTestNode();
  CHECK(defaultP2pLevel(intel.graph) == PathType::PXB);
  const P2pSettings unset;
  const P2pDecision pxb = decideP2p(gpuPair(intel.graph, gpuIndex(intel, 0), gpuIndex(intel, 2)), unset);
  CHECK(pxb.allowed);
  CHECK(pxb.reason.find("NCCL_P2P_LEVEL unset") != std::string::npos);
  CHECK_FALSE(decideP2p(gpuPair(intel.graph, gpuIndex(intel, 0), gpuIndex(intel, 4)), unset).allowed);  // PHB
  CHECK_FALSE(decideP2p(gpuPair(intel.graph, gpuIndex(intel, 0), gpuIndex(intel, 3)), unset).allowed);  // SYS

  const NodeSystem amd = tutti_test::p2pTestNode("AuthenticAMD");
  CHECK(defaultP2pLevel(amd.graph) == PathType::PXB);  // five GPUs
  CHECK_FALSE(decideP2p(gpuPair(amd.graph, gpuIndex(amd, 0), gpuIndex(amd, 3)), unset).allowed);
  // Two GPUs on an AMD host, one per socket, no NVLink: every path allowed.
  NodeSystem pair = syntheticNode(2, 2);
  for (int cpu : pair.graph.nodesOf(NodeKind::Cpu))
    setAttribute(pair.graph.node(cpu).attributes, "vendor", "AuthenticAMD");
  for (int g : pair.graph.gpus()) pair.graph.node(g).nvlinks.clear();
  pair.graph.buildLinks(pair.warnings);
  const TopologyGraph& two = pair.graph;
  REQUIRE(two.gpus().size() == 2);
  CHECK(defaultP2pLevel(two) == PathType::SYS);
  const GpuPair across = gpuPair(two, two.gpus()[0], two.gpus()[1]);
  CHECK(across.path == PathType::SYS);
  CHECK(decideP2p(across, unset).allowed);
}

TEST_CASE("p2p level: read mode over NVLink between compute capability 8.0 GPUs, as NCCL, NCCL_P2P_READ_ENABLE decides",
          "[topology][p2p]") {
  NodeSystem hopper = syntheticNode(2, 0);  // sm 90 GPUs on one NVSwitch fabric
  GpuPair pair = gpuPair(hopper.graph, hopper.graph.gpus()[0], hopper.graph.gpus()[1]);
  REQUIRE(pair.path == PathType::NVL);
  P2pSettings unset;
  CHECK(decideP2p(pair, unset).allowed);
  CHECK_FALSE(decideP2p(pair, unset).read);
  pair.sm[0] = pair.sm[1] = 80;
  CHECK(decideP2p(pair, unset).read);
  P2pSettings no = unset;
  no.readEnable = 0;
  CHECK_FALSE(decideP2p(pair, no).read);
  // Asked for over PCIe too.
  const NodeSystem node = tutti_test::p2pTestNode();
  P2pSettings yes = unset;
  yes.readEnable = 1;
  CHECK(decideP2p(gpuPair(node.graph, gpuIndex(node, 0), gpuIndex(node, 1)), yes).read);
}

TEST_CASE(
    "p2p level: GPUs of unknown distance connect unless NCCL_P2P_DISABLE or LOC, the variables from the environment",
    "[topology][p2p]") {
  const GpuPair unknown;
  CHECK(decideP2p(unknown, level("PIX")).allowed);
  CHECK(decideP2p(unknown, level("PIX")).reason.find("unknown") != std::string::npos);
  CHECK_FALSE(decideP2p(unknown, level("LOC")).allowed);
  {
    tutti_test::ScopedEnv lvl("NCCL_P2P_LEVEL", "pxb");
    tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "1");
    tutti_test::ScopedEnv memcpy("NCCL_P2P_USE_CUDA_MEMCPY", "1");
    const P2pSettings s = p2pSettingsFromEnvironment();
    CHECK(s.level == PathType::PXB);
    CHECK(s.readEnable == 1);
    CHECK(s.useCudaMemcpy);
    CHECK_FALSE(s.disabled);
  }
  {
    tutti_test::ScopedEnv lvl("NCCL_P2P_LEVEL", "");  // empty: unset, as in NCCL
    CHECK_FALSE(p2pSettingsFromEnvironment().level.has_value());
    tutti_test::ScopedEnv bad("NCCL_P2P_LEVEL", "NEAR");
    CHECK_THROWS_AS(p2pSettingsFromEnvironment(), tutti::Error);
  }
}
