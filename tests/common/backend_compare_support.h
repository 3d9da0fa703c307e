// Runs the same collective cases through two executor backends and compares their results
// bitwise: the same plan and tiling reduce in the same order on every executor, so a device
// executor (the emulated device here, the cuda backend on a GPU) must give the host executor's
// bytes exactly. Each result is also checked against the float64 reference (runCase).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/collective_cases_support.h"

namespace tutti_test {

// One backend's run of every case on `nranks` ranks as threads of this process.
struct BackendRun {
  size_t cases = 0, wrong = 0;
  std::string firstFailure;
  std::vector<std::vector<std::vector<char>>> outputs;  // [rank][case]: the result's bytes
  std::vector<std::string> algorithms;                  // [case]: "algorithm/channels" rank 0's communicator chose
};

// Buffers for one rank of a backend (null: the case's host buffers are passed as they are).
using BuffersFactory = std::function<std::unique_ptr<CaseBuffers>(int rank)>;

// Runs every case through TUTTI_DEVICE=backend (set in the environment for the communicators'
// init). A rank whose communicator failed stops; the others' wrong values are counted.
BackendRun runBackend(const std::string& backend, int nranks, const std::vector<Case>& cases,
                      const BuffersFactory& buffers = nullptr);

// The comparison of two runs of the same cases: cases where both chose the same algorithm and
// channel count are compared bitwise on every rank.
struct BitwiseComparison {
  size_t compared = 0, differ = 0;
  std::string firstDifference;
};
BitwiseComparison compareBitwise(const std::vector<Case>& cases, int nranks, const BackendRun& a, const BackendRun& b);

}  // namespace tutti_test
