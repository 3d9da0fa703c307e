// The selector: NCCL_ALGO / NCCL_PROTO in NCCL's syntax, the choice of algorithm, protocol and
// channel count from the analytic cost model (sim.h), and the readable tuning table that
// NCCL_DEBUG_SUBSYS=TUNING prints.
//
// NCCL_ALGO / NCCL_PROTO syntax (NCCL's): a comma-separated list of names, case-insensitive;
// a leading '^' excludes the names instead. Since NCCL 2.24 settings can be per collective:
// segments separated by ';', each "collective:list" (collective as plan::collName spells it:
// allreduce, allgather, reducescatter, broadcast, reduce, alltoall, gather, scatter, send, recv);
// a segment without a prefix applies to every collective that has no segment of its own.
// Example: "ring;allreduce:^ring" or "allreduce:tree,ring;allgather:ring".
#pragma once

#include <array>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/sim.h"

namespace tutti::selector {

constexpr int kCollCount = int(plan::Coll::Recv) + 1;

// A parsed NCCL_ALGO or NCCL_PROTO value (names lower case).
struct NameFilter {
  struct Rule {
    bool set = false;      // false: no restriction
    bool exclude = false;  // '^': the names are excluded
    std::vector<std::string> names;
  };
  std::string variable;  // "NCCL_ALGO"
  std::string value;     // as given
  Rule all;              // the segment without a prefix
  std::array<Rule, kCollCount> perColl;
  std::vector<std::string> notes;  // remarks worth a WARN line (names accepted but ignored)
  std::vector<std::string> infos;  // remarks worth an INFO line (what carries what a protocol cannot)

  const Rule& ruleFor(plan::Coll coll) const { return perColl[size_t(coll)].set ? perColl[size_t(coll)] : all; }
  bool allows(plan::Coll coll, const std::string& name) const;
  bool setFor(plan::Coll coll) const { return perColl[size_t(coll)].set; }  // by its own prefix
};

// Parses NCCL_ALGO. `known` are the algorithm names tutti accepts (knownAlgorithms()); NCCL's
// Ring, Tree and PAT are ours under the same names; CollnetDirect, CollnetChain, NVLS and
// NVLSTree have no equivalent here and are accepted with a note (an include list left empty by
// them does not restrict). Throws tutti::Error (InvalidArgument) on an unknown name or
// collective, naming the known ones.
NameFilter parseAlgoFilter(const std::string& value, const std::vector<std::string>& known);

// Parses NCCL_PROTO (LL, LL128, Simple) as NCCL 2.30 reads it: the set of protocols allowed, for
// every collective or per collective. LL carries the small messages of device executors on memory
// transports (kernels/fifo.h) where it is allowed; LL128 is not implemented; Simple carries
// whatever else there is, also where the setting leaves it out (NCCL_PROTO=LL, or LL128 alone),
// since tutti has nothing else for it: such a setting is taken, with an INFO remark in `infos`
// saying so, never refused. Throws tutti::Error (InvalidArgument) on an unknown name.
NameFilter parseProtoFilter(const std::string& value);

// The names NCCL_ALGO accepts: the cost model's names (ir.md) and the registry's (custom plans).
std::vector<std::string> knownAlgorithms(const plan::AlgorithmRegistry& registry);

struct ChannelLimits {
  int min = 1;  // NCCL_MIN_NCHANNELS
  int max = 2;  // NCCL_MAX_NCHANNELS
  // Operations of up to upToBytes use at most maxUpTo channels (never below min); 0: no such cap.
  int maxUpTo = 0;
  size_t upToBytes = 0;
};

// How the selector sees the communicator. The fabric, registry and filter are referenced, not
// copied: they must outlive the context.
struct Context {
  Context(const sim::Fabric& f, const plan::AlgorithmRegistry& r, const NameFilter* algo = nullptr)
      : fabric(f), registry(r), algoFilter(algo) {}

  const sim::Fabric& fabric;
  const plan::AlgorithmRegistry& registry;
  const NameFilter* algoFilter = nullptr;  // nullptr: NCCL_ALGO unset
  bool deterministicOnly = false;          // only algorithms marked deterministic
  ChannelLimits channels;
  sim::Pipeline pipeline;  // chunk size and FIFO depth (nchannels is chosen)
};

struct Estimate {
  std::string algorithm;
  int nchannels = 1;
  double us = 0;
};

struct Choice {
  std::string algorithm;
  std::string protocol = "Simple";
  int nchannels = 1;
  double estimateUs = 0;
  std::string runnerUp;  // empty when there was a single candidate
  double runnerUpUs = 0;
  std::vector<Estimate> candidates;  // every candidate's best estimate, fastest first
};

// Picks the fastest candidate for `coll` of `bytes` (sim.h's size convention) among the
// registry's algorithms that serve it, pass the filter and, if asked, are deterministic.
// Each candidate gets the channel count in [min, max] (powers of two and the bounds) with its
// lowest estimate; another channel must gain 1% and carry 64 KiB, or gain a quarter. Algorithms the analytic model does
// not know (plan files) are timed by the exact simulator when nranks <= 64 and nranks x chunks <= 65536, otherwise left
// out. Throws tutti::Error (InvalidUsage) when no candidate is left, saying why. As in NCCL, a list without a
// collective prefix does not apply to a collective when it names none of its algorithms
// (an exclusion list still does, except for the point-to-point family: alltoall, gather,
// scatter, send, recv).
Choice choose(plan::Coll coll, size_t bytes, int nranks, const Context& context);

// The estimate for one operation as the selector would run it (ncclGroupSimulateEnd), in us.
double estimateOperation(plan::Coll coll, size_t bytes, const Context& context);

// The tuning table: per collective the registry serves, sizes 8 B to 1 GiB by powers of 4 (and
// 1 GiB), the choice and every candidate's estimate.
std::string tuningTable(const Context& context);

}  // namespace tutti::selector
