// The fingerprint from the ranks' records, and the header lines before the table (fingerprint.h).
#include "perf/sweep/fingerprint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "perf/sweep/text_format.h"

namespace tutti::perf {

void addRankRecords(Fingerprint& f, const std::vector<RankRecord>& all, int nodes,
                    const std::optional<GroupSplit>& split) {
  std::vector<int> pids;
  std::vector<std::string> transports;  // every rank's, each name once
  for (const RankRecord& r : all) {
    RankDescription& d = f.ranks.emplace_back();
    d.rank = r.rank, d.pid = r.pid, d.localIndex = r.localIndex, d.group = r.colour;
    d.host = std::string(r.host, strnlen(r.host, sizeof r.host));
    d.affinity = std::string(r.affinity, strnlen(r.affinity, sizeof r.affinity));
    d.gpuOrdinal = r.gpuOrdinal;
    d.gpu = std::string(r.gpu, strnlen(r.gpu, sizeof r.gpu));
    d.pciBusId = std::string(r.pciBusId, strnlen(r.pciBusId, sizeof r.pciBusId));
    if (std::find(pids.begin(), pids.end(), r.pid) == pids.end()) pids.push_back(r.pid);
    std::string names(r.transports, strnlen(r.transports, sizeof r.transports));
    for (size_t start = 0; start <= names.size();) {
      size_t end = std::min(names.find('+', start), names.size());
      std::string name = names.substr(start, end - start);
      if (!name.empty() && name != "none" && std::find(transports.begin(), transports.end(), name) == transports.end())
        transports.push_back(name);
      start = end + 1;
    }
  }
  // As the library decided them for each pair of ranks: "local" within a process, "shm" between
  // processes of one node, "net/<backend>" between nodes.
  std::sort(transports.begin(), transports.end());
  f.transports.clear();
  for (const std::string& t : transports) f.transports += (f.transports.empty() ? "" : ", ") + t;
  if (f.transports.empty()) f.transports = "none (one rank)";
  f.topology = std::to_string(all.size()) + " ranks in " + std::to_string(pids.size()) + " processes on " +
               std::to_string(nodes) + " nodes";
  if (split) {
    // The colours as the ranks had them, so the report shows the groups ncclCommSplit made.
    f.split = split->describe();
    std::map<int, std::vector<int>> groups;
    for (const RankRecord& r : all) groups[r.colour].push_back(r.rank);
    for (auto& [colour, ranks] : groups) f.groups.push_back({colour, std::move(ranks)});
  }
}

std::string headerLines(const Fingerprint& f, const HeaderFacts& facts) {
  const Options& opt = facts.options;
  std::string out = printf1("# nccl-tests version 2.19.6 (tutti perf, %s) nccl-headers=%d nccl-library=%d\n",
                            f.tuttiVersion.c_str(), NCCL_VERSION_CODE, facts.ncclVersion);
  out += "# Collective test starting: " + facts.program + "\n";
  out += printf1(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: %d unalign: %d\n",
      facts.threads, opt.gpus, opt.minBytes, opt.maxBytes, opt.stepFactor > 1 ? opt.stepFactor : opt.stepBytes,
      opt.stepFactor > 1 ? "factor" : "bytes", opt.warmupIters, opt.iters, opt.aggIters, opt.check, opt.cudaGraph,
      opt.unalign);
  if (opt.blocking == 1) out += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n";
  if (opt.blocking == 2) out += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n";
  if (opt.blocking == 3)
    out += "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n";
  if (opt.perIterTiming)
    out +=
        "# Per-Iteration Report: host clock timing, each iteration waits for its stream; i_* uses max over ranks" +
        (opt.perIterSkip ? "; summary skips first " + std::to_string(opt.perIterSkip) + " iterations" : std::string()) +
        " \n";
  if (opt.parallelInit) out += "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n";
  out += "# tutti: device backend " + f.backend + ", launcher " + f.launcher + ", transports " + f.transports + ", " +
         f.topology + "\n";
  out += buildLine(f) + gpuLine(f) + topologyLines(f) + groupLines(f);
  if (facts.split && !facts.split->ignored.empty())
    out += "# tutti: " + facts.split->ignored +
           " is ignored: NCCL_TESTS_SPLIT_MASK is set too and wins, as in nccl-tests\n";
  if (facts.collective.noInPlace) out += std::string("# tutti: ") + facts.collective.noInPlace + "\n";
  for (const std::string& note : facts.notes) out += "# tutti: " + note + "\n";
  out += "#\n# Using devices\n";
  for (const RankDescription& d : f.ranks) out += deviceLine(d, f.backend);
  return out;
}

}  // namespace tutti::perf
