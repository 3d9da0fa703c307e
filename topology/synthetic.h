// Synthetic systems: DGX-like nodes described in code, for tests and for planning machines
// this one is not.
#pragma once

#include <string>

#include "topology/graph.h"

namespace tutti::topo {

// One node: two CPU sockets, PCIe switches each pairing GPUs with a NIC (max(nics, 1)
// switches, the first half on socket 0), every GPU on one NVSwitch fabric (sm 90, 18 links).
// With gpus == 0 the NICs hang off the CPUs. Limits: 0..64 GPUs, 0..14 NICs.
NodeSystem syntheticNode(int gpus, int nics, const std::string& hostname = "synthetic0");

// `nodes` such nodes named node0, node1, ...; one rank per GPU, node-major (one rank per node
// when there are no GPUs).
GlobalSystem syntheticCluster(int nodes, int gpus, int nics);

// Copies of one node's graph, as if every node were built the same way.
GlobalSystem replicateNode(const NodeSystem& node, int copies);

}  // namespace tutti::topo
