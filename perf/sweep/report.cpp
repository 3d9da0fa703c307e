// Formats the perf sweep's text table the way nccl-tests does, and writes tutti's JSON and CSV reports.
#include "perf/sweep/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "perf/sweep/text_format.h"

namespace tutti::perf {
namespace {

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += printf1("\\u%04x", unsigned(c));
    else
      out += c;
  }
  return out + "\"";
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  return printf1("%.6g", value);
}

std::string jsonMeasurement(const Measurement& m) {
  return "{\"time\": " + jsonNumber(m.timeUs) + ", \"alg_bw\": " + jsonNumber(m.algBw) +
         ", \"bus_bw\": " + jsonNumber(m.busBw) +
         ", \"nwrong\": " + (m.wrong < 0 ? std::string("null") : std::to_string(m.wrong)) + "}";
}

std::string jsonList(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); i++) out += (i ? ", " : "") + jsonNumber(values[i]);
  return out + "]";
}

// nccl-tests' per-iteration object: the summary, every iteration's time, and per-process rows when there are several.
std::string jsonIterationStats(const IterationStats& s) {
  std::string out = "{\"skipped_iterations\": " + std::to_string(s.skipped) + ", \"min_us\": " + jsonNumber(s.minUs) +
                    ", \"max_us\": " + jsonNumber(s.maxUs) + ", \"avg_us\": " + jsonNumber(s.avgUs) +
                    ", \"p50_us\": " + jsonNumber(s.p50Us) + ", \"p95_us\": " + jsonNumber(s.p95Us) +
                    ", \"p99_us\": " + jsonNumber(s.p99Us) + ", \"stdev_us\": " + jsonNumber(s.stdevUs) +
                    ", \"cv_pct\": " + jsonNumber(s.cvPercent) + ", \"times_us\": " + jsonList(s.timesUs);
  if (s.perProcessMaxUs.size() > 1) {
    out += ", \"per_process_max_times_us\": [";
    for (size_t p = 0; p < s.perProcessMaxUs.size(); p++) out += (p ? ", " : "") + jsonList(s.perProcessMaxUs[p]);
    out += "]";
  }
  return out + "}";
}

std::string jsonPlacement(const char* key, const Measurement& m) {
  std::string out = std::string(", \"") + key + "\": " + jsonMeasurement(m);
  if (m.perIteration) out += std::string(", \"") + key + "_per_iter\": " + jsonIterationStats(*m.perIteration);
  return out;
}

}  // namespace

