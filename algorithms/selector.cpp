// The selector: NCCL_ALGO / NCCL_PROTO parsing, the cost-model choice, the tuning table.
#include "algorithms/selector.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "algorithms/tiling.h"
#include "base/error.h"
#include "base/text.h"

namespace tutti::selector {
namespace {

using plan::Coll;

constexpr int kExactSimMaxRanks = 64;
constexpr size_t kExactSimMaxChunks = size_t(1) << 16;  // rank-chunks the exact simulator may time per estimate
constexpr size_t kMinBytesPerChannel = 64 * 1024;       // below this a channel is not worth its launch
constexpr double kChannelGain = 0.01;                   // a channel more must gain 1%
// ... and below kMinBytesPerChannel a quarter: what many channels buy a small operation is the
// per-peer steps a direct exchange spreads over their workers (LaneSpec::spread), not bandwidth.
constexpr double kSmallChannelGain = 0.25;
// On the host executor a joined round (Bruck's, PAT's) is written whole into its slot before the
// receiver copies any of it out, and the next round waits for that copy, where a ring's chunks
// overlap their copies from hop to hop; the cost models do not see the difference. Measured at 8
// ranks on 2 cores (perf/RESULTS.md, "Bruck's and PAT's rounds packed"), Bruck's all-gather and
// PAT's reduce-scatter lose to the ring from 64 KiB per rank (1.12-1.7x) while the models keep
// them ahead up to 1-2 MiB (all-gather) and 2-8 MiB (reduce-scatter) in all. So on host fabrics
// they are taken only up to this many bytes per rank, unless nothing else is a candidate
// (NCCL_ALGO naming them alone).
constexpr size_t kHostJoinedBlockBytes = 32 * 1024;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); i++)
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

int collOfPrefix(const std::string& prefix) {
  for (int c = 0; c < kCollCount; c++)
    if (prefix == plan::collName(Coll(c))) return c;
  return -1;
}

std::vector<std::string> collNames() {
  std::vector<std::string> names;
  for (int c = 0; c < kCollCount; c++) names.push_back(plan::collName(Coll(c)));
  return names;
}

// The grammar shared by NCCL_ALGO and NCCL_PROTO. `ignored` names are accepted with a note.
struct Vocabulary {
  std::vector<std::string> known;    // lower case
  std::vector<std::string> ignored;  // lower case
  std::string display;               // for error messages
  std::string ignoredWhy;
};

NameFilter::Rule parseRule(const std::string& variable, const std::string& value, const std::string& scope,
                           const std::string& list, const Vocabulary& vocab, std::vector<std::string>& notes) {
  NameFilter::Rule rule;
  std::string body = trim(list);
  if (!body.empty() && body[0] == '^') {
    rule.exclude = true;
    body = body.substr(1);
  }
  bool namedIgnored = false;
  for (const std::string& raw : split(body, ',')) {
    std::string name = toLower(trim(raw));
    if (name.empty()) continue;
    if (contains(vocab.ignored, name)) {
      notes.push_back(variable + ": " + trim(raw) + " " + vocab.ignoredWhy);
      namedIgnored = true;
      continue;
    }
    if (!contains(vocab.known, name))
      throw Error(ErrorCode::InvalidArgument, variable + "=" + value + ": unknown name \"" + trim(raw) + "\"" + scope +
                                                  "; known: " + vocab.display);
    if (!contains(rule.names, name)) rule.names.push_back(name);
  }
  if (rule.names.empty() && !rule.exclude) {
    if (!namedIgnored)
      throw Error(ErrorCode::InvalidArgument,
                  variable + "=" + value + ": an empty list" + scope + "; known: " + vocab.display);
    notes.push_back(variable + ": the list" + scope + " names nothing tutti has; it does not restrict the choice");
    return rule;
  }
  rule.set = true;
  return rule;
}

