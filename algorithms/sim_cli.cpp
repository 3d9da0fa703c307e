// tools/tutti-sim: what the selector would choose, and how long it would take, on a synthetic GPU
// cluster or a host-mode system of any size, per message size.
#include "algorithms/sim_cli.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "algorithms/selector.h"
#include "base/error.h"
#include "topology/discover.h"
#include "topology/graph.h"

namespace tutti::sim {
namespace {

using plan::Coll;

constexpr const char* kUsage =
    "usage: tutti-sim [system] [options]\n"
    "system (one of):\n"
    "  --nodes N --gpus-per-node G --nics-per-node K   synthetic GPU cluster (default 1 x 8, 8 NICs)\n"
    "  --host-ranks N [--host-ranks-per-node M] [--host-cores C]\n"
    "                   host mode: shm inside a host, TCP between; C cores per host (default: not\n"
    "                   counted) makes channels beyond the cores cost their threads' turns\n"
    "  --topo FILE [--nodes N]                         N copies of the node an NCCL topology XML describes\n"
    "options:\n"
    "  --coll NAME      allreduce (default), allgather, reducescatter, broadcast, reduce, alltoall,\n"
    "                   gather, scatter, send, or all\n"
    "  -b SIZE -e SIZE -f FACTOR   sizes from -b to -e, times -f (default 8 to 1G, factor 2)\n"
    "  --algo LIST      NCCL_ALGO syntax (lists, ^, per-collective 'coll:list' separated by ';')\n"
    "  --proto LIST     NCCL_PROTO syntax (the model times Simple, which carries what others cannot)\n"
    "  --all            every candidate's estimate per size, not just the choice\n"
    "  --model-all      also consider modelled algorithms that have no plan yet\n"
    "  --deterministic  only deterministic algorithms\n"
    "  --min-channels N --max-channels N   channel bounds (default 1 and 32; host mode 1 and 2)\n"
    "  --chunk SIZE     FIFO slot size (default 512K)\n";

struct Options {
  int nodes = 1, gpusPerNode = 8, nicsPerNode = 8;
  int hostRanks = 0, hostPerNode = 0, hostCores = 0;
  size_t hostMailboxBytes = 0;  // from the caller, not a flag
  std::string topo;
  std::string coll = "allreduce";
  size_t minBytes = 8, maxBytes = size_t(1) << 30;
  double factor = 2;
  std::string algo, proto;
  bool all = false, modelAll = false, deterministic = false;
  int minChannels = 1, maxChannels = 0;
  size_t chunk = 512 * 1024;
};

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

size_t parseSize(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    bad(flag + ": \"" + text + "\" is not a size");
  }
  std::string unit = text.substr(used);
  double scale = unit.empty() || unit == "B" ? 1
                 : unit == "K"               ? 1024.0
                 : unit == "M"               ? 1048576.0
                 : unit == "G"               ? 1073741824.0
                                             : -1;
  if (scale < 0 || v < 0) bad(flag + ": \"" + text + "\" is not a size (a number with K, M or G)");
  return size_t(v * scale);
}

int parseInt(const std::string& flag, const std::string& text, int min) {
  try {
    size_t used = 0;
    long v = std::stol(text, &used);
    if (used == text.size() && v >= min && v <= 100'000'000) return int(v);
  } catch (const std::exception&) {
  }
  bad(flag + ": \"" + text + "\" is not an integer >= " + std::to_string(min));
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  bool synthetic = false;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) bad(a + " needs a value");
      return args[++i];
    };
    if (a == "--nodes")
      o.nodes = parseInt(a, value(), 1), synthetic = true;
    else if (a == "--gpus-per-node")
      o.gpusPerNode = parseInt(a, value(), 1), synthetic = true;
    else if (a == "--nics-per-node")
      o.nicsPerNode = parseInt(a, value(), 1), synthetic = true;
    else if (a == "--host-ranks")
      o.hostRanks = parseInt(a, value(), 1);
    else if (a == "--host-ranks-per-node")
      o.hostPerNode = parseInt(a, value(), 1);
    else if (a == "--host-cores")
      o.hostCores = parseInt(a, value(), 1);
    else if (a == "--topo")
      o.topo = value();
    else if (a == "--coll")
      o.coll = value();
    else if (a == "-b")
      o.minBytes = parseSize(a, value());
    else if (a == "-e")
      o.maxBytes = parseSize(a, value());
    else if (a == "-f")
      o.factor = double(parseInt(a, value(), 2));
    else if (a == "--algo")
      o.algo = value();
    else if (a == "--proto")
      o.proto = value();
    else if (a == "--all")
      o.all = true;
    else if (a == "--model-all")
      o.modelAll = true;
    else if (a == "--deterministic")
      o.deterministic = true;
    else if (a == "--min-channels")
      o.minChannels = parseInt(a, value(), 1);
    else if (a == "--max-channels")
      o.maxChannels = parseInt(a, value(), 1);
    else if (a == "--chunk")
      o.chunk = parseSize(a, value());
    else
      bad("unknown argument \"" + a + "\"");
  }
  if (o.hostRanks > 0 && synthetic)
    bad("--host-ranks and --nodes/--gpus-per-node/--nics-per-node describe different systems; give one");
  if (o.hostCores > 0 && o.hostRanks == 0) bad("--host-cores describes a host: give --host-ranks too");
  if (int64_t(o.nodes) * o.gpusPerNode > 10'000'000) bad("too many ranks (at most 10,000,000)");
  if (o.minBytes > o.maxBytes) bad("-b is larger than -e");
  if (o.chunk == 0) bad("--chunk must be positive");
  if (o.maxChannels > 0 && o.minChannels > o.maxChannels) bad("--min-channels is larger than --max-channels");
  return o;
}

