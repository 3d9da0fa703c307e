// A node whose GPUs sit at every PCI distance, for the tests of NCCL_P2P_LEVEL: its graph, the bus
// ids of its GPUs, and the path type between each pair as the node was built (not as the graph
// computes it).
#pragma once

#include <string>
#include <vector>

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

}  // namespace tutti_test