NameFilter parseFilter(const std::string& variable, const std::string& value, const Vocabulary& vocab) {
  NameFilter f;
  f.variable = variable;
  f.value = value;
  if (trim(value).empty()) return f;
  for (const std::string& rawSegment : split(value, ';')) {
    std::string segment = trim(rawSegment);
    if (segment.empty()) continue;
    size_t colon = segment.find(':');
    if (colon == std::string::npos) {
      f.all = parseRule(variable, value, "", segment, vocab, f.notes);
      continue;
    }
    std::string prefix = toLower(trim(segment.substr(0, colon)));
    int coll = collOfPrefix(prefix);
    if (coll < 0)
      throw Error(ErrorCode::InvalidArgument,
                  variable + "=" + value + ": unknown collective \"" + prefix + "\"; known: " + joined(collNames()));
    f.perColl[size_t(coll)] = parseRule(variable, value, " for " + prefix, segment.substr(colon + 1), vocab, f.notes);
  }
  return f;
}

const std::vector<std::string> kNcclOnlyAlgorithms = {"collnetdirect", "collnetchain", "nvls", "nvlstree"};

bool pointToPointFamily(Coll coll) {
  return coll == Coll::AlltoAll || coll == Coll::Gather || coll == Coll::Scatter || coll == Coll::Send ||
         coll == Coll::Recv;
}

std::vector<int> channelCounts(ChannelLimits limits) {
  int lo = std::max(1, limits.min), hi = std::max(lo, limits.max);
  std::vector<int> counts{lo};
  for (int c = 1; c < hi; c *= 2)
    if (c > lo) counts.push_back(c);
  if (hi != lo) counts.push_back(hi);
  return counts;
}

// The estimate of one algorithm at one channel count: analytic if modelled, else exact. Without
// one, *why says what stopped it.
std::optional<double> estimateAt(const plan::Algorithm& a, Coll coll, size_t bytes, const Context& ctx, int nchannels,
                                 std::string* why) {
  sim::Pipeline pipe = ctx.pipeline;
  pipe.nchannels = nchannels;
  pipe.chunkBytes = tiling::chunkBytesFor(ctx.pipeline.chunkBytes, bytes);  // as the launch cuts it
  if (contains(sim::modelledAlgorithms(), a.name)) return sim::analyticUs(a.name, coll, bytes, ctx.fabric, pipe);
  const int n = ctx.fabric.nranks;
  size_t chunks = tiling::ceilDiv(bytes, pipe.chunkBytes);
  if (coll == Coll::Send || coll == Coll::Recv) {
    *why = "point-to-point plans are not timed";
    return std::nullopt;
  }
  if (n > kExactSimMaxRanks || chunks * size_t(n) > kExactSimMaxChunks) {
    *why = "too large to time step by step (" + std::to_string(n) + " ranks x " + std::to_string(chunks) +
           " chunks; at most " + std::to_string(kExactSimMaxRanks) + " ranks and " +
           std::to_string(kExactSimMaxChunks) + " rank-chunks)";
    return std::nullopt;
  }
  try {
    // The cost hardly depends on the root: time the plan at a root it serves (a plan file is
    // written for one), the first that rank 0's plan accepts.
    int root = 0;
    if (plan::rootedColl(coll))
      for (int r = 0; r < n; r++) {
        try {
          a.build({coll, 0, n, r});
          root = r;
          break;
        } catch (const Error&) {
          if (r == n - 1) throw;
        }
      }
    std::vector<plan::RankPlan> plans;
    for (int r = 0; r < n; r++) plans.push_back(a.build({coll, r, n, root}));
    return sim::timePlans(plans, coll, bytes, ctx.fabric, pipe).us;
  } catch (const Error& e) {
    *why = e.message();  // the plan file does not serve this shape
    return std::nullopt;
  }
}

