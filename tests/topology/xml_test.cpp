// The XML reader/writer and NCCL's topology-file format: parsing, errors, round trips, fuzzing.
#include <catch2/catch.hpp>

#include <random>

#include "base/error.h"
#include "tests/topology/topology_support.h"
#include "topology/graph.h"
#include "topology/synthetic.h"
#include "topology/xml.h"

using namespace tutti::topo;

namespace {

// The error message for `text`, or "" when it parses and imports.
std::string loadError(const std::string& text) {
  try {
    importTopologyXml(parseXml(text, "test.xml"), "test.xml");
  } catch (const tutti::Error& error) {
    return error.what();
  }
  return "";
}

// Node kinds and names, links and bandwidths: what must survive export and import.
std::string describe(const TopologyGraph& graph) {
  std::string out;
  for (const Node& node : graph.nodes())
    out += std::string(nodeKindName(node.kind)) + ":" + node.name + ":" + std::to_string(node.parent) + " ";
  for (const Link& link : graph.links()) {
    out += std::to_string(link.from) + ">" + std::to_string(link.to) + ":" + linkKindName(link.kind) + ":" +
           std::to_string(link.bandwidth) + " ";
  }
  return out;
}

}  // namespace

TEST_CASE("XML parser reads elements, attributes, entities, comments and the header") {
  const std::string text =
      "<?xml version=\"1.0\"?>\n<!-- leading comment -->\n<!DOCTYPE system>\n"
      "<root a=\"1\" b='two &amp; &lt;three&gt; &quot;q&quot; &apos;s&apos; &#65;&#x42;'>\n"
      "  <child x=\"y\"/>\n  <!-- inner -->\n  text is ignored\n  <child><leaf/></child >\n</root>\n<!-- trailing "
      "-->\n";
  XmlElement root = parseXml(text, "t");
  CHECK(root.name == "root");
  CHECK(root.line == 4);
  REQUIRE(root.attributes.size() == 2);
  CHECK(*root.attribute("a") == "1");
  CHECK(*root.attribute("b") == "two & <three> \"q\" 's' AB");
  REQUIRE(root.children.size() == 2);
  CHECK(*root.children[0].attribute("x") == "y");
  CHECK(root.children[0].line == 5);
  REQUIRE(root.children[1].children.size() == 1);
  CHECK(root.children[1].children[0].name == "leaf");
}

TEST_CASE("XML writer escapes values and parses back to the same tree") {
  XmlElement root{"a", {{"k", "<&>\"' plain"}, {"n", ""}}, {}, 0};
  root.children.push_back({"b", {{"z", "1"}}, {{"c", {}, {}, 0}}, 0});
  XmlElement back = parseXml(writeXml(root), "t");
  CHECK(back.attributes == root.attributes);
  REQUIRE(back.children.size() == 1);
  CHECK(back.children[0].attributes == root.children[0].attributes);
  CHECK(back.children[0].children[0].name == "c");
  CHECK(writeXml(back) == writeXml(root));
}

