// The topology step of communicator init: this node's graph (discovered, or NCCL_TOPO_FILE),
// written to NCCL_TOPO_DUMP_FILE when asked, exchanged between ranks through the bootstrap and
// merged into the global system, from which the channels' rings and trees are derived and
// logged (NCCL_DEBUG_SUBSYS=GRAPH).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/tree_shape.h"
#include "topology/channels.h"
#include "topology/graph.h"

struct ncclComm;

namespace tutti {

struct CommTopology {
  topo::GlobalSystem system;
  topo::ChannelLayout channels;
  // The orders ring plans follow, without repeats (every ring of a host-only layout is the same
  // order): channel c uses ring c mod #rings of the layout, ringOrders[ringOfChannel[c]].
  std::vector<std::vector<int>> ringOrders;
  std::vector<int> ringOfChannel;  // one per channel of the communicator
  // Across nodes, the tree all-reduce's two trees per channel (the channel's node tree first,
  // then its complement), without repeats: channel c uses treePairs[treeOfChannel[c]]. Empty on
  // one node, where the tree plan builds its own along the ring order.
  std::vector<std::vector<plan::TreeShape>> treePairs;
  std::vector<int> treeOfChannel;
  // Whether the nodes' NIC ports are the devices of the net backend between them (IB ports, a
  // plugin's devices), rather than the interfaces discovery found (Socket) or a topology file's:
  // then channel c's connections across nodes go through the port its ring takes (netDeviceOf),
  // and the selector's network is those ports.
  bool nicsAreNetDevices = false;
};

// Which of ringOrders channel `channel` follows; 0 without a topology.
int ringIndexOf(const CommTopology* topology, int channel);
// The ring order of channel `channel`; empty (rank order) without a topology.
const std::vector<int>& ringOrderOf(const CommTopology* topology, int channel);

// Which of treePairs channel `channel` uses; 0 without one.
int treeIndexOf(const CommTopology* topology, int channel);
// The trees of channel `channel`'s tree plans; empty on one node or without a topology.
const std::vector<plan::TreeShape>& treesOf(const CommTopology* topology, int channel);

// The net device rank `rank`'s connections of channel `channel` go through across nodes: the
// <net dev> of the port the channel's ring takes on the rank's node; -1 where the topology's NICs
// are not the backend's devices, or it has none (the transport then chooses).
int netDeviceOf(const CommTopology* topology, int rank, int channel);

// Logs a node's findings, each prefixed `where`: its warnings (what the user should act on) at
// WARN, its notes (fallbacks that need nothing, such as a VM's NIC without a speed) at INFO GRAPH.
void reportTopologyFindings(const std::string& where, const topo::NodeSystem& node);

// Collective over the communicator's ranks (two bootstrap allgathers). Discovery problems and an
// unwritable NCCL_TOPO_DUMP_FILE are logged (WARN or INFO), never a failed init; a malformed
// NCCL_TOPO_FILE is an InvalidUsage error naming the file.
std::unique_ptr<CommTopology> exchangeTopology(ncclComm* comm);

}  // namespace tutti