// --nodes copies of the node an NCCL topology file describes: a rank per GPU, the slowest
// GPU-to-GPU path inside a node, the slowest GPU-to-NIC path (capped by the NIC's speed) out.
Fabric fabricFromFile(const Options& o) {
  topo::NodeSystem node = topo::localSystem(o.topo, "");
  const topo::TopologyGraph& g = node.graph;
  std::vector<int> gpus = g.gpus(), nets = g.nets();
  int perNode = std::max<int>(1, int(gpus.size()));
  TopologySummary t;
  for (int n = 0; n < o.nodes; n++)
    for (int r = 0; r < perNode; r++) t.nodeOfRank.push_back(n);
  t.intraNode = Link{3.0, 24.0};
  bool nvlinkOnly = !gpus.empty();
  double intra = 0;
  for (size_t a = 0; a < gpus.size(); a++)
    for (size_t b = a + 1; b < gpus.size(); b++) {
      topo::Path p = g.path(gpus[a], gpus[b]);
      intra = intra == 0 ? p.bandwidth : std::min(intra, p.bandwidth);
      nvlinkOnly = nvlinkOnly && (p.type == topo::PathType::NVL || p.type == topo::PathType::NVB);
    }
  if (intra > 0) t.intraNode = Link{nvlinkOnly ? 1.5 : 3.0, intra};
  t.nicsPerNode = std::max<int>(1, int(nets.size()));
  double nic = 0;
  for (int net : nets) {
    double speed = g.node(net).netBandwidth();
    for (int gpu : gpus) speed = std::min(speed, g.path(gpu, net).bandwidth);
    nic = nic == 0 ? speed : std::min(nic, speed);
  }
  t.nic = Link{4.0, nic > 0 ? nic : 12.5};
  return fabricFromTopology(t);
}

Fabric fabricOf(const Options& o) {
  if (!o.topo.empty()) return fabricFromFile(o);
  if (o.hostRanks > 0) {
    Fabric::HostFigures figures;
    figures.cores = o.hostCores;
    Fabric f = Fabric::host(o.hostRanks, o.hostPerNode > 0 ? o.hostPerNode : o.hostRanks, figures);
    if (f.nodes == 1) f.mailboxBytes = o.hostMailboxBytes;  // the runtime maps them when all ranks share a host
    return f;
  }
  return Fabric::synthetic(o.nodes, o.gpusPerNode, o.nicsPerNode);
}

std::vector<Coll> collsOf(const std::string& name) {
  std::vector<Coll> colls;
  for (int c = 0; c <= int(Coll::Send); c++)
    if (name == "all" || name == plan::collName(Coll(c))) colls.push_back(Coll(c));
  if (colls.empty()) bad("--coll: unknown collective \"" + name + "\"");
  return colls;
}

// The registry the tool chooses from: the built-ins, and with --model-all a stand-in for every
// modelled name that has no plan yet (serving what the model can estimate).
plan::AlgorithmRegistry registryOf(const Options& o) {
  plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  if (!o.modelAll) return registry;
  Fabric probe = Fabric::synthetic(2, 2, 1);
  for (const std::string& name : modelledAlgorithms()) {
    if (registry.find(name)) continue;
    plan::Algorithm a{name, {}, name == "chain", "cost model only (no plan yet)", nullptr};
    for (int c = 0; c <= int(Coll::Recv); c++)
      if (analyticUs(name, Coll(c), 1024, probe, Pipeline{})) a.colls.push_back(Coll(c));
    registry.add(a);
  }
  return registry;
}