TEST_CASE("malformed XML is rejected with the line and the reason") {
  struct Case {
    std::string text;
    std::string where;
    std::string what;
  };
  const Case cases[] = {
      {"", "test.xml:1:", "no root element"},
      {"<system version=\"1\">\n<cpu numaid=\"0\">\n</system>",
       "test.xml:3:", "</system> closes <cpu> opened on line 2"},
      {"<system>\n\n<cpu numaid=0/></system>", "test.xml:3:", "quoted attribute value"},
      {"<system>\n<cpu numaid=\"&bogus;\"/></system>", "test.xml:2:", "unknown entity '&bogus;'"},
      {"<system>\n<cpu a=\"1\" a=\"2\"/></system>", "test.xml:2:", "attribute 'a' repeated"},
      {"<system a=\"<\"/>", "test.xml:1:", "'<' inside an attribute value"},
      {"<system/>\n<system/>", "test.xml:2:", "unexpected content after the root element"},
      {"<system>\n<cpu>\n", "test.xml:3:", "is never closed"},
      {"<system a=\"1\"", "test.xml:1:", "unterminated tag"},
      {"<!-- open comment\n<system/>", "test.xml:1:", "unterminated comment"},
      {"<system><1bad/></system>", "test.xml:1:", "expected an element name"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    std::string error = loadError(c.text);
    CHECK(error.find(c.where) == 0);
    CHECK(error.find(c.what) != std::string::npos);
  }
  std::string deep;
  for (int i = 0; i < kXmlMaxDepth + 1; ++i) deep += "<a>";
  CHECK(loadError(deep).find("nested deeper than 64") != std::string::npos);
  CHECK(loadError(std::string(kXmlMaxBytes + 1, ' ')).find("larger than") != std::string::npos);
  std::string wide = "<system>";
  for (int i = 0; i < kXmlMaxElements; ++i) wide += "<a/>";
  CHECK(loadError(wide + "</system>").find("more than 65536 elements") != std::string::npos);
}

TEST_CASE("topology import rejects missing required parts, naming the line") {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"<topology/>", "test.xml:1: the root element is <topology>, expected <system>"},
      {"<system version=\"1\">\n  <cpu affinity=\"ff\"/>\n</system>", "test.xml:2: <cpu> has no numaid attribute"},
      {"<system>\n<cpu numaid=\"0\"/>\n<cpu numaid=\"0\"/></system>", "test.xml:3: two <cpu> elements with numaid 0"},
      {"<system><cpu numaid=\"0\">\n<pci class=\"0x060400\"/></cpu></system>",
       "test.xml:2: <pci> has no busid attribute"},
      {"<system><cpu numaid=\"0\"><nic>\n\n<net dev=\"0\"/></nic></cpu></system>",
       "test.xml:3: <net> has no name attribute"},
      {"<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu dev=\"0\">\n<nvlink target=\"x\" count=\"0\"/>"
       "</gpu></pci></cpu></system>",
       "test.xml:2: <nvlink> attribute count=\"0\" is not a positive number"},
      {"<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"/>\n<pci busid=\"0000:01:00.0\"/></cpu></system>",
       "test.xml:2: PCI bus id 0000:01:00.0 appears twice"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(loadError(c.text) == c.expected);
  }
}

