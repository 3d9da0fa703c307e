// A node's NICs from its net backend's devices: placement under the PCI function, switch or CPU
// the device's sysfs path shows, one NIC per PCI function, ports numbered in the backend's order.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/topology/topology_support.h"
#include "topology/net_ports.h"
#include "topology/xml.h"

using namespace tutti::topo;

namespace {

Node cpuNode(int numa) {
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.name = "cpu" + std::to_string(numa);
  cpu.attributes = {{"numaid", std::to_string(numa)}};
  return cpu;
}

// Two CPUs, a PCI switch under CPU 1, and a discovered interface eth0 under CPU 0's NIC.
NodeSystem discoveredLike() {
  NodeSystem system;
  system.hostname = "node";
  system.bootId = "boot";
  TopologyGraph& g = system.graph;
  int cpu0 = g.addNode(cpuNode(0));
  int cpu1 = g.addNode(cpuNode(1));
  Node sw;
  sw.kind = NodeKind::PciSwitch;
  sw.name = "0000:17:00.0";
  sw.parent = cpu1;
  sw.attributes = {{"busid", sw.name}};
  g.addNode(sw);
  Node nic;
  nic.kind = NodeKind::Nic;
  nic.name = "0000:7e:1d.0";
  nic.parent = cpu0;
  nic.attributes = {{"busid", nic.name}};
  int n = g.addNode(nic);
  Node eth;
  eth.kind = NodeKind::Net;
  eth.name = "eth0";
  eth.parent = n;
  eth.attributes = {{"name", "eth0"}, {"dev", "0"}, {"speed", "10000"}};
  g.addNode(eth);
  g.buildLinks(system.warnings);
  return system;
}

}  // namespace