std::string formatNumber(double value, int width) {
  char cell[64];
  for (const char* format : {"%*.2f", "%*.1f", "%*.0f"})
    if (std::snprintf(cell, sizeof cell, format, width, value) <= width) return cell;
  std::snprintf(cell, sizeof cell, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return std::string(cell).substr(0, size_t(width));
}

IterationStats iterationStats(std::vector<double> timesUs, int skip) {
  IterationStats s;
  s.skipped = std::clamp(skip, 0, timesUs.size() ? int(timesUs.size()) - 1 : 0);
  s.timesUs = timesUs;
  std::vector<double> sorted(timesUs.begin() + s.skipped, timesUs.end());
  if (sorted.empty()) return s;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  auto percentile = [&](size_t p) { return sorted[std::min(n - 1, (n * p + 99) / 100 - 1)]; };  // nearest rank
  s.minUs = sorted.front();
  s.maxUs = sorted.back();
  s.p50Us = sorted[n / 2];
  s.p95Us = percentile(95);
  s.p99Us = percentile(99);
  double sum = 0, squares = 0;
  for (double t : sorted) sum += t;
  s.avgUs = sum / double(n);
  for (double t : sorted) squares += (t - s.avgUs) * (t - s.avgUs);
  s.stdevUs = std::sqrt(squares / double(n));
  s.cvPercent = s.avgUs > 0 ? s.stdevUs / s.avgUs * 100 : 0;
  return s;
}

std::string tableHeader(bool cpuTime, bool timestamps, bool perIteration) {
  const char* time = cpuTime ? "cputime" : "time";
  int pad = timestamps ? 19 : 0;
  const char* stampName = timestamps ? "timestamp" : "";
  const char* stampFormat = timestamps ? "YYYY-MM-DD HH:MM:SS" : "";
  std::string out = "#\n";
  if (perIteration) {
    out += printf1(
        "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                "
        "in-place (+ per-iteration)\n",
        "", "", "", "", "");
    const char* format =
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s "
        "%*s\n";
    out +=
        printf1(format, "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", "i_min", "i_max",
                "i_p99", "i_cv%", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", pad, stampName);
    out += printf1(format, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)",
                   "(%)", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", pad, stampFormat);
    return out;
  }
  out += printf1("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
                 "", "", "", "");
  out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
                 "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", pad, stampName);
  out += printf1("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "",
                 "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", pad, stampFormat);
  return out;
}

std::string tableRow(const ResultRow& row) {
  std::string out =
      printf1("%12zu  %12zu  %8s  %6s  %6i", row.bytes, row.count, row.type.c_str(), row.redop.c_str(), row.root);
  for (const Measurement* m : {&row.outOfPlace, &row.inPlace}) {
    out += "  " + formatNumber(m->timeUs, 7) + "  " + formatNumber(m->algBw, 6) + "  " + formatNumber(m->busBw, 6);
    out += m->wrong < 0 ? std::string("    N/A") : printf1("  %6g", double(m->wrong));
    if (const auto& s = m->perIteration)
      out += "  " + formatNumber(s->minUs, 7) + "  " + formatNumber(s->maxUs, 7) + "  " + formatNumber(s->p99Us, 7) +
             "  " + formatNumber(s->cvPercent, 7);
  }
  if (!row.timestamp.empty()) out += printf1("%21s", row.timestamp.c_str());
  return out + "\n";
}

std::string deviceLine(const RankDescription& rank, const std::string& backend) {
  // Host mode has no PCI device: the bus id is zero, device is the rank's index on its node (localRank * ranks per
  // process + its index in the process, as nccl-tests' cudaDev) and the name says which CPUs the rank may use.
  // Group is nccl-tests' split colour itself (process rank & NCCL_TESTS_SPLIT_MASK, say), not a count of groups nor
  // the index of the thread that drives the rank; 0 without a split.
  bool gpu = !rank.pciBusId.empty();
  return printf1("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s (CPUs %s)\n", rank.rank, rank.group,
                 rank.pid, rank.host.c_str(), gpu ? rank.gpuOrdinal : rank.localIndex, deviceHex(rank).c_str(),
                 (gpu ? rank.gpu : backend).c_str(), rank.affinity.c_str());
}

std::string deviceHex(const RankDescription& rank) {
  unsigned domain = 0, bus = 0, device = 0;
  if (!rank.pciBusId.empty()) std::sscanf(rank.pciBusId.c_str(), "%x:%x:%x", &domain, &bus, &device);
  return printf1("%04x:%02x:%02x", domain, bus, device);
}

std::string gpuLine(const Fingerprint& f) {
  if (f.cudaDriver.empty()) return "";
  std::set<std::pair<std::string, std::string>> gpus;  // each GPU once: host and bus id
  std::map<std::string, int> byName;
  std::set<std::string> hosts;
  for (const RankDescription& d : f.ranks)
    if (!d.pciBusId.empty() && gpus.insert({d.host, d.pciBusId}).second) byName[d.gpu]++, hosts.insert(d.host);
  std::string out = "# GPUs: CUDA driver " + f.cudaDriver;
  bool first = true;
  for (const auto& [name, count] : byName) {
    out += (first ? "; " : ", ") + std::to_string(count) + " x " + name;
    first = false;
  }
  out += " on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " node" : " nodes");
  if (f.ranks.size() > gpus.size()) out += ", shared by " + std::to_string(f.ranks.size()) + " ranks";
  return out + "\n";
}

std::string buildLine(const Fingerprint& f) {
  const BuildInfo& b = f.build;
  return "# Build: " + f.tuttiVersion + ", " + b.buildType + ", " + b.compiler + ", " + (b.mpi ? "with" : "without") +
         " MPI" + (b.commit.empty() ? std::string() : ", commit " + b.commit) + "\n";
}

std::string topologyLines(const Fingerprint& f) {
  std::string out;
  for (size_t n = 0; n < f.nodes.size(); n++) {
    const NodeDescription& d = f.nodes[n];
    out += printf1("# Topology: node %zu %s: %d ranks, %d NUMA nodes, ", n, d.host.c_str(), d.ranks, d.numaNodes) +
           (d.cpus ? std::to_string(d.cpus) : std::string("?")) + " CPUs, " + std::to_string(d.gpus) + " GPUs, " +
           std::to_string(d.nics.size()) + " NICs";
    for (size_t i = 0; i < d.nics.size(); i++)
      out += (i ? ", " : " (") + d.nics[i].first + " " +
             (d.nics[i].second ? std::to_string(d.nics[i].second) + " Mb/s" : "speed unknown") +
             (i + 1 == d.nics.size() ? ")" : "");
    out += "\n";
  }
  return out;
}

// Ranks as ranges, "0-3,8,10-11": a group's ranks stay readable at a thousand ranks.
static std::string rankRanges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t last = i;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1) last++;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (last > i ? "-" + std::to_string(ranks[last]) : "");
    i = last + 1;
  }
  return out;
}