std::vector<const plan::Algorithm*> candidatesFor(Coll coll, const Context& ctx) {
  std::vector<const plan::Algorithm*> serving, passing;
  for (const plan::Algorithm& a : ctx.registry.all())
    if (a.serves(coll) && (!ctx.deterministicOnly || a.deterministic)) serving.push_back(&a);
  const NameFilter* f = ctx.algoFilter;
  for (const plan::Algorithm* a : serving)
    if (!f || f->allows(coll, a->name)) passing.push_back(a);
  // An unprefixed list that names none of this collective's algorithms does not bind it (NCCL_ALGO=tree
  // still lets all-gather run): as NCCL does for the point-to-point family, and for every
  // collective when the list includes rather than excludes.
  if (passing.empty() && f && !f->setFor(coll) && (pointToPointFamily(coll) || !f->all.exclude)) return serving;
  if (passing.empty()) {
    std::vector<std::string> registered;
    for (const plan::Algorithm& a : ctx.registry.all())
      if (a.serves(coll)) registered.push_back(a.name + (a.deterministic ? " (deterministic)" : ""));
    std::string why = registered.empty() ? "no algorithm is registered"
                      : serving.empty() && ctx.deterministicOnly
                          ? "no deterministic algorithm"
                          : f->variable + "=" + f->value + " leaves no algorithm";
    throw Error(ErrorCode::InvalidUsage, std::string("selector: ") + why + " for " + plan::collName(coll) +
                                             "; registered for " + plan::collName(coll) + ": " +
                                             (registered.empty() ? "none" : joined(registered)));
  }
  return passing;
}

std::string formatBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = double(bytes);
  while (v >= 1024 && u < 4 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    u++;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.0f %s", v, units[u]);
  return text;
}

}  // namespace

bool NameFilter::allows(Coll coll, const std::string& name) const {
  const Rule& rule = ruleFor(coll);
  if (!rule.set) return true;
  return contains(rule.names, toLower(name)) != rule.exclude;
}

std::vector<std::string> knownAlgorithms(const plan::AlgorithmRegistry& registry) {
  std::vector<std::string> names = sim::modelledAlgorithms();
  for (const plan::Algorithm& a : registry.all())
    if (!contains(names, toLower(a.name))) names.push_back(toLower(a.name));
  return names;
}

NameFilter parseAlgoFilter(const std::string& value, const std::vector<std::string>& known) {
  Vocabulary v;
  for (const std::string& k : known) v.known.push_back(toLower(k));
  v.ignored = kNcclOnlyAlgorithms;
  v.display = joined(v.known) +
              " (NCCL's Ring, Tree and PAT are ring, tree and pat; CollnetDirect, CollnetChain, NVLS and "
              "NVLSTree are accepted and ignored)";
  v.ignoredWhy = "is NCCL's and has no equivalent in tutti; ignored";
  return parseFilter("NCCL_ALGO", value, v);
}

NameFilter parseProtoFilter(const std::string& value) {
  Vocabulary v;
  v.known = {"simple", "ll", "ll128"};
  v.display = "Simple, LL, LL128";
  NameFilter f = parseFilter("NCCL_PROTO", value, v);
  auto check = [&](const NameFilter::Rule& rule, const std::string& scope) {
    if (!rule.set) return;
    const bool simple = contains(rule.names, "simple") != rule.exclude;
    const bool ll = contains(rule.names, "ll") != rule.exclude;
    const bool ll128 = contains(rule.names, "ll128") != rule.exclude;
    if (ll128)
      f.infos.push_back("NCCL_PROTO=" + value + scope + ": LL128 is not implemented yet; " +
                        (ll ? "LL and Simple carry" : "Simple carries") + " what it would");
    if (!simple)
      f.infos.push_back(
          "NCCL_PROTO=" + value + scope + ": " +
          (ll ? "LL carries the small messages of device executors on memory transports; the rest, and the host "
                "executor's and the network's, go as Simple, the protocol tutti has for them"
              : "Simple carries every message, the protocol tutti has for them"));
  };
  check(f.all, "");
  for (int c = 0; c < kCollCount; c++)
    check(f.perColl[size_t(c)], std::string(" (for ") + plan::collName(Coll(c)) + ")");
  return f;
}

