// Whether two GPUs of one node may connect peer to peer, decided as NCCL decides it: from the path
// type between them in the node's graph, NCCL_P2P_LEVEL (or the node's default level),
// NCCL_P2P_DISABLE, and whether the receiver reads the sender's memory (NCCL_P2P_READ_ENABLE).
#pragma once

#include <optional>
#include <string>

#include "topology/graph.h"

namespace tutti::topo {

// NCCL_P2P_LEVEL's syntax, as NCCL reads it: a path type name (LOC, NVL, NVB, PIX, PXB, PHB, SYS;
// any case), or NCCL's legacy number (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 or more SYS; numbers never
// meant NVL). NCCL's C2C, PXN and P2C, which this graph never yields between GPUs, allow the same
// paths here as the nearest type it does yield at or below them: NVB, PXB, PXB. Throws
// tutti::Error (InvalidUsage) naming `variable` for anything else.
PathType parseP2pLevel(const std::string& text, const std::string& variable = "NCCL_P2P_LEVEL");

// The level NCCL takes when NCCL_P2P_LEVEL is unset: PXB (p2p through PCIe switches but not through
// a CPU's host bridge), except SYS on AMD x86 hosts with at most two GPUs (where the pair sits
// behind the CPU's own fabric). `why` gets the reason in a few words.
PathType defaultP2pLevel(const TopologyGraph& graph, std::string* why = nullptr);

// Two ranks' GPUs on one node, as the decision needs them. Both ends of a pair compute the same.
struct GpuPair {
  bool known = false;  // both ranks have a GPU placed in their node's graph
  PathType path = PathType::SYS;
  std::string busIds[2];
  int sm[2] = {0, 0};
  PathType defaultLevel = PathType::PXB;
  std::string defaultWhy;
};
// The GPUs at graph indices a and b of one node (the same index: ranks sharing one GPU, LOC).
GpuPair gpuPair(const TopologyGraph& graph, int a, int b);

// The variables, read once per decision.
struct P2pSettings {
  bool disabled = false;          // NCCL_P2P_DISABLE
  std::optional<PathType> level;  // NCCL_P2P_LEVEL; unset: the node's default
  std::string levelText;          // as the user wrote it, for messages
  int readEnable = -2;            // NCCL_P2P_READ_ENABLE: -2 unset (from the path), 0 write, else read
  bool useCudaMemcpy = false;     // NCCL_P2P_USE_CUDA_MEMCPY
};
// From the environment (base/tunables.h); throws InvalidUsage for a malformed value.
P2pSettings p2pSettingsFromEnvironment();

struct P2pDecision {
  bool allowed = false;
  // The receiver would read from the sender's memory (NCCL's P2P read mode): NCCL_P2P_READ_ENABLE,
  // or by default NVLink between two GPUs of compute capability 8.0, as NCCL chooses it.
  bool read = false;
  std::string reason;  // why, in one line, for the INFO log and "no transport can connect"
};
// The decision for one pair. Where the GPUs are unknown (a host process, a device without a PCI bus
// id, a GPU missing from the graph) only NCCL_P2P_DISABLE and NCCL_P2P_LEVEL=LOC refuse, as before
// the distance could be looked up.
P2pDecision decideP2p(const GpuPair& pair, const P2pSettings& settings);

}  // namespace tutti::topo
