// TUTTI_DETERMINISTIC=1: all-reduce, reduce-scatter and reduce results are bitwise identical
// across runs and across message sizes (the prefix of a large operation equals the operation on
// that prefix), because the selector keeps to algorithms whose reduction order depends on the
// ranks alone.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

namespace {

// Values whose float32 sums depend on the order they are added in.
float valueAt(int rank, size_t i) {
  uint64_t h = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(i) * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  double unit = double(h >> 11) / double(1ull << 53);  // [0, 1)
  return float((unit - 0.5) * std::pow(10.0, int(h % 7) - 3));
}

std::vector<float> inputOf(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; i++) v[i] = valueAt(rank, i);
  return v;
}

}  // namespace

TEST_CASE("TUTTI_DETERMINISTIC: 20 runs give identical bytes, and a prefix equals the small all-reduce",
          "[determinism]") {
  tutti_test::ScopedEnv deterministic("TUTTI_DETERMINISTIC", "1");
  tutti_test::ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  const int nranks = GENERATE(3, 5);
  const size_t large = (size_t(1) << 20) + 3;
  INFO(nranks << " ranks");
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    std::vector<float> in = inputOf(rank, large), first(large), again(large);
    TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), first.data(), large, ncclFloat32, ncclSum, comm, nullptr));
    for (int run = 1; run < 20; run++) {
      TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), again.data(), large, ncclFloat32, ncclSum, comm, nullptr));
      tutti_test::check(std::memcmp(first.data(), again.data(), large * sizeof(float)) == 0,
                        "rank " + std::to_string(rank) + ": run " + std::to_string(run) + " differs from run 0");
    }
    for (size_t count : {size_t(1), size_t(1000), size_t(70001), size_t(300007)}) {
      std::vector<float> prefix(count);
      TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), prefix.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      tutti_test::check(std::memcmp(prefix.data(), first.data(), count * sizeof(float)) == 0,
                        "rank " + std::to_string(rank) + ": the all-reduce of " + std::to_string(count) +
                            " elements differs from that prefix of the " + std::to_string(large) + "-element one");
    }
    // And the result is the sum, against float64.
    for (size_t i = 0; i < large; i += 997) {
      double sum = 0, magnitude = 0;
      for (int q = 0; q < n; q++) {
        sum += double(valueAt(q, i));
        magnitude += std::fabs(double(valueAt(q, i)));
      }
      tutti_test::check(std::fabs(double(first[i]) - sum) <= 1e-6 * magnitude + 1e-30,
                        "rank " + std::to_string(rank) + ": element " + std::to_string(i) + " is " +
                            std::to_string(first[i]) + ", the float64 sum is " + std::to_string(sum));
    }
    // Every rank holds the same bytes.
    std::vector<float> rank0(large);
    if (rank == 0) rank0 = first;
    TUTTI_NCCL_CHECK(ncclBroadcast(rank0.data(), rank0.data(), large, ncclFloat32, 0, comm, nullptr));
    tutti_test::check(std::memcmp(rank0.data(), first.data(), large * sizeof(float)) == 0,
                      "rank " + std::to_string(rank) + ": the result differs from rank 0's");
  });
  REQUIRE(failures == "");
}