TEST_CASE("topology import rejects malformed attribute values, naming the line, element and attribute") {
  struct Case {
    std::string body;  // inside <system><cpu numaid="0">, from line 2
    std::string expected;
  };
  const std::string gpu0 = "<pci busid=\"0000:01:00.0\"><gpu dev=\"0\" rank=\"0\"/></pci>";
  const Case cases[] = {
      {"<pci busid=\"zz\"/>", "test.xml:2: <pci> attribute busid=\"zz\" is not a PCI bus id"},
      {"<pci busid=\"0000:01:00.0\" link_speed=\"abc\"/>",
       "test.xml:2: <pci> attribute link_speed=\"abc\" is not a PCIe rate"},
      {"<pci busid=\"0000:01:00.0\" link_speed=\"-8 GT/s\"/>",
       "test.xml:2: <pci> attribute link_speed=\"-8 GT/s\" is negative"},
      {"<pci busid=\"0000:01:00.0\" link_width=\"-5\"/>", "test.xml:2: <pci> attribute link_width=\"-5\" is negative"},
      {"<pci busid=\"0000:01:00.0\" link_width=\"16x\"/>",
       "test.xml:2: <pci> attribute link_width=\"16x\" is not a whole number"},
      {"<pci busid=\"0000:01:00.0\"><gpu dev=\"x\" sm=\"abc\" rank=\"-3\"/></pci>",
       "test.xml:2: <gpu> attribute dev=\"x\" is not a whole number"},
      {"<pci busid=\"0000:01:00.0\"><gpu dev=\"0\" sm=\"abc\"/></pci>",
       "test.xml:2: <gpu> attribute sm=\"abc\" is not a whole number"},
      {"<pci busid=\"0000:01:00.0\"><gpu dev=\"0\" rank=\"-3\"/></pci>",
       "test.xml:2: <gpu> attribute rank=\"-3\" is negative"},
      {"<pci busid=\"0000:01:00.0\"><gpu/></pci>", "test.xml:2: <gpu> has no dev attribute"},
      {gpu0 + "\n<pci busid=\"0000:02:00.0\"><gpu dev=\"0\" rank=\"1\"/></pci>",
       "test.xml:3: two <gpu> elements with dev 0"},
      {gpu0 + "\n<pci busid=\"0000:02:00.0\"><gpu dev=\"1\" rank=\"0\"/></pci>",
       "test.xml:3: two <gpu> elements with rank 0"},
      {"<pci busid=\"0000:01:00.0\"><gpu dev=\"0\"><nvlink target=\"zz\"/></gpu></pci>",
       "test.xml:2: <nvlink> attribute target=\"zz\" is not a PCI bus id"},
      {"<nic><net name=\"ib0\" dev=\"0\" speed=\"-5\"/></nic>", "test.xml:2: <net> attribute speed=\"-5\" is negative"},
      {"<nic><net name=\"ib0\" dev=\"0\" speed=\"fast\"/></nic>",
       "test.xml:2: <net> attribute speed=\"fast\" is not a number of Mb/s"},
      {"<nic><net name=\"ib0\" dev=\"-1\"/></nic>", "test.xml:2: <net> attribute dev=\"-1\" is negative"},
      {"<nic><net name=\"ib0\" dev=\"0\"/></nic>\n<nic><net name=\"ib1\" dev=\"0\"/></nic>",
       "test.xml:3: two <net> elements with dev 0"},
  };
  for (const Case& c : cases) {
    std::string text = "<system version=\"1\"><cpu numaid=\"0\">\n" + c.body + "</cpu></system>";
    INFO(text);
    CHECK_THAT(loadError(text), Catch::StartsWith(c.expected));
  }
  CHECK_THAT(loadError("<system>\n<cpu numaid=\"x\"/></system>"),
             Catch::StartsWith("test.xml:2: <cpu> attribute numaid=\"x\" is not a whole number"));
  CHECK_THAT(loadError("<system>\n<cpu numaid=\"-2\"/></system>"),
             Catch::StartsWith("test.xml:2: <cpu> attribute numaid=\"-2\" is less than -1"));
  CHECK_THAT(loadError("<system>\n<cpu numaid=\"0\" affinity=\"zz\"/></system>"),
             Catch::StartsWith("test.xml:2: <cpu> attribute affinity=\"zz\" is not a CPU mask"));
}

