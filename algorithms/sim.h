// The cost model: a fabric (ranks on nodes, link classes, NICs), an exact event-driven timing of
// a set of rank plans on it, and an analytic alpha-beta estimate per algorithm name that stays
// cheap at 100,000 ranks. The selector (selector.h) and tools/tutti-sim are built on it.
//
// Units: microseconds and GB/s (1 GB/s moves 1e3 bytes per microsecond).
//
// Message size convention (as nccl-tests counts it): `bytes` is the size of the largest buffer
// of the operation. AllReduce, Broadcast, Reduce, Send/Recv: the buffer. AllGather: the output
// (nranks blocks); ReduceScatter: the input; AlltoAll, Gather, Scatter: the nranks-block buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/lane.h"
#include "algorithms/tiling.h"

namespace tutti::sim {

// The units above: bytes per microsecond in one GB/s.
constexpr double kBytesPerUsPerGBps = 1e3;

// One class of link, one direction.
struct Link {
  double latencyUs = 0;  // from the sender's write to the receiver seeing the data
  double gbps = 0;       // bandwidth per direction
};

// Where a rank plan's bytes can go. Ranks are placed on nodes; two ranks of one node talk over
// `local` (each rank has one port of that bandwidth in and one out, shared by its concurrent
// transfers: NVLink through NVSwitch, or a host's memory bus for shm); ranks of different nodes
// talk over `network`, through the node's NICs: each transfer is limited to one NIC's bandwidth
// and the node's inter-node traffic shares `nicsPerNode` NICs (in and out separately).
struct Fabric {
  std::string name;
  int nranks = 1;
  int nodes = 1;
  int ranksPerNode = 1;         // the most ranks of any node
  std::vector<int> nodeOfRank;  // empty: rank r is on node r / ranksPerNode
  Link local;
  Link network;  // one NIC
  int nicsPerNode = 1;
  double stepOverheadUs = 0;  // software cost of issuing one step (a FIFO slot's bookkeeping)
  double channelGBps = 0;     // the most one channel's executor moves (one CUDA block, one thread)
  double copyGBps = 0;        // local copies (plan Copy steps)
  // Host mode: the cores a node's ranks share, and the most worker threads a rank runs (one per
  // channel up to that). 0 cores: executors do not compete for cores (a GPU's blocks).
  int coresPerNode = 0;
  int workersPerRank = 0;     // 0: one per channel, without bound
  bool hostExecutor = false;  // host mode: CPU threads copy every byte (Fabric::host)
  // Host mode, one node: the largest all-reduce (bytes) whose one-shot form runs through the
  // ranks' shared mailboxes (kernels/mailbox.h) rather than its plan's FIFOs. 0: none.
  size_t mailboxBytes = 0;

  int nodeOf(int rank) const { return nodeOfRank.empty() ? rank / ranksPerNode : nodeOfRank[size_t(rank)]; }
  bool sameNode(int a, int b) const { return nodeOf(a) == nodeOf(b); }
  const Link& linkBetween(int a, int b) const { return sameNode(a, b) ? local : network; }
  std::string describe() const;

  // The figures above hold for one channel (one worker thread per rank). With more, a node's
  // ranks run ranksPerNode x workers threads; past its cores they take turns, so each thread
  // gets a smaller share of a core: a step's overhead and a wake-up's latency grow, and a
  // channel's and a copy's bandwidth shrink, by the ratio of the shares. More channels than the
  // cores can run then never look faster. Identity when coresPerNode is 0.
  double threadShare(int nchannels) const;
  Fabric atChannels(int nchannels) const;

  // A GPU cluster of `nodes` x `gpusPerNode` ranks with default figures from public
  // specifications (see sim_fabric.cpp).
  static Fabric synthetic(int nodes, int gpusPerNode, int nicsPerNode);