std::string sizeText(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%zu", bytes);
  return text;
}

void sweep(Coll coll, const Options& o, const selector::Context& ctx, std::ostream& out) {
  char line[512];
  out << "#\n# " << plan::collName(coll) << "\n";
  std::snprintf(line, sizeof line, "# %14s  %-12s %-6s %3s %14s %12s %12s  %-12s %14s\n", "size(B)", "algorithm",
                "proto", "ch", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "runner-up", "time(us)");
  out << line;
  std::vector<std::pair<size_t, std::string>> crossovers;
  std::string previous;
  for (double b = double(o.minBytes); b <= double(o.maxBytes); b = b * o.factor) {
    size_t bytes = size_t(b);
    selector::Choice ch = selector::choose(coll, bytes, ctx.fabric.nranks, ctx);
    double algbw = ch.estimateUs > 0 ? double(bytes) / ch.estimateUs / 1e3 : 0;
    double busbw = algbw * busBandwidthFactor(coll, ctx.fabric.nranks);
    char runnerUpUs[32] = "-";
    if (!ch.runnerUp.empty()) std::snprintf(runnerUpUs, sizeof runnerUpUs, "%.2f", ch.runnerUpUs);
    std::snprintf(line, sizeof line, "  %14zu  %-12s %-6s %3d %14.2f %12.3f %12.3f  %-12s %14s", bytes,
                  ch.algorithm.c_str(), ch.protocol.c_str(), ch.nchannels, ch.estimateUs, algbw, busbw,
                  ch.runnerUp.empty() ? "-" : ch.runnerUp.c_str(), runnerUpUs);
    out << line;
    if (o.all)
      for (const selector::Estimate& e : ch.candidates) {
        std::snprintf(line, sizeof line, "  %s=%.2f/%d", e.algorithm.c_str(), e.us, e.nchannels);
        out << line;
      }
    out << "\n";
    if (ch.algorithm != previous) crossovers.emplace_back(bytes, ch.algorithm);
    previous = ch.algorithm;
    if (bytes == 0) break;
  }
  out << "# crossovers " << plan::collName(coll) << ":";
  for (const auto& [bytes, name] : crossovers) out << " " << sizeText(bytes) << "->" << name;
  out << "\n";
}

}  // namespace

int runSimTool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, size_t hostMailboxBytes) {
  for (const std::string& a : args)
    if (a == "-h" || a == "--help") {
      out << kUsage;
      return 0;
    }
  try {
    Options o = parse(args);
    o.hostMailboxBytes = hostMailboxBytes;
    Fabric fabric = fabricOf(o);
    plan::AlgorithmRegistry registry = registryOf(o);
    selector::NameFilter algo = selector::parseAlgoFilter(o.algo, selector::knownAlgorithms(registry));
    selector::NameFilter proto = selector::parseProtoFilter(o.proto);
    selector::Context ctx(fabric, registry, o.algo.empty() ? nullptr : &algo);
    ctx.deterministicOnly = o.deterministic;
    ctx.channels.min = o.minChannels;
    ctx.channels.max = o.maxChannels > 0 ? o.maxChannels : (o.hostRanks > 0 ? 2 : 32);
    ctx.pipeline.chunkBytes = o.chunk;
    out << "# tutti-sim: " << fabric.describe() << "\n";
    out << "# chunk " << o.chunk << " B, " << ctx.pipeline.fifoSlots << " FIFO slots, channels " << ctx.channels.min
        << ".." << ctx.channels.max << (o.algo.empty() ? "" : ", NCCL_ALGO=" + o.algo)
        << (o.deterministic ? ", deterministic only" : "") << "\n";
    for (const std::string& note : algo.notes) out << "# note: " << note << "\n";
    for (const std::string& note : proto.notes) out << "# note: " << note << "\n";
    for (const std::string& info : proto.infos) out << "# note: " << info << "\n";
    for (Coll coll : collsOf(o.coll)) {
      bool served = false;
      for (const plan::Algorithm& a : registry.all()) served = served || a.serves(coll);
      if (served)
        sweep(coll, o, ctx, out);
      else
        out << "#\n# " << plan::collName(coll) << ": no algorithm registered\n";
    }
    return 0;
  } catch (const Error& e) {
    err << "tutti-sim: " << e.message() << "\n";
    if (e.code() == ErrorCode::InvalidArgument) err << kUsage;
    return 1;
  }
}

}  // namespace tutti::sim