TEST_CASE("topology import accepts NCCL's unknown markers, with fallbacks") {
  // What NCCL writes in VMs and containers: numaid -1, link_speed "Unknown" or empty, link_width
  // 0, a port speed of -1 or 0; ids in hex and attributes the importer does not read.
  const std::string text =
      "<system version=\"1\" host_hash=\"0x1234\">\n"
      "<cpu numaid=\"-1\" affinity=\"\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n"
      "<pci busid=\"0000:01:00.0\" class=\"0x020000\" vendor=\"0x15b3\" link_speed=\"Unknown\" link_width=\"0\">\n"
      "<nic><net name=\"eth0\" dev=\"0\" speed=\"-1\" port=\"1\" latency=\"0.000000\" guid=\"0x0\" maxconn=\"65536\" "
      "gdr=\"0\" coll=\"0\"/></nic></pci>\n"
      "<pci busid=\"00000000:02:00.0\" link_speed=\"\" link_width=\"16\"><nic><net name=\"eth1\" dev=\"1\" "
      "speed=\"0\"/></nic></pci>\n"
      "<pci busid=\"0000:03:00.0\" link_speed=\"8 GT/s\" link_width=\"8\"><gpu dev=\"0\" sm=\"70\" rank=\"0\" "
      "gdr=\"1\"/></pci>\n"
      "</cpu></system>";
  NodeSystem system = importTopologyXml(parseXml(text, "t.xml"), "t.xml");
  const TopologyGraph& graph = system.graph;
  CHECK(graph.find(NodeKind::Cpu, "cpu-1") >= 0);
  std::vector<int> nets = graph.nets();
  REQUIRE(nets.size() == 2);
  for (int net : nets) CHECK(graph.node(net).netBandwidth() == Approx(kUnknownNetSpeed / 8000));
  std::string all;
  for (const std::string& w : system.warnings) all += w + "\n";
  CHECK(all.find("t.xml:4: <net name=\"eth0\">: speed \"-1\" is unknown; assuming 10000 Mb/s") != std::string::npos);
  CHECK(all.find("t.xml:5: <net name=\"eth1\">: speed \"0\" is unknown") != std::string::npos);
  for (const Link& link : graph.links()) {
    if (graph.node(link.from).kind == NodeKind::Net) CHECK(link.bandwidth == Approx(kUnknownNetSpeed / 8000));
    if (graph.node(link.from).name == "0000:01:00.0" && link.to == graph.node(link.from).parent)
      CHECK(link.bandwidth == kDefaultPciBandwidth);
  }
}

TEST_CASE("unknown topology elements are warnings and unknown attributes are kept") {
  const std::string text =
      "<system version=\"1\">\n<cpu numaid=\"0\" future=\"yes\">\n<pci busid=\"0000:01:00.0\" extra=\"e\">\n"
      "<gpu dev=\"0\" sm=\"90\" fancy=\"1\"><c2c bw=\"1\"/></gpu></pci>\n<widget/>\n</cpu>\n<gadget/>\n</system>";
  NodeSystem system = importTopologyXml(parseXml(text, "t.xml"), "t.xml");
  REQUIRE(system.graph.gpus().size() == 1);
  std::string all;
  for (const std::string& w : system.warnings) all += w + "\n";
  CHECK(all.find("t.xml:4: unknown element <c2c>") != std::string::npos);
  CHECK(all.find("t.xml:5: unknown element <widget>") != std::string::npos);
  CHECK(all.find("t.xml:7: unknown element <gadget>") != std::string::npos);
  std::string out = writeXml(exportTopologyXml(system));
  CHECK(out.find("future=\"yes\"") != std::string::npos);
  CHECK(out.find("extra=\"e\"") != std::string::npos);
  CHECK(out.find("fancy=\"1\"") != std::string::npos);
}

TEST_CASE("topology XML round trip is stable") {
  SECTION("synthetic node") {
    NodeSystem original = syntheticNode(8, 4);
    std::string once = writeXml(exportTopologyXml(original));
    NodeSystem back = importTopologyXml(parseXml(once, "once"), "once");
    CHECK(back.warnings.empty());
    CHECK(describe(back.graph) == describe(original.graph));
    CHECK(back.hostname == original.hostname);
    CHECK(writeXml(exportTopologyXml(back)) == once);
  }
  SECTION("hand-written NCCL dump") {
    NodeSystem first = loadTopologyFile(tutti_test::topologyDataFile("dgx_a100_8gpu.xml"));
    std::string once = writeXml(exportTopologyXml(first));
    NodeSystem second = importTopologyXml(parseXml(once, "once"), "once");
    CHECK(describe(second.graph) == describe(first.graph));
    CHECK(writeXml(exportTopologyXml(second)) == once);
  }
}

