// The p2p decision between two GPUs of a node (see p2p_level.h).
#include "topology/p2p_level.h"

#include <cctype>

#include "base/error.h"
#include "base/tunables.h"

namespace tutti::topo {
namespace {

std::string upper(const std::string& text) {
  std::string out;
  for (char c : text) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// What a path type means, for the INFO line.
const char* pathMeaning(PathType type) {
  switch (type) {
    case PathType::LOC: return "one GPU";
    case PathType::NVL: return "NVLink";
    case PathType::NVB: return "NVLink through another GPU";
    case PathType::PIX: return "one PCIe switch";
    case PathType::PXB: return "several PCIe switches, no host bridge";
    case PathType::PHB: return "through a CPU's PCIe host bridge";
    case PathType::SYS: return "across the CPU sockets' interconnect";
    case PathType::NET: return "the network";
  }
  return "?";
}

}  // namespace

PathType parseP2pLevel(const std::string& text, const std::string& variable) {
  const std::string name = upper(text);
  // NCCL's types that this graph never yields between GPUs, by the paths they allow here.
  if (name == "C2C") return PathType::NVB;
  if (name == "PXN" || name == "P2C") return PathType::PXB;
  if (name != "NET") {
    for (int t = 0; t <= static_cast<int>(PathType::SYS); ++t)
      if (name == pathTypeName(static_cast<PathType>(t))) return static_cast<PathType>(t);
  }
  // NCCL's numbers from before names were allowed: an index into LOC PIX PXB PHB SYS, larger is SYS.
  bool digits = !name.empty() && name.size() <= 9;
  for (char c : name) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    static const PathType legacy[] = {PathType::LOC, PathType::PIX, PathType::PXB, PathType::PHB, PathType::SYS};
    const long n = std::stol(name);
    return n >= 4 ? PathType::SYS : legacy[n];
  }
  throw Error(
      ErrorCode::InvalidUsage,
      variable + "='" + text +
          "': expected LOC, NVL, NVB, PIX, PXB, PHB or SYS (or NCCL's legacy 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS)");
}

PathType defaultP2pLevel(const TopologyGraph& graph, std::string* why) {
  bool amd = false;
  for (int cpu : graph.nodesOf(NodeKind::Cpu)) {
    const Node& node = graph.node(cpu);
    const std::string arch = node.attributeOr("arch", "");
    amd = amd || ((arch == "x86_64" || arch == "x86") && node.attributeOr("vendor", "") == "AuthenticAMD");
  }
  const size_t gpus = graph.nodesOf(NodeKind::Gpu).size();
  if (amd && gpus <= 2) {
    if (why) *why = "default for AMD x86 hosts with at most 2 GPUs";
    return PathType::SYS;
  }
  if (why) *why = "default";
  return PathType::PXB;
}

GpuPair gpuPair(const TopologyGraph& graph, int a, int b) {
  GpuPair pair;
  pair.known = true;
  pair.path = graph.path(a, b).type;
  pair.busIds[0] = graph.node(a).name;
  pair.busIds[1] = graph.node(b).name;
  pair.sm[0] = graph.node(a).sm();
  pair.sm[1] = graph.node(b).sm();
  pair.defaultLevel = defaultP2pLevel(graph, &pair.defaultWhy);
  return pair;
}

P2pSettings p2pSettingsFromEnvironment() {
  P2pSettings s;
  s.disabled = tunables::kP2pDisable.get();
  s.levelText = tunables::kP2pLevel.get();
  if (!s.levelText.empty()) s.level = parseP2pLevel(s.levelText);  // empty counts as unset, as in NCCL
  s.readEnable = int(tunables::kP2pReadEnable.get());
  s.useCudaMemcpy = tunables::kP2pUseCudaMemcpy.get();
  return s;
}

P2pDecision decideP2p(const GpuPair& pair, const P2pSettings& settings) {
  P2pDecision d;
  if (settings.disabled) {
    d.reason = "NCCL_P2P_DISABLE is set";
    return d;
  }
  if (settings.level == PathType::LOC) {
    d.reason = "NCCL_P2P_LEVEL=" + settings.levelText + " allows no peer-to-peer path";
    return d;
  }
  if (!pair.known) {
    d.allowed = true;
    d.read = settings.readEnable > 0;
    d.reason =
        "the GPUs' distance is unknown (a rank's device has no PCI bus id in the node's topology), so only "
        "NCCL_P2P_DISABLE "
        "and NCCL_P2P_LEVEL=LOC refuse";
    return d;
  }
  const PathType level = settings.level.value_or(pair.defaultLevel);
  const std::string levelWhy =
      settings.level ? "NCCL_P2P_LEVEL=" + settings.levelText + " allows up to " + pathTypeName(level)
                     : std::string("NCCL_P2P_LEVEL unset: ") + pathTypeName(level) + " (" + pair.defaultWhy + ")";
  d.allowed = static_cast<int>(pair.path) <= static_cast<int>(level);
  d.reason = "GPUs " + pair.busIds[0] + " and " + pair.busIds[1] + " are " + pathTypeName(pair.path) + " apart (" +
             pathMeaning(pair.path) + "); " + levelWhy;
  if (!d.allowed) return d;
  if (settings.readEnable != -2) {
    d.read = settings.readEnable != 0;
  } else {
    // NCCL reads rather than writes only over NVLink between two GPUs of compute capability 8.0.
    d.read = pair.path == PathType::NVL && pair.sm[0] == pair.sm[1] && pair.sm[0] == 80;
  }
  return d;
}

}  // namespace tutti::topo
