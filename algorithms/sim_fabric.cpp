// Fabrics for the cost model: synthetic GPU clusters, host mode, and from a topology summary.
#include <algorithm>
#include <cstdio>

#include "algorithms/sim.h"
#include "base/error.h"

namespace tutti::sim {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorCode::InvalidArgument, "sim fabric: " + what);
}

// The executor's figures, shared by every way of making a fabric.
void setExecutor(Fabric& f, double stepOverheadUs, double channelGBps, double copyGBps) {
  f.stepOverheadUs = stepOverheadUs;
  f.channelGBps = channelGBps;
  f.copyGBps = copyGBps;
}

}  // namespace

std::string Fabric::describe() const {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "%s: %d ranks on %d node(s) (up to %d per node); local %.1f us %.1f GB/s; network %.1f us %.1f GB/s x %d "
      "NIC(s) per node; step overhead %.2f us; channel %.1f GB/s; copy %.1f GB/s",
      name.c_str(), nranks, nodes, ranksPerNode, local.latencyUs, local.gbps, network.latencyUs, network.gbps,
      nicsPerNode, stepOverheadUs, channelGBps, copyGBps);
  std::string out = text;
  if (coresPerNode > 0) {
    std::snprintf(text, sizeof text, "; %d core(s) per node, %d worker(s) per rank", coresPerNode, workersPerRank);
    out += text;
  }
  return out;
}

double Fabric::threadShare(int nchannels) const {
  if (coresPerNode <= 0) return 1;
  int workers = workersPerRank > 0 ? std::min(std::max(1, nchannels), workersPerRank) : std::max(1, nchannels);
  double threads = double(ranksPerNode) * workers;
  return std::min(1.0, double(coresPerNode) / threads);
}

Fabric Fabric::atChannels(int nchannels) const {
  double slower = threadShare(1) / threadShare(nchannels);
  Fabric f = *this;
  if (slower <= 1) return f;
  f.stepOverheadUs *= slower;
  f.local.latencyUs *= slower;  // a wake-up waits for a core
  f.channelGBps /= slower;
  f.copyGBps /= slower;
  return f;
}

// A handoff is the sender's step (FIFO bookkeeping and a bell ring, often a futex wake-up) and
// the receiver's wait until it runs; the model splits it evenly between the step overhead and
// the latency. (On the 2-core test VM the executor's 8-byte all-reduce times, ring's 2(n-1)
// steps against recursive doubling's two steps a round, fit about 2.8 us of overhead and 3.7 us
// of latency at 4 ranks: near an even split.)
constexpr double kStepShareOfHop = 0.5;

// The executor's rate per core against the cache-resident float sum of calibrateHost's 64 KiB
// buffers: on the 2-core test VM the executor's steps move 11-16 GB/s per core (16 MiB ring,
// 256 KiB recursive doubling; perf/RESULTS.md, "Selector against fixed algorithms"), the
// cache-resident float sum about 60 GB/s.
constexpr double kStreamingShare = 0.25;

Fabric::HostFigures hostFigures(const HostMeasurements& m, int ranksPerHost, const Fabric::HostFigures& base) {
  require(m.hopUs > 0 && m.copyGBps > 0 && m.reduceGBps > 0,
          "host measurements need a positive handoff time and bandwidths");
  require(ranksPerHost >= 1, "host measurements need ranks per host >= 1");
  Fabric::HostFigures f = base;
  // With more ranks than cores a rank's thread runs a share of the time (the handoff was timed
  // under that load already).
  double share = m.cores > 0 ? std::min(1.0, double(m.cores) / ranksPerHost) : 1.0;
  f.stepOverheadUs = kStepShareOfHop * m.hopUs;
  f.shm.latencyUs = (1 - kStepShareOfHop) * m.hopUs;
  // The bandwidths were measured on cache-resident buffers (streaming enough fresh memory from
  // DRAM would cost tens of milliseconds of page faults on a VM), while the executor's steps
  // stream user buffers and read FIFO slots another core wrote: they run at a fraction of it.
  double reduceGBps = m.reduceGBps * kStreamingShare;  // most steps of a reduction read two inputs
  double copyGBps = m.copyGBps * kStreamingShare;
  f.channelGBps = reduceGBps * share;
  f.copyGBps = copyGBps * share;
  // A rank's port: its part of the host's cores, as far as its workers can use them.
  double cores = m.cores > 0 ? double(m.cores) / ranksPerHost : 1.0;
  if (base.workersPerRank > 0) cores = std::min(cores, double(base.workersPerRank));
  f.shm.gbps = copyGBps * std::max(share, cores);
  f.cores = m.cores;
  return f;
}

