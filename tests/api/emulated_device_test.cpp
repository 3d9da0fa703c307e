// The device executor's own source, run on host threads by the emulated device
// (TUTTI_DEVICE=emulated): every collective, data type and reduction, checked against the float64
// reference and bitwise against the host executor running the same plan, tiling and channels.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "tests/common/backend_compare_support.h"

namespace {

using tutti_test::BackendRun;
using tutti_test::BitwiseComparison;

// Runs the cases through the host executor and the emulated device under NCCL_ALGO=algorithm
// ("" lets the selector choose) and requires both right and equal bit for bit.
void requireBitwiseEqual(int nranks, const char* algorithm, const std::vector<size_t>& counts) {
  if (*algorithm)
    setenv("NCCL_ALGO", algorithm, 1);
  else
    unsetenv("NCCL_ALGO");
  setenv("TUTTI_CALIBRATE", "0", 1);  // both selectors see the same fabric, so they choose alike
  const std::vector<tutti_test::Case> cases = tutti_test::allCases(counts, nranks);
  BackendRun host = tutti_test::runBackend("host", nranks, cases);
  BackendRun emulated = tutti_test::runBackend("emulated", nranks, cases);
  BitwiseComparison bitwise = tutti_test::compareBitwise(cases, nranks, host, emulated);
  INFO(nranks << " ranks, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)") << ": " << cases.size() << " cases");
  INFO("host: " << host.firstFailure);
  INFO("emulated: " << emulated.firstFailure);
  INFO("first bitwise difference: " << bitwise.firstDifference);
  CHECK(host.wrong == 0);
  CHECK(emulated.wrong == 0);
  CHECK(bitwise.differ == 0);
  // Most cases choose alike on both backends; a comparison that compared nothing proves nothing.
  CHECK(bitwise.compared * 2 >= cases.size());
  unsetenv("NCCL_ALGO");
}

}  // namespace

// Both protocols: these counts go as LL lines between the emulated executors (kernels/fifo.h),
// and through Simple slots with NCCL_PROTO=^LL.
TEST_CASE("emulated device: every collective, type and op, bitwise as the host executor (1 to 4 ranks)",
          "[device][emulated]") {
  for (int nranks : {1, 2, 3, 4}) requireBitwiseEqual(nranks, "", {0, 1, 7, 1023});
}

TEST_CASE(
    "emulated device: every collective, type and op through Simple only (NCCL_PROTO=^LL), bitwise as the host executor",
    "[device][emulated]") {
  setenv("NCCL_PROTO", "^LL", 1);
  for (int nranks : {2, 3}) requireBitwiseEqual(nranks, "", {1, 7, 1023});
  unsetenv("NCCL_PROTO");
}

TEST_CASE("emulated device: ring and tree plans across tiles and channels, bitwise as the host executor",
          "[device][emulated]") {
  for (const char* algorithm : {"ring", "tree"}) requireBitwiseEqual(4, algorithm, {1, 1023, (size_t(1) << 15) + 5});
}