TEST_CASE("net ports: the backend's devices replace discovery's NICs, each under its PCI function, switch or CPU") {
  tutti_test::TempDir root;
  // An HCA with two ports behind the switch (reached through a class link, as ibdev_path gives it),
  // a NIC on CPU 1's root complex with no switch the graph knows, and a port with no PCI device.
  const std::string hca = root.file("sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0");
  tutti_test::writeFile(hca + "/class", "0x020700\n");
  tutti_test::writeFile(hca + "/current_link_speed", "16.0 GT/s PCIe\n");
  tutti_test::writeFile(hca + "/current_link_width", "16\n");
  tutti_test::writeFile(hca + "/numa_node", "0\n");  // the switch above wins over it
  std::filesystem::create_directories(root.file("sys/class/infiniband/mlx5_0"));
  std::filesystem::create_directory_symlink(hca, root.file("sys/class/infiniband/mlx5_0/device"));
  const std::string other = root.file("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0");
  tutti_test::writeFile(other + "/numa_node", "1\n");
  tutti_test::writeFile(other + "/class", "0x020000\n");

  NodeSystem system = discoveredLike();
  const std::string hcaLink = root.file("sys/class/infiniband/mlx5_0/device");
  std::vector<NetPort> ports = {
      {"mlx5_0:1", hcaLink, 0x1234, 200000, 1, 65536, false},
      {"mlx5_0:2", hcaLink, 0x1234, 200000, 2, 65536, false},
      {"mlx5_1:1", other + "/infiniband/mlx5_1", 0x5678, 100000, 1, 32768, true},
      {"virt0", "", 0, 0, 1, 65536, false},
  };
  adoptNetPorts(system, ports);
  const TopologyGraph& g = system.graph;
  INFO(writeXml(exportTopologyXml(system)));

  // The discovered interface and its NIC are gone; the ports come in the backend's order.
  CHECK(g.find(NodeKind::Net, "eth0") < 0);
  CHECK(g.find(NodeKind::Nic, "0000:7e:1d.0") < 0);
  std::vector<int> nets = g.nets();
  REQUIRE(nets.size() == ports.size());
  for (size_t i = 0; i < ports.size(); i++) {
    const Node& net = g.node(nets[i]);
    CHECK(net.name == ports[i].name);
    CHECK(net.attributeOr("dev", "") == std::to_string(i));
    CHECK(net.attributeOr("port", "") == std::to_string(ports[i].port));
    CHECK(net.attributeOr("maxconn", "") == std::to_string(ports[i].maxComms));
    CHECK(net.attributeOr("gdr", "") == (ports[i].gdr ? "1" : "0"));
  }
  CHECK(g.node(nets[0]).attributeOr("speed", "") == "200000");
  CHECK(g.node(nets[0]).netBandwidth() == Approx(25.0));  // 200 Gb/s
  CHECK(g.node(nets[0]).attributeOr("guid", "") == "0x1234");
  CHECK(g.node(nets[2]).netBandwidth() == Approx(12.5));
  // Unknown speed: NCCL's guess, and a note.
  CHECK(g.node(nets[3]).attributeOr("speed", "") == "10000");

  // Both ports of the HCA share its NIC, which sits under the switch on its path, with its PCI facts.
  const int hcaNic = g.find(NodeKind::Nic, "0000:19:00.0");
  REQUIRE(hcaNic >= 0);
  CHECK(g.node(nets[0]).parent == hcaNic);
  CHECK(g.node(nets[1]).parent == hcaNic);
  CHECK(g.node(hcaNic).parent == g.find(NodeKind::PciSwitch, "0000:17:00.0"));
  CHECK(g.node(hcaNic).attributeOr("link_width", "") == "16");
  CHECK(g.node(hcaNic).attributeOr("class", "") == "0x020700");
  CHECK(g.node(g.cpuOf(nets[0])).name == "cpu1");
  // The other NIC: no switch the graph knows on its path, so the CPU of its numa_node.
  const int otherNic = g.find(NodeKind::Nic, "0000:81:00.0");
  REQUIRE(otherNic >= 0);
  CHECK(g.node(nets[2]).parent == otherNic);
  CHECK(g.node(otherNic).parent == g.find(NodeKind::Cpu, "cpu1"));
  // The port without a device: a virtual NIC under the first CPU.
  CHECK(g.node(g.node(nets[3]).parent).kind == NodeKind::Nic);
  CHECK(g.node(g.node(nets[3]).parent).name.empty());
  CHECK(g.node(g.cpuOf(nets[3])).name == "cpu0");
  std::string notes;
  for (const std::string& n : system.notes) notes += n + "\n";
  INFO(notes);
  CHECK(notes.find("NIC port virt0: speed unknown") != std::string::npos);
  CHECK(notes.find("NIC port virt0: no PCI device") != std::string::npos);
  CHECK(notes.find("mlx5_0") == std::string::npos);
  CHECK(system.warnings.empty());

  // Links are rebuilt: a port reaches its NIC at its own speed, and the HCA's ports reach CPU 1
  // through the switch (PHB: the CPU is an endpoint).
  Path toCpu = g.path(nets[0], g.find(NodeKind::Cpu, "cpu1"));
  CHECK(toCpu.type == PathType::PHB);
  CHECK(toCpu.nodes.size() == 4);  // port, NIC, switch, CPU
  // And the graph goes through NCCL's XML and back unchanged in its ports.
  NodeSystem back = importTopologyXml(parseXml(writeXml(exportTopologyXml(system)), "adopted"), "adopted");
  REQUIRE(back.graph.nets().size() == ports.size());
  for (size_t i = 0; i < ports.size(); i++) CHECK(back.graph.node(back.graph.nets()[i]).name == ports[i].name);
}

TEST_CASE("net ports: no ports leave a node without NICs, as a backend without devices has none") {
  NodeSystem system = discoveredLike();
  adoptNetPorts(system, {});
  CHECK(system.graph.nets().empty());
  CHECK(system.graph.nodesOf(NodeKind::Nic).empty());
  CHECK(system.graph.nodesOf(NodeKind::Cpu).size() == 2);
  CHECK(system.graph.nodesOf(NodeKind::PciSwitch).size() == 1);
}
