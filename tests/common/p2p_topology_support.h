// A node whose GPUs sit at every PCI distance, for the tests of NCCL_P2P_LEVEL: its graph, the bus
// ids of its GPUs, and the path type between each pair as the node was built (not as the graph
// computes it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/common/env_support.h"
#include "topology/graph.h"

namespace tutti_test {

// Two Intel CPU sockets. Socket 0: PCIe switch A holding switches A1 (GPUs 0 and 1) and A2 (GPU 2),
// and switch C (GPU 4). Socket 1: switch B (GPU 3). GPU 0 to 1: PIX; 0 or 1 to 2: PXB; 0, 1 or 2
// to 4: PHB; anything to 3: SYS. `cpuVendor` "AuthenticAMD" makes the CPUs AMD's.
tutti::topo::NodeSystem p2pTestNode(const std::string& cpuVendor = "GenuineIntel");
// The GPUs' bus ids, by GPU number above.
const std::vector<std::string>& p2pTestBusIds();
// The path type between GPUs a and b of the node, by construction.
tutti::topo::PathType p2pTestPath(int a, int b);

// A node of two GPUs (bus ids nvlinkTestBusIds()) of compute capability `sm` under one PCIe
// switch, joined by NVLink: NVL apart, where NCCL's default for read mode looks (sm 80).
tutti::topo::NodeSystem nvlinkTestNode(int sm);
const std::vector<std::string>& nvlinkTestBusIds();

// Where ranks run on emulated devices placed in a node's topology, while it lives: TUTTI_DEVICE=
// emulated, TUTTI_EMULATED_MEMORY=`memory`, the node saved as NCCL_TOPO_FILE, the devices' bus ids
// as TUTTI_EMULATED_BUS_IDS (device i has busIds[i]), and NCCL_SOCKET_IFNAME=lo.
class EmulatedNodeSetup {
 public:
  explicit EmulatedNodeSetup(const tutti::topo::NodeSystem& node = p2pTestNode(),
                             const std::vector<std::string>& busIds = p2pTestBusIds(), const char* memory = "device");
  ~EmulatedNodeSetup();  // removes the topology file
  EmulatedNodeSetup(const EmulatedNodeSetup&) = delete;
  EmulatedNodeSetup& operator=(const EmulatedNodeSetup&) = delete;

 private:
  std::string dir_;
  ScopedEnv device_{"TUTTI_DEVICE", "emulated"};
  ScopedEnv ifname_{"NCCL_SOCKET_IFNAME", "lo"};
  std::optional<ScopedEnv> memory_, topo_, busIds_;
};

}  // namespace tutti_test
