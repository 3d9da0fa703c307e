// Fabrics for the cost model: synthetic GPU clusters, host mode, and from a topology summary.
#include <algorithm>
#include <cstdio>

#include "algorithms/sim.h"
#include "runtime/error.h"

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
  std::snprintf(text, sizeof text,
                "%s: %d ranks on %d node(s) (up to %d per node); local %.1f us %.1f GB/s; network %.1f us %.1f GB/s x %d "
                "NIC(s) per node; step overhead %.2f us; channel %.1f GB/s; copy %.1f GB/s",
                name.c_str(), nranks, nodes, ranksPerNode, local.latencyUs, local.gbps, network.latencyUs, network.gbps,
                nicsPerNode, stepOverheadUs, channelGBps, copyGBps);
  return text;
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
  require(nodes >= 1 && gpusPerNode >= 1 && nicsPerNode >= 1, "synthetic needs nodes, GPUs per node and NICs per node >= 1");
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