TEST_CASE("a hand-written NCCL dump of an 8-GPU node loads with the right devices and paths") {
  NodeSystem system = loadTopologyFile(tutti_test::topologyDataFile("dgx_a100_8gpu.xml"));
  const TopologyGraph& graph = system.graph;
  CHECK(system.warnings.empty());
  CHECK(graph.nodesOf(NodeKind::Cpu).size() == 4);
  REQUIRE(graph.gpus().size() == 8);
  REQUIRE(graph.nets().size() == 4);
  CHECK(graph.nodesOf(NodeKind::Nic).size() == 4);
  CHECK(graph.nodesOf(NodeKind::NvSwitch).size() == 1);  // six NVSwitch chips, one fabric
  for (int i = 0; i < 8; ++i) CHECK(graph.node(graph.gpus()[i]).gpuDev() == i);
  std::vector<int> gpus = graph.gpus(), nets = graph.nets();
  CHECK(graph.node(nets[2]).name == "mlx5_2");
  CHECK(graph.node(nets[2]).netBandwidth() == Approx(200000 / 8000.0));
  // Six <nvlink count="2"> per GPU: 12 links of an sm 80 GPU.
  Path nvl = graph.path(gpus[0], gpus[7]);
  CHECK(nvl.type == PathType::NVL);
  CHECK(nvl.bandwidth == Approx(12 * nvlinkBandwidthPerLink(80)));
  // The GPU sits under a second-level switch, the NIC under the first: two switches, no CPU.
  CHECK(graph.path(gpus[0], nets[0]).type == PathType::PXB);
  CHECK(graph.path(gpus[2], nets[1]).type == PathType::PXB);
  CHECK(graph.path(gpus[0], nets[1]).type == PathType::SYS);
  CHECK(graph.path(gpus[0], graph.find(NodeKind::Cpu, "cpu1")).type == PathType::PHB);
}

TEST_CASE("a large topology file loads in linear time") {
  // 20,000 NIC ports straight under CPUs: quadratic work here would take minutes.
  std::string text = "<system version=\"1\">";
  for (int cpu = 0; cpu < 4; ++cpu) {
    text += "<cpu numaid=\"" + std::to_string(cpu) + "\">";
    for (int i = 0; i < 5000; ++i)
      text += "<nic><net name=\"n" + std::to_string(cpu * 5000 + i) + "\" speed=\"1000\"/></nic>";
    text += "</cpu>";
  }
  NodeSystem system = importTopologyXml(parseXml(text + "</system>", "big"), "big");
  CHECK(system.graph.nets().size() == 20000);
  CHECK(writeXml(exportTopologyXml(system)).size() > text.size() / 2);
}

TEST_CASE("XML parser fuzz: random bytes and mutated files never crash") {
  const std::string valid = tutti_test::readFile(tutti_test::topologyDataFile("dgx_a100_8gpu.xml"));
  REQUIRE(valid.size() > 1000);
  std::mt19937 random(12345);
  const std::string alphabet = "<>/=\"'&;!?- \nabcpux0123456789:.";
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text;
    if (i % 4 == 0) {
      text.resize(random() % 300);
      for (char& c : text) c = static_cast<char>(i % 8 == 0 ? random() % 256 : alphabet[random() % alphabet.size()]);
    } else {
      text = valid;
      int edits = 1 + static_cast<int>(random() % 8);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        size_t at = random() % text.size();
        switch (random() % 4) {
          case 0: text[at] = alphabet[random() % alphabet.size()]; break;
          case 1: text.erase(at, 1 + random() % 40); break;
          case 2: text.insert(at, text.substr(random() % text.size(), random() % 60)); break;
          default: text.resize(at); break;
        }
      }
    }
    try {
      NodeSystem system = importTopologyXml(parseXml(text, "fuzz"), "fuzz");
      for (int a : system.graph.gpus()) {
        for (int n : system.graph.nets()) system.graph.path(a, n);
      }
      writeXml(exportTopologyXml(system));
      ++parsed;
    } catch (const tutti::Error& error) {
      CHECK(std::string(error.what()).rfind("fuzz:", 0) == 0);
      ++rejected;
    }
  }
  CHECK(parsed > 0);
  CHECK(rejected > 0);
}
