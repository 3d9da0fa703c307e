// Topology at init (see topo_init.h).
#include "runtime/comm/topo_init.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/connection_setup.h"
#include "topology/discover.h"
#include "topology/exchange.h"
#include "topology/net_ports.h"
#include "topology/xml.h"

namespace tutti {
namespace {

// Discovery costs tens of milliseconds (hwloc walks the machine) and its answer does not change
// while the process runs, so ranks that are threads of one process share it: the one cache of
// the process, immutable once made. Its findings (a VM's NIC without speed or PCI device, a
// container without hwloc's view) are reported here, once per process rather than once per rank
// and communicator.
topo::NodeSystem discoveredNode() {
  static std::once_flag once;
  static topo::NodeSystem node;
  std::call_once(once, [] {
    node = topo::discoverNode();
    reportTopologyFindings("topology discovery", node);
  });
  return node;
}

// The ports of the net backend through which this rank reaches other hosts, when the
// communicator spans hosts and the backend's devices are NICs (transport.h, networkPorts); empty
// otherwise. The net transport is open by then (describeLayout named it).
std::vector<topo::NetPort> backendPorts(const ncclComm* comm) {
  const uint64_t myHost = comm->identity.peers[size_t(comm->identity.rank)].hostHash;
  for (int r = 0; r < comm->identity.nranks; r++)
    if (comm->identity.peers[size_t(r)].hostHash != myHost) return transportTo(comm, r).networkPorts();
  return {};
}

std::string portsText(const std::vector<topo::NetPort>& ports) {
  std::string s;
  for (const topo::NetPort& p : ports)
    s += (s.empty() ? "" : ", ") + p.name + " " + std::to_string(p.speedMbps) + " Mb/s";
  return s;
}

// `ports`: the net backend's devices, which replace the NICs discovery found (not a topology
// file's: the file describes the node as its author wants it seen).
topo::NodeSystem thisNode(const ncclComm* comm, const std::vector<topo::NetPort>& ports) {
  std::string file = tunables::kTopoFile.get(), dump = tunables::kTopoDumpFile.get();
  // One reporter and writer per node: the lowest rank of this host.
  bool lowest = true;
  const uint64_t myHost = comm->identity.peers[size_t(comm->identity.rank)].hostHash;
  for (int r = 0; r < comm->identity.rank; r++) lowest = lowest && comm->identity.peers[size_t(r)].hostHash != myHost;
  topo::NodeSystem node;
  if (file.empty()) {
    node = discoveredNode();
    if (!ports.empty()) {
      const size_t seen = node.notes.size();
      topo::adoptNetPorts(node, ports);
      if (lowest) {
        TUTTI_INFO(log::Graph, "%s: NIC ports of the topology: the net backend's devices: %s", comm->where().c_str(),
                   portsText(ports).c_str());
        for (size_t i = seen; i < node.notes.size(); i++)
          TUTTI_INFO(log::Graph, "%s: %s", comm->where().c_str(), node.notes[i].c_str());
      }
    }
  } else {
    try {
      node = topo::localSystem(file, "");
    } catch (const Error& e) {
      throw Error(ErrorCode::InvalidUsage, comm->where() + ": NCCL_TOPO_FILE: " + e.message());
    }
    if (lowest) reportTopologyFindings(comm->where() + ": NCCL_TOPO_FILE", node);
  }
  if (!dump.empty() && lowest) {
    // As NCCL: a dump that cannot be written costs the dump, not the communicator.
    try {
      topo::saveTopologyFile(node, dump);
    } catch (const Error& e) {
      TUTTI_WARN("%s: NCCL_TOPO_DUMP_FILE: %s; topology not dumped", comm->where().c_str(), e.message().c_str());
    }
  }
  // Nodes are told apart as the communicator tells hosts apart (NCCL_HOSTID may override).
  char id[32];
  std::snprintf(id, sizeof id, "%016llx",
                (unsigned long long)comm->identity.peers[size_t(comm->identity.rank)].hostHash);
  node.bootId = id;
  return node;
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

// One rank's entry of the first exchange: the size of the graph it sends, and its GPU.
struct RankGraphHeader {
  uint64_t bytes = 0;
  char busId[32] = {};  // NUL-terminated; empty: no GPU (a host process, an emulated device without one)
};

// Each rank's GPU in its node's graph, from the bus ids the ranks sent. A GPU the graph lacks (a
// topology file that does not describe this host's GPUs) leaves that rank unplaced, as a host
// process is: its pairs' distance is then unknown, which the p2p decision says in its log line.
void placeGpus(const ncclComm* comm, const std::vector<RankGraphHeader>& headers, topo::GlobalSystem& system) {
  for (size_t r = 0; r < headers.size() && r < system.ranks.size(); r++) {
    const std::string busId(headers[r].busId, strnlen(headers[r].busId, sizeof headers[r].busId));
    if (busId.empty()) continue;
    topo::RankPlacement& place = system.ranks[r];
    const topo::NodeSystem& node = system.nodes[size_t(place.node)];
    place.gpu = node.graph.find(topo::NodeKind::Gpu, topo::normalizeBusId(busId));
    if (place.gpu < 0 && int(r) == comm->identity.rank)
      TUTTI_WARN("%s: this rank's GPU %s is not in the topology of host %s%s: its distance to other GPUs is unknown",
                 comm->where().c_str(), busId.c_str(), node.hostname.c_str(),
                 tunables::kTopoFile.get().empty() ? "" : " (NCCL_TOPO_FILE)");
  }
}

// Channel c follows ring c mod #rings; equal rings share one entry, so that plans are built once
// per distinct order.
void assignRings(CommTopology& t, int nchannels) {
  t.ringOrders.clear();
  t.ringOfChannel.clear();
  for (int c = 0; c < nchannels && !t.channels.rings.empty(); c++) {
    const std::vector<int>& ranks = t.channels.rings[size_t(c) % t.channels.rings.size()].ranks;
    auto same = std::find(t.ringOrders.begin(), t.ringOrders.end(), ranks);
    t.ringOfChannel.push_back(int(same - t.ringOrders.begin()));
    if (same == t.ringOrders.end()) t.ringOrders.push_back(ranks);
  }
}

// Across nodes, channel c's tree plans run its node tree and the complement (topology/channels.h).
void assignTrees(CommTopology& t, int nchannels) {
  t.treePairs.clear();
  t.treeOfChannel.clear();
  if (t.channels.rings.empty() || t.system.nodes.size() < 2) return;
  for (int c = 0; c < nchannels; c++) {
    std::vector<plan::TreeShape> pair;
    for (bool mirrored : {c % 2 == 1, c % 2 == 0}) {
      topo::Tree tree = topo::channelTree(t.system, c, mirrored);
      pair.push_back({std::move(tree.parent), std::move(tree.children)});
    }
    auto same = std::find(t.treePairs.begin(), t.treePairs.end(), pair);
    t.treeOfChannel.push_back(int(same - t.treePairs.begin()));
    if (same == t.treePairs.end()) t.treePairs.push_back(std::move(pair));
  }
}

int crossings(const topo::GlobalSystem& system, const std::vector<int>& ring) {
  int count = 0;
  for (size_t i = 0; i < ring.size(); i++)
    count += system.ranks[size_t(ring[i])].node != system.ranks[size_t(ring[(i + 1) % ring.size()])].node;
  return count;
}

void logRings(const ncclComm* comm, const CommTopology& t) {
  for (size_t i = 0; i < t.ringOrders.size(); i++) {
    std::string channels;
    for (size_t c = 0; c < t.ringOfChannel.size(); c++)
      if (t.ringOfChannel[c] == int(i)) channels += (channels.empty() ? "" : ",") + std::to_string(c);
    TUTTI_INFO(log::Graph, "%s: ring plans on channel(s) %s follow %s (%d node crossing(s))", comm->where().c_str(),
               channels.c_str(), ranksText(t.ringOrders[i]).c_str(), crossings(t.system, t.ringOrders[i]));
  }
}

}  // namespace

void reportTopologyFindings(const std::string& where, const topo::NodeSystem& node) {
  for (const std::string& w : node.warnings) TUTTI_WARN("%s: %s", where.c_str(), w.c_str());
  for (const std::string& n : node.notes) TUTTI_INFO(log::Graph, "%s: %s", where.c_str(), n.c_str());
}

int ringIndexOf(const CommTopology* topology, int channel) {
  if (!topology || topology->ringOfChannel.empty()) return 0;
  return topology->ringOfChannel[size_t(channel) % topology->ringOfChannel.size()];
}

int netDeviceOf(const CommTopology* topology, int rank, int channel) {
  if (!topology || !topology->nicsAreNetDevices || topology->channels.rings.empty() || rank < 0 ||
      size_t(rank) >= topology->system.ranks.size())
    return -1;
  const int node = topology->system.ranks[size_t(rank)].node;
  const topo::Ring& ring = topology->channels.rings[size_t(channel) % topology->channels.rings.size()];
  if (size_t(node) >= ring.nets.size() || ring.nets[size_t(node)] < 0) return -1;
  return std::atoi(
      topology->system.nodes[size_t(node)].graph.node(ring.nets[size_t(node)]).attributeOr("dev", "-1").c_str());
}

int treeIndexOf(const CommTopology* topology, int channel) {
  if (!topology || topology->treeOfChannel.empty()) return 0;
  return topology->treeOfChannel[size_t(channel) % topology->treeOfChannel.size()];
}

const std::vector<plan::TreeShape>& treesOf(const CommTopology* topology, int channel) {
  static const std::vector<plan::TreeShape> none;
  if (!topology || topology->treePairs.empty()) return none;
  return topology->treePairs[size_t(treeIndexOf(topology, channel))];
}

const std::vector<int>& ringOrderOf(const CommTopology* topology, int channel) {
  static const std::vector<int> rankOrder;
  if (!topology || topology->ringOrders.empty()) return rankOrder;
  return topology->ringOrders[size_t(ringIndexOf(topology, channel))];
}

std::unique_ptr<CommTopology> exchangeTopology(ncclComm* comm) {
  // The ranks of a host would all describe the same node: its lowest rank discovers and sends
  // the graph, the others send nothing and take that one (once per node however many ranks and
  // processes share it; the bytes each rank receives grow with the nodes, not the ranks).
  const int nranks = comm->identity.nranks;
  std::vector<int> describer(static_cast<size_t>(nranks));
  std::map<uint64_t, int> lowestOfHost;
  for (int r = 0; r < nranks; r++)
    describer[size_t(r)] = lowestOfHost.emplace(comm->identity.peers[size_t(r)].hostHash, r).first->second;
  // Every rank asks its own backend (ranks agree on NCCL_NET and NCCL_TOPO_FILE), so every rank
  // knows whether the NICs it receives are net devices without being told.
  const std::vector<topo::NetPort> ports =
      tunables::kTopoFile.get().empty() ? backendPorts(comm) : std::vector<topo::NetPort>();
  std::string mine = describer[size_t(comm->identity.rank)] == comm->identity.rank
                         ? topo::serializeSystem(thisNode(comm, ports))
                         : std::string();
  // With each graph's size goes the rank's GPU (its PCI bus id), by which every rank places every
  // rank's GPU in its node's graph.
  std::vector<RankGraphHeader> headers(static_cast<size_t>(nranks));
  RankGraphHeader& own = headers[size_t(comm->identity.rank)];
  own.bytes = mine.size();
  const std::string busId = comm->executor.backend ? comm->executor.backend->deviceBusId() : std::string();
  std::strncpy(own.busId, busId.c_str(), sizeof own.busId - 1);
  comm->identity.bootstrap->allGather(headers.data(), sizeof(RankGraphHeader));
  std::vector<uint64_t> sizes(static_cast<size_t>(nranks));
  for (size_t r = 0; r < sizes.size(); r++) sizes[r] = headers[r].bytes;
  std::vector<size_t> blockSizes(sizes.begin(), sizes.end());
  std::vector<size_t> offset(size_t(nranks) + 1, 0);
  for (size_t r = 0; r < size_t(nranks); r++) offset[r + 1] = offset[r] + blockSizes[r];
  std::vector<char> blocks(offset.back());
  if (!mine.empty()) std::memcpy(blocks.data() + offset[size_t(comm->identity.rank)], mine.data(), mine.size());
  comm->identity.bootstrap->allGatherV(blocks.data(), blockSizes);

  std::vector<std::string> texts;
  std::vector<int> textOfRank(static_cast<size_t>(nranks));
  std::map<int, int> textOfDescriber;
  for (int r = 0; r < nranks; r++) {
    int d = describer[size_t(r)];
    auto [it, added] = textOfDescriber.emplace(d, int(texts.size()));
    if (added) {
      if (sizes[size_t(d)] == 0)
        throw Error(ErrorCode::Remote, comm->where() + ": topology of the communicator: " + comm->describePeer(d) +
                                           " sent no graph of its host");
      texts.emplace_back(blocks.data() + offset[size_t(d)], blockSizes[size_t(d)]);
    }
    textOfRank[size_t(r)] = it->second;
  }
  auto result = std::make_unique<CommTopology>();
  result->nicsAreNetDevices = !ports.empty();
  try {
    result->system = topo::mergeSystems(texts, textOfRank, {});
    placeGpus(comm, headers, result->system);
    result->channels = topo::buildChannels(result->system, 1, comm->settings.nchannels);
    assignRings(*result, comm->settings.nchannels);
    assignTrees(*result, comm->settings.nchannels);
  } catch (const Error& e) {
    throw Error(e.code(), comm->where() + ": topology of the communicator: " + e.message());
  }
  if (comm->identity.rank == 0 || log::enabled(log::Level::Trace, log::Graph)) {
    TUTTI_INFO(log::Graph, "%s: topology: %zu node(s); %d channel(s) (%s)", comm->where().c_str(),
               result->system.nodes.size(), result->channels.channels, result->channels.reason.c_str());
    for (size_t c = 0; c < result->channels.rings.size(); c++)
      TUTTI_INFO(log::Graph, "%s: ring %zu: %s", comm->where().c_str(), c,
                 ranksText(result->channels.rings[c].ranks).c_str());
    logRings(comm, *result);
  }
  return result;
}

}  // namespace tutti
