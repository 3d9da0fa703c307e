// The communicator's view of the selector: the fabric built from where its ranks live, the
// NCCL_ALGO / NCCL_PROTO filters, TUTTI_DETERMINISTIC, and a cache of choices per
// (collective, bytes), so that the cost model runs once per size rather than once per call.
// Every rank computes the same choices from the same inputs (the peers table, the registry and
// the environment, which must agree across ranks, as NCCL requires of NCCL_ALGO).
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "algorithms/registry.h"
#include "algorithms/selector.h"
#include "algorithms/sim.h"

struct ncclComm;

namespace tutti {

struct Selection {
  const plan::Algorithm* algorithm = nullptr;
  int nchannels = 1;
  double estimateUs = 0;
};

class CommSelector {
 public:
  // Reads the environment and builds the fabric; throws tutti::Error (InvalidArgument) for a
  // malformed NCCL_ALGO / NCCL_PROTO.
  explicit CommSelector(const ncclComm* comm);

  // The algorithm and channel count for one operation; bytes as sim.h counts them.
  Selection select(plan::Coll coll, size_t bytes);
  // The model's estimate for one operation (ncclGroupSimulateEnd), in microseconds.
  double estimate(plan::Coll coll, size_t bytes);
  // The choices per size, readable (NCCL_DEBUG_SUBSYS=TUNING).
  std::string tuningTable();
  const sim::Fabric& fabric() const { return fabric_; }
  // Whether NCCL_PROTO lets the collective's small messages go as LL lines (device executors).
  bool llAllowed(plan::Coll coll) const { return !protoFilterSet_ || protoFilter_.allows(coll, "ll"); }

 private:
  selector::Context context(plan::Coll coll) const;

  const ncclComm* comm_;
  sim::Fabric fabric_;
  selector::NameFilter algoFilter_;
  bool algoFilterSet_ = false;
  selector::NameFilter protoFilter_;
  bool protoFilterSet_ = false;
  bool deterministic_ = false;
  // TUTTI_DETERMINISTIC's algorithm for each reducing collective, once chosen
  std::array<std::string, selector::kCollCount> deterministicAlgorithm_;
  std::mutex mutex_;
  std::map<std::pair<int, size_t>, Selection> cache_;
};

// Adds the algorithms of TUTTI_ALGO_FILE's plan files to the communicator's registry (each is
// verified as it loads). Throws tutti::Error (InvalidUsage) naming the file and the reason.
void loadCustomAlgorithms(ncclComm* comm);

// The size the cost model counts for a call of `count` elements (per rank for the gathering and
// all-to-all family, as the user's call names it).
size_t modelBytes(plan::Coll coll, size_t count, size_t eltSize, int nranks);

}  // namespace tutti