std::string groupLines(const Fingerprint& f) {
  if (f.split.empty()) return "";
  constexpr size_t kListed = 16;  // the JSON report holds them all
  std::string out = "# Groups: " + f.split + " splits the " + std::to_string(f.ranks.size()) + " ranks into " +
                    std::to_string(f.groups.size()) +
                    (f.groups.size() == 1 ? " group" : " groups that run side by side") + ":";
  size_t rank0Group = 0;
  for (size_t g = 0; g < f.groups.size(); g++) {
    const GroupDescription& d = f.groups[g];
    if (!d.ranks.empty() && d.ranks.front() == 0) rank0Group = g;
    if (g < kListed)
      out += std::string(g ? ";" : "") + " group " + std::to_string(d.colour) + " ranks " + rankRanges(d.ranks);
  }
  if (f.groups.size() > kListed) out += "; and " + std::to_string(f.groups.size() - kListed) + " more";
  size_t groupRanks = f.groups.empty() ? 0 : f.groups[rank0Group].ranks.size();
  // As nccl-tests: each group sizes and times its own communicator, rank 0 prints its group's sizes and bandwidths,
  // and the time, the barriers and the wrong-value counts are over every rank of every group.
  out += "\n# Groups: sizes and bandwidths are those of rank 0's group (" + std::to_string(groupRanks) +
         " ranks); times (-a) and #wrong are over all " + std::to_string(f.ranks.size()) + " ranks\n";
  return out;
}

std::string tableFooter(int outOfBounds, double averageBusBw, const std::string& program) {
  std::string out = printf1("# %-20s : %d %s\n", "Out of bounds values", outOfBounds, outOfBounds ? "FAILED" : "OK");
  out += printf1("# %-20s : %g \n", "Avg bus bandwidth", averageBusBw);
  out += "#\n";
  out += "# Collective test concluded: " + program + "\n";
  return out;
}