Choice choose(Coll coll, size_t bytes, int nranks, const Context& ctx) {
  if (nranks != ctx.fabric.nranks)
    throw Error(ErrorCode::InvalidArgument, "selector: " + std::to_string(nranks) + " ranks asked of a fabric of " +
                                                std::to_string(ctx.fabric.nranks));
  Choice choice;
  ChannelLimits limits = ctx.channels;
  if (limits.maxUpTo > 0 && bytes <= limits.upToBytes)
    limits.max = std::max(limits.min, std::min(limits.max, limits.maxUpTo));
  std::vector<std::string> unestimated;
  for (const plan::Algorithm* a : candidatesFor(coll, ctx)) {
    Estimate best{a->name, 0, 0};
    std::string why;
    for (int nch : channelCounts(limits)) {
      // Channels cost launch work the model does not see: a channel must bring a real gain.
      bool small = nch > ctx.channels.min && size_t(nch - 1) * kMinBytesPerChannel >= bytes;
      std::optional<double> us = estimateAt(*a, coll, bytes, ctx, nch, &why);
      double gain = small ? kSmallChannelGain : kChannelGain;
      if (us && (best.nchannels == 0 || *us < best.us * (1 - gain)))
        best = {a->name, nch, *us};
      else if (small)
        break;
    }
    if (best.nchannels > 0)
      choice.candidates.push_back(best);
    else
      unestimated.push_back(a->name + " (" + (why.empty() ? "no model" : why) + ")");
  }
  if (choice.candidates.empty())
    throw Error(ErrorCode::InvalidUsage, std::string("selector: no candidate for ") + plan::collName(coll) + " at " +
                                             std::to_string(nranks) +
                                             " ranks has a cost estimate: " + joined(unestimated));
  std::stable_sort(choice.candidates.begin(), choice.candidates.end(),
                   [](const Estimate& a, const Estimate& b) { return a.us < b.us; });
  if (ctx.fabric.hostExecutor && bytes / size_t(std::max(1, nranks)) > kHostJoinedBlockBytes) {
    auto joins = [&](const Estimate& e) {
      const plan::Algorithm* a = ctx.registry.find(e.algorithm);
      return a != nullptr && a->joinsRounds;
    };
    // Past the limit they stay listed with their estimates, behind every other candidate.
    std::stable_partition(choice.candidates.begin(), choice.candidates.end(),
                          [&](const Estimate& e) { return !joins(e); });
  }
  choice.algorithm = choice.candidates[0].algorithm;
  choice.nchannels = choice.candidates[0].nchannels;
  choice.estimateUs = choice.candidates[0].us;
  if (choice.candidates.size() > 1) {
    choice.runnerUp = choice.candidates[1].algorithm;
    choice.runnerUpUs = choice.candidates[1].us;
  }
  return choice;
}

double estimateOperation(Coll coll, size_t bytes, const Context& context) {
  return choose(coll, bytes, context.fabric.nranks, context).estimateUs;
}

std::string tuningTable(const Context& ctx) {
  std::string out = "TUNING " + ctx.fabric.describe() + "\n";
  std::vector<size_t> sizes;
  for (size_t s = 8; s <= (size_t(1) << 30); s *= 4) sizes.push_back(s);
  sizes.push_back(size_t(1) << 30);
  for (int c = 0; c < kCollCount; c++) {
    Coll coll = Coll(c);
    if (coll == Coll::Recv) continue;  // timed with its send
    bool served = false;
    for (const plan::Algorithm& a : ctx.registry.all()) served = served || a.serves(coll);
    if (!served) continue;
    out += std::string("TUNING ") + plan::collName(coll) + ": size -> choice (channels) estimate | every candidate\n";
    for (size_t bytes : sizes) {
      char line[160];
      try {
        Choice ch = choose(coll, bytes, ctx.fabric.nranks, ctx);
        std::snprintf(line, sizeof line, "TUNING %-13s %9s -> %-12s (%2d) %12.2f us |", plan::collName(coll),
                      formatBytes(bytes).c_str(), ch.algorithm.c_str(), ch.nchannels, ch.estimateUs);
        out += line;
        for (const Estimate& e : ch.candidates) {
          std::snprintf(line, sizeof line, " %s %.2f", e.algorithm.c_str(), e.us);
          out += line;
        }
      } catch (const Error& e) {
        std::snprintf(line, sizeof line, "TUNING %-13s %9s -> ", plan::collName(coll), formatBytes(bytes).c_str());
        out += line + e.message();
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace tutti::selector