// Reduce and reduce-scatter too: the selector changes algorithm with the size for both (reduce:
// binomial for small messages, ring for large; reduce-scatter: ring, PAT, ring), so unless the
// deterministic mode keeps each to one order, a prefix differs from the small operation.
TEST_CASE("TUTTI_DETERMINISTIC: reduce and reduce-scatter give the same bytes at every size", "[determinism]") {
  tutti_test::ScopedEnv deterministic("TUTTI_DETERMINISTIC", "1");
  tutti_test::ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  const int nranks = GENERATE(3, 5);
  const int root = 1;
  const size_t large = (size_t(1) << 20) + 3;  // reduce: 4 MiB, past the size where ring takes over
  const size_t largeBlock = 300007;            // reduce-scatter: blocks of 1.2 MB
  // Reduce-scatter's input element j of block b, whatever the block size: the prefix of each
  // block is then the same numbers in a small and a large operation.
  auto blockValue = [](int rank, int block, size_t j) { return valueAt(rank, size_t(block) * 1000003 + j); };
  INFO(nranks << " ranks");
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    // Every rank runs every operation, so mismatches are collected and reported at the end (a rank
    // that stopped at its first one would leave the others waiting in the next collective).
    std::string problems;
    auto expect = [&](bool ok, const std::string& what) {
      if (!ok && problems.size() < 2000) problems += "rank " + std::to_string(rank) + ": " + what + "\n";
    };
    std::vector<float> in = inputOf(rank, large), first(large), again(large);
    TUTTI_NCCL_CHECK(ncclReduce(in.data(), first.data(), large, ncclFloat32, ncclSum, root, comm, nullptr));
    for (int run = 1; run < 20; run++) {
      TUTTI_NCCL_CHECK(ncclReduce(in.data(), again.data(), large, ncclFloat32, ncclSum, root, comm, nullptr));
      if (rank == root)
        expect(std::memcmp(first.data(), again.data(), large * sizeof(float)) == 0,
               "reduce run " + std::to_string(run) + " differs from run 0");
    }
    for (size_t count : {size_t(1), size_t(1000), size_t(70001), size_t(300007)}) {
      std::vector<float> prefix(count);
      TUTTI_NCCL_CHECK(ncclReduce(in.data(), prefix.data(), count, ncclFloat32, ncclSum, root, comm, nullptr));
      if (rank == root)
        expect(std::memcmp(prefix.data(), first.data(), count * sizeof(float)) == 0,
               "the reduce of " + std::to_string(count) + " elements differs from that prefix of the " +
                   std::to_string(large) + "-element one");
    }
    if (rank == root)
      for (size_t i = 0; i < large; i += 997) {
        double sum = 0, magnitude = 0;
        for (int q = 0; q < n; q++) {
          sum += double(valueAt(q, i));
          magnitude += std::fabs(double(valueAt(q, i)));
        }
        expect(std::fabs(double(first[i]) - sum) <= 1e-6 * magnitude + 1e-30,
               "reduce element " + std::to_string(i) + " is " + std::to_string(first[i]) + ", the float64 sum is " +
                   std::to_string(sum));
      }

    auto scatterInput = [&](size_t block) {
      std::vector<float> v(block * size_t(n));
      for (int b = 0; b < n; b++)
        for (size_t j = 0; j < block; j++) v[size_t(b) * block + j] = blockValue(rank, b, j);
      return v;
    };
    std::vector<float> bigIn = scatterInput(largeBlock), big(largeBlock), bigAgain(largeBlock);
    TUTTI_NCCL_CHECK(ncclReduceScatter(bigIn.data(), big.data(), largeBlock, ncclFloat32, ncclSum, comm, nullptr));
    for (int run = 1; run < 20; run++) {
      TUTTI_NCCL_CHECK(
          ncclReduceScatter(bigIn.data(), bigAgain.data(), largeBlock, ncclFloat32, ncclSum, comm, nullptr));
      expect(std::memcmp(big.data(), bigAgain.data(), largeBlock * sizeof(float)) == 0,
             "reduce-scatter run " + std::to_string(run) + " differs from run 0");
    }
    for (size_t block : {size_t(1), size_t(1000), size_t(13107), size_t(70001)}) {
      std::vector<float> smallIn = scatterInput(block), out(block);
      TUTTI_NCCL_CHECK(ncclReduceScatter(smallIn.data(), out.data(), block, ncclFloat32, ncclSum, comm, nullptr));
      expect(std::memcmp(out.data(), big.data(), block * sizeof(float)) == 0,
             "the reduce-scatter of blocks of " + std::to_string(block) +
                 " elements differs from that prefix of the one of blocks of " + std::to_string(largeBlock));
    }
    for (size_t j = 0; j < largeBlock; j += 997) {
      double sum = 0, magnitude = 0;
      for (int q = 0; q < n; q++) {
        sum += double(blockValue(q, rank, j));
        magnitude += std::fabs(double(blockValue(q, rank, j)));
      }
      expect(std::fabs(double(big[j]) - sum) <= 1e-6 * magnitude + 1e-30,
             "reduce-scatter element " + std::to_string(j) + " is " + std::to_string(big[j]) + ", the float64 sum is " +
                 std::to_string(sum));
    }
    tutti_test::check(problems.empty(), problems);
  });
  REQUIRE(failures == "");
}