std::string jsonReport(const Report& r) {
  std::string out = "{\n  \"program\": " + jsonString(r.program) + ",\n  \"collective\": " + jsonString(r.collective) +
                    ",\n  \"arguments\": [";
  for (size_t i = 0; i < r.arguments.size(); i++) out += (i ? ", " : "") + jsonString(r.arguments[i]);
  out += "],\n  \"config\": {";
  bool first = true;
  for (const auto& [key, value] : r.config)
    out += std::string(first ? "" : ", ") + jsonString(key) + ": " + value, first = false;
  const Fingerprint& f = r.fingerprint;
  out += "},\n  \"fingerprint\": {\"tutti_version\": " + jsonString(f.tuttiVersion) +
         ", \"nccl_version\": " + jsonString(f.ncclVersion) + ", \"device_backend\": " + jsonString(f.backend) +
         ", \"transports\": " + jsonString(f.transports) + ", \"topology\": " + jsonString(f.topology) +
         ", \"launcher\": " + jsonString(f.launcher) + ", \"host_cpu\": " + jsonString(f.hostCpu) +
         ", \"build_type\": " + jsonString(f.build.buildType) + ", \"compiler\": " + jsonString(f.build.compiler) +
         ", \"mpi\": " + (f.build.mpi ? "true" : "false") +
         ", \"git_commit\": " + (f.build.commit.empty() ? std::string("null") : jsonString(f.build.commit)) +
         ", \"cuda_driver\": " + (f.cudaDriver.empty() ? std::string("null") : jsonString(f.cudaDriver)) +
         ", \"split\": ";
  if (f.split.empty()) {
    out += "null";
  } else {
    out += "{\"setting\": " + jsonString(f.split) + ", \"groups\": [";
    for (size_t g = 0; g < f.groups.size(); g++) {
      out += std::string(g ? ", " : "") + "{\"group\": " + std::to_string(f.groups[g].colour) + ", \"ranks\": [";
      for (size_t i = 0; i < f.groups[g].ranks.size(); i++)
        out += (i ? ", " : "") + std::to_string(f.groups[g].ranks[i]);
      out += "]}";
    }
    out += "]}";
  }
  out += ", \"nodes\": [";
  for (size_t n = 0; n < f.nodes.size(); n++) {
    const NodeDescription& d = f.nodes[n];
    out += std::string(n ? ", " : "") + "{\"hostname\": " + jsonString(d.host) +
           ", \"ranks\": " + std::to_string(d.ranks) + ", \"numa_nodes\": " + std::to_string(d.numaNodes) +
           ", \"cpus\": " + (d.cpus ? std::to_string(d.cpus) : std::string("null")) +
           ", \"gpus\": " + std::to_string(d.gpus) + ", \"nics\": [";
    for (size_t i = 0; i < d.nics.size(); i++)
      out += std::string(i ? ", " : "") + "{\"name\": " + jsonString(d.nics[i].first) +
             ", \"speed_mbps\": " + (d.nics[i].second ? std::to_string(d.nics[i].second) : std::string("null")) + "}";
    out += "]}";
  }
  out += "]},\n  \"devices\": [";
  for (size_t i = 0; i < f.ranks.size(); i++) {
    const RankDescription& d = f.ranks[i];
    out += std::string(i ? ",\n    " : "\n    ") + "{\"rank\": " + std::to_string(d.rank) +
           ", \"group\": " + std::to_string(d.group) + ", \"pid\": " + std::to_string(d.pid) +
           ", \"hostname\": " + jsonString(d.host) +
           ", \"device\": " + std::to_string(d.pciBusId.empty() ? d.localIndex : d.gpuOrdinal) +
           ", \"device_hex\": " + jsonString(deviceHex(d)) +
           ", \"device_info\": " + jsonString(d.pciBusId.empty() ? f.backend : d.gpu) +
           ", \"cpu_affinity\": " + jsonString(d.affinity) + "}";
  }
  out += "\n  ],\n  \"results\": [";
  for (size_t i = 0; i < r.rows.size(); i++) {
    const ResultRow& row = r.rows[i];
    out += std::string(i ? ",\n    " : "\n    ") + "{\"size\": " + std::to_string(row.bytes) +
           ", \"count\": " + std::to_string(row.count) + ", \"type\": " + jsonString(row.type) +
           ", \"redop\": " + jsonString(row.redop) + ", \"root\": " + std::to_string(row.root) +
           ", \"algorithm\": " + jsonString(row.algorithm) + jsonPlacement("out_of_place", row.outOfPlace) +
           jsonPlacement("in_place", row.inPlace) + "}";
  }
  out += "\n  ],\n  \"out_of_bounds\": {\"count\": " + std::to_string(r.outOfBounds) +
         ", \"okay\": " + (r.outOfBounds ? "false" : "true") +
         "},\n  \"average_bus_bandwidth\": {\"bandwidth\": " + jsonNumber(r.averageBusBw) + "}\n}\n";
  return out;
}

// A CSV cell, quoted when it holds a comma or a quote.
static std::string csvField(const std::string& text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csvReport(const Report& r) {
  const Fingerprint& f = r.fingerprint;
  std::string out =
      "program,collective,size,count,type,redop,root,algorithm,placement,time_us,algbw_gbs,busbw_gbs,wrong,"
      "nranks,tutti_version,device_backend,transports,launcher,split,group_ranks\n";
  // With a split, the bandwidths are for rank 0's group: its size is the one they were computed with.
  size_t groupRanks = f.ranks.size();
  for (const GroupDescription& g : f.groups)
    if (!g.ranks.empty() && g.ranks.front() == 0) groupRanks = g.ranks.size();
  for (const ResultRow& row : r.rows)
    for (int placement = 0; placement < 2; placement++) {
      const Measurement& m = placement ? row.inPlace : row.outOfPlace;
      out += r.program + "," + r.collective + "," + std::to_string(row.bytes) + "," + std::to_string(row.count) + "," +
             row.type + "," + row.redop + "," + std::to_string(row.root) + "," + row.algorithm + "," +
             (placement ? "in-place" : "out-of-place") + "," + printf1("%.3f,%.4f,%.4f,", m.timeUs, m.algBw, m.busBw) +
             (m.wrong < 0 ? std::string("") : std::to_string(m.wrong)) + "," + std::to_string(f.ranks.size()) + "," +
             csvField(f.tuttiVersion) + "," + csvField(f.backend) + "," + csvField(f.transports) + "," +
             csvField(f.launcher) + "," + csvField(f.split) + "," + std::to_string(groupRanks) + "\n";
    }
  return out;
}

}  // namespace tutti::perf