  // Host mode: ranks are CPU threads/processes; shared memory inside a host, TCP between hosts.
  struct HostFigures {
    Link shm{1.0, 8.0};    // a futex wake-up and a memcpy through a shared segment
    Link tcp{25.0, 1.25};  // 10 GbE
    int nicsPerHost = 1;
    double stepOverheadUs = 2.0;
    double channelGBps = 8.0;  // one worker thread's memcpy
    double copyGBps = 8.0;
    int cores = 0;           // cores per host (0: not counted)
    int workersPerRank = 0;  // worker threads per rank (0: one per channel)
  };
  static Fabric host(int nranks, int ranksPerHost, const HostFigures& figures);
  static Fabric host(int nranks, int ranksPerHost) { return host(nranks, ranksPerHost, HostFigures{}); }
};

// What a host measures at init (runtime/comm/calibrate.h), as every rank agreed on it. Bandwidths
// are one thread's, alone on its core, on cache-resident buffers; the handoff is a token's lap
// around the host's ranks divided by their number (each waiting for its predecessor, as in a
// ring collective).
struct HostMeasurements {
  double hopUs = 0;       // one handoff: a rank rings the next rank's bell, that rank's wait sees it
  double copyGBps = 0;    // memcpy
  double reduceGBps = 0;  // float sum of two buffers into a third
  int cores = 0;          // cores the host's ranks can run on
};

// Host figures for ranksPerHost ranks (one channel each) on a host that measured `m`; the TCP
// figures are taken from `base`. Pure, so that tests can feed it made-up measurements.
Fabric::HostFigures hostFigures(const HostMeasurements& m, int ranksPerHost, const Fabric::HostFigures& base = {});

// What the topology module hands over to build a fabric from a discovered (or XML) system:
// which node each rank is on, the intra-node path (slowest GPU-to-GPU or shm path of a node)
// and one NIC's path, and the executor's figures.
struct TopologySummary {
  std::vector<int> nodeOfRank;  // one entry per rank
  Link intraNode;
  Link nic;
  int nicsPerNode = 1;
  double stepOverheadUs = 0.4;
  double channelGBps = 20.0;
  double copyGBps = 1500.0;
};
Fabric fabricFromTopology(const TopologySummary& topology);

// How an operation is cut: chunk size (at most a FIFO slot), FIFO depth and channels.
struct Pipeline {
  size_t chunkBytes = 512 * 1024;  // NCCL_BUFFSIZE 4 MiB / TUTTI_NSTEPS 8
  int fifoSlots = 8;
  int nchannels = 1;
};

// The chunk an operation moves per step is tiling::chunkBytesFor's (tiling.h), with `bytes` as
// above; why large slots are halved for operations of a few MiB: perf/RESULTS.md, "The FIFO slot
// over TCP".

// Whether `bytes` (the convention above) counts nranks blocks.
inline bool countsBlocks(plan::Coll coll) {
  return coll == plan::Coll::AllGather || coll == plan::Coll::ReduceScatter || coll == plan::Coll::AlltoAll ||
         coll == plan::Coll::Gather || coll == plan::Coll::Scatter;
}

// What a lane of the operation cuts into channels: the whole buffer (Split, Whole) or one block
// (Blocks), in bytes.
inline size_t laneBytes(plan::Coll coll, plan::Layout layout, size_t bytes, int nranks) {
  return layout == plan::Layout::Blocks && countsBlocks(coll) ? tiling::ceilDiv(bytes, size_t(nranks)) : bytes;
}

// Channel `channel`'s part of a lane: the tiling rule's channel range (tiling.h). The models know
// bytes, not the element type, so they cut as if an element were one byte: ranges are 16-byte
// aligned where the launch's are 16 elements aligned, so a modelled range is off by less than 16
// elements. Channel 0's range is the largest.
inline size_t channelBytes(plan::Coll coll, plan::Layout layout, size_t bytes, int nranks, int nchannels,
                           int channel = 0) {
  return tiling::channelRange(laneBytes(coll, layout, bytes, nranks), nchannels, channel).size();
}

// The channels that move any of a lane of `laneBytes` (at least 1): a lane shorter than
// nchannels aligned ranges leaves the last channels empty, and an empty channel neither moves
// bytes nor shares a port. The analytic model costs this many channels, each as channel 0.
inline int busyChannels(size_t laneBytes, int nchannels) {
  size_t per = tiling::channelElems(laneBytes, nchannels);
  size_t busy = per == 0 ? 1 : tiling::ceilDiv(laneBytes, per);
  return int(std::max<size_t>(1, std::min(busy, size_t(std::max(1, nchannels)))));
}

// (a) Exact: runs every rank's plan as the executor would, step by step, every channel, every
// tile. `plans[r]` is rank r's plan. Throws tutti::Error (Internal) if the plans deadlock.
// Model (see sim_exact.cpp): a step costs the overhead, then its transfer; a transfer's rate is
// capped by the channel and the link, and each port (a rank's local in/out, a node's NICs in/out)
// is a fluid resource: transfers that overlap on a port share its bandwidth (each reserves
// bytes/capacity of port time, in start order).
struct ExactResult {
  double us = 0;
  size_t steps = 0;      // steps run (a joined run counts once: one message), all ranks and channels
  size_t transfers = 0;  // chunks moved over links
};
ExactResult timePlans(const std::vector<plan::RankPlan>& plans, plan::Coll coll, size_t bytes, const Fabric& fabric,
                      const Pipeline& pipeline);

// (b) Analytic: the estimate for a built-in algorithm by name ("ring", "tree", ... as registry.cpp names them), in
// microseconds, or nothing if the name is not modelled or the algorithm has no form for `coll`:
// the cost its registry entry carries (Algorithm::analyticCost, written beside its plan
// generator on cost_model.h's primitives).
// O(log nranks) work (tree, and Bruck and PAT across nodes: O(g log n) for g ranks per node;
// Bruck and PAT up to 4096 ranks across nodes: O(n log n)). Agrees with timePlans() for every
// registered algorithm within 20% (tree 25%) on tests/algorithms/sim_test.cpp's grid.
std::optional<double> analyticUs(const std::string& algorithm, plan::Coll coll, size_t bytes, const Fabric& fabric,
                                 const Pipeline& pipeline);

// The algorithm names the analytic model knows.
const std::vector<std::string>& modelledAlgorithms();

// nccl-tests' bus bandwidth factor: busbw = algbw * factor.
double busBandwidthFactor(plan::Coll coll, int nranks);

}  // namespace tutti::sim