// Default figures, from public specifications:
// - NVLink 4 (H100/H200 SXM): 18 links x 25 GB/s = 450 GB/s per direction per GPU through
//   NVSwitch (NVIDIA H100 datasheet: "900 GB/s" bidirectional); GPU-to-GPU latency ~1-2 us as
//   seen by a collective step, 1.5 us used.
// - NIC: ConnectX-7 / 400 Gb/s InfiniBand NDR = 50 GB/s per direction; end-to-end latency of an
//   RDMA write with completion ~3-5 us through one switch level, 4 us used. DGX H100 has 8 such
//   NICs for 8 GPUs.
// - One channel (one CUDA block of the executor) moves ~20 GB/s: NCCL needs 16-32 channels to
//   fill 450 GB/s of NVLink.
// - HBM3 copy: ~3.35 TB/s (H100) read+write, so ~1.5 TB/s of copy.
// - Step overhead: ~0.4 us of flag polling and fences per FIFO step.
Fabric Fabric::synthetic(int nodes, int gpusPerNode, int nicsPerNode) {
  require(nodes >= 1 && gpusPerNode >= 1 && nicsPerNode >= 1,
          "synthetic needs nodes, GPUs per node and NICs per node >= 1");
  require(int64_t(nodes) * gpusPerNode <= 10'000'000, "synthetic: too many ranks");
  Fabric f;
  f.name = "synthetic " + std::to_string(nodes) + "x" + std::to_string(gpusPerNode) + " GPUs, " +
           std::to_string(nicsPerNode) + " NIC(s) per node";
  f.nranks = nodes * gpusPerNode;
  f.nodes = nodes;
  f.ranksPerNode = gpusPerNode;
  f.local = {1.5, 450.0};
  f.network = {4.0, 50.0};
  f.nicsPerNode = nicsPerNode;
  setExecutor(f, 0.4, 20.0, 1500.0);
  return f;
}

Fabric Fabric::host(int nranks, int ranksPerHost, const HostFigures& figures) {
  require(nranks >= 1 && ranksPerHost >= 1, "host needs nranks and ranks per host >= 1");
  require(figures.shm.gbps > 0 && figures.tcp.gbps > 0 && figures.channelGBps > 0 && figures.copyGBps > 0,
          "host figures need positive bandwidths");
  Fabric f;
  f.name = "host " + std::to_string(nranks) + " ranks, " + std::to_string(ranksPerHost) + " per host";
  f.nranks = nranks;
  f.ranksPerNode = std::min(ranksPerHost, nranks);
  f.nodes = (nranks + f.ranksPerNode - 1) / f.ranksPerNode;
  f.local = figures.shm;
  f.network = figures.tcp;
  f.nicsPerNode = std::max(1, figures.nicsPerHost);
  setExecutor(f, figures.stepOverheadUs, figures.channelGBps, figures.copyGBps);
  f.coresPerNode = std::max(0, figures.cores);
  f.workersPerRank = std::max(0, figures.workersPerRank);
  f.hostExecutor = true;
  return f;
}

Fabric fabricFromTopology(const TopologySummary& t) {
  require(!t.nodeOfRank.empty(), "topology summary has no ranks");
  require(t.intraNode.gbps > 0 && t.nic.gbps > 0 && t.channelGBps > 0 && t.copyGBps > 0,
          "topology summary needs positive bandwidths");
  Fabric f;
  f.name = "topology";
  f.nranks = int(t.nodeOfRank.size());
  std::vector<int> perNode;
  for (int node : t.nodeOfRank) {
    require(node >= 0, "topology summary: negative node index");
    if (size_t(node) >= perNode.size()) perNode.resize(size_t(node) + 1, 0);
    perNode[size_t(node)]++;
  }
  f.nodes = int(perNode.size());
  f.ranksPerNode = *std::max_element(perNode.begin(), perNode.end());
  f.nodeOfRank = t.nodeOfRank;
  f.local = t.intraNode;
  f.network = t.nic;
  f.nicsPerNode = std::max(1, t.nicsPerNode);
  setExecutor(f, t.stepOverheadUs, t.channelGBps, t.copyGBps);
  return f;
}

}  // namespace tutti::sim
