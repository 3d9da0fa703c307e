// Paths and path types on the system graph.
#include <catch2/catch.hpp>

#include "base/error.h"
#include "topology/graph.h"
#include "topology/synthetic.h"
#include "topology/xml.h"

using namespace tutti::topo;

TEST_CASE("path types on the synthetic DGX node") {
  NodeSystem system = syntheticNode(8, 4);
  const TopologyGraph& graph = system.graph;
  std::vector<int> gpus = graph.gpus(), nets = graph.nets();
  REQUIRE(gpus.size() == 8);
  REQUIRE(nets.size() == 4);
  CHECK(system.warnings.empty());
  // Every GPU pair meets on the NVSwitch with all 18 links of an sm 90 GPU.
  for (int a : gpus) {
    for (int b : gpus) {
      Path path = graph.path(a, b);
      CHECK(path.type == (a == b ? PathType::LOC : PathType::NVL));
      if (a != b) CHECK(path.bandwidth == Approx(18 * nvlinkBandwidthPerLink(90)));
    }
  }
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 4; ++k) {
      INFO("GPU " << g << " NIC " << k);
      // Switch s holds GPUs 2s, 2s+1 and NIC s; switches 0-1 on socket 0, 2-3 on socket 1.
      PathType expected = g / 2 == k ? PathType::PIX : (g / 4 == k / 2 ? PathType::PHB : PathType::SYS);
      Path path = graph.path(gpus[g], nets[k]);
      CHECK(path.type == expected);
      CHECK(path.nodes.front() == gpus[g]);
      CHECK(path.nodes.back() == nets[k]);
      // The bottleneck is the 400 Gb/s port below the 32 GT/s x16 links, or the socket link.
      CHECK(path.bandwidth == Approx(expected == PathType::SYS ? kSmpBandwidth : 400000 / 8000.0));
    }
  }
  Path reverse = graph.path(nets[3], gpus[0]);
  CHECK(reverse.type == PathType::SYS);
}

TEST_CASE("NVB through an intermediate GPU, PXB across two switches, SYS across sockets") {
  const std::string text = R"(<system version="1">
  <cpu numaid="0">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
        <pci busid="0000:12:00.0" link_speed="16.0 GT/s PCIe" link_width="8">
          <gpu dev="0" sm="80"><nvlink target="0000:13:00.0" count="2" tclass="0x030200"/></gpu>
        </pci>
        <pci busid="0000:13:00.0"><gpu dev="1" sm="80">
          <nvlink target="0000:12:00.0" count="2" tclass="0x030200"/>
          <nvlink target="0000:21:00.0" count="4" tclass="0x030200"/></gpu></pci>
      </pci>
      <pci busid="0000:14:00.0"><nic><net name="ib0" dev="0" speed="200000"/></nic></pci>
    </pci>
  </cpu>
  <cpu numaid="1">
    <pci busid="0000:21:00.0"><gpu dev="2" sm="80"><nvlink target="0000:13:00.0" count="4" tclass="0x030200"/></gpu></pci>
  </cpu>
</system>)";
  NodeSystem system = importTopologyXml(parseXml(text, "t"), "t");
  const TopologyGraph& graph = system.graph;
  std::vector<int> gpus = graph.gpus();
  REQUIRE(gpus.size() == 3);
  int ib = graph.nets().at(0);
  Path nvb = graph.path(gpus[0], gpus[2]);
  CHECK(nvb.type == PathType::NVB);
  CHECK(nvb.bandwidth == Approx(2 * nvlinkBandwidthPerLink(80)));  // the narrower of 2 and 4 links
  CHECK(graph.path(gpus[0], gpus[1]).type == PathType::NVL);
  CHECK(graph.path(gpus[0], ib).type == PathType::PXB);
  // A x8 Gen4 link (8 x 1.969 GB/s) is narrower than the 200 Gb/s port.
  CHECK(graph.path(gpus[0], ib).bandwidth == Approx(pciBandwidth("16.0 GT/s PCIe", "8")));
  CHECK(graph.path(gpus[2], ib).type == PathType::SYS);
  CHECK(graph.path(graph.nodesOf(NodeKind::Cpu)[0], ib).type == PathType::PHB);
}

TEST_CASE("PCI bandwidth from NCCL's link attributes, and path-type names") {
  CHECK(pciBandwidth("16.0 GT/s PCIe", "16") == Approx(16 * 1.969));
  CHECK(pciBandwidth("8 GT/s", "4") == Approx(4 * 0.985));
  CHECK(pciBandwidth("32.0 GT/s PCIe", "16") == Approx(16 * 3.938));
  CHECK(pciBandwidth("", "16") == kDefaultPciBandwidth);
  CHECK(pciBandwidth("Unknown", "") == kDefaultPciBandwidth);
  for (const char* name : {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"})
    CHECK(pathTypeName(parsePathType(name)) == std::string(name));
  CHECK(parsePathType("pxb") == PathType::PXB);
  CHECK_THROWS_WITH(parsePathType("NVX"), Catch::Contains("unknown path type 'NVX'"));
  CHECK(normalizeBusId("00000000:0A:00.0") == "0000:0a:00.0");
}
