// ncclAllToAllv's exchanges for the tests (alltoallv_support.h): count matrices, layouts, and the
// reference each rank's receive buffer is compared with, built from the matrix and layouts alone.
#include "tests/common/alltoallv_support.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"
#include "tutti/tutti.h"

namespace tutti_test {
namespace {

constexpr unsigned char kSentinel = 0xA5;

enum class Pattern { Zeros, HotColumn, Skew, Uniform };

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::Zeros: return "zeros";
    case Pattern::HotColumn: return "hot column";
    case Pattern::Skew: return "skew";
    case Pattern::Uniform: return "uniform";
  }
  return "?";
}

// counts[i][j]: the elements rank i sends rank j. Every rank builds the same matrix from the seed.
using Matrix = std::vector<std::vector<size_t>>;

Matrix countMatrix(Pattern pattern, int n, unsigned seed) {
  std::mt19937 rng(seed);
  Matrix m(size_t(n), std::vector<size_t>(size_t(n), 0));
  const int hot = n - 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      size_t& c = m[size_t(i)][size_t(j)];
      switch (pattern) {
        case Pattern::Zeros:
          // Whole rows and columns empty, and scattered zeros, around small blocks.
          c = (i == 1 || j == 0 || (i + j) % 3 == 0) ? 0 : 1 + rng() % 37;
          break;
        case Pattern::HotColumn: c = j == hot ? 60000 + rng() % 5000 : rng() % 4; break;
        case Pattern::Skew: {
          // Heavy-tailed: most blocks small, a few thousands of times larger.
          const unsigned shift = rng() % 15;
          c = (size_t(1) << shift) + rng() % 7 - 1;
          break;
        }
        case Pattern::Uniform: c = 777; break;
      }
    }
  return m;
}

// One rank's layout: where each peer's send block starts (out of peer order, some sharing bytes
// with another peer's block) and where each receive block lands (out of order, with gaps).
struct Layout {
  std::vector<size_t> sendCounts, sdispls, recvCounts, rdispls;
  size_t sendElems = 0, recvElems = 0;
};

Layout layoutOf(const Matrix& m, int rank, unsigned seed) {
  const int n = int(m.size());
  std::mt19937 rng(seed * 7919u + unsigned(rank));
  Layout l;
  l.sendCounts.resize(size_t(n));
  l.recvCounts.resize(size_t(n));
  l.sdispls.assign(size_t(n), 0);
  l.rdispls.assign(size_t(n), 0);
  for (int p = 0; p < n; p++) {
    l.sendCounts[size_t(p)] = m[size_t(rank)][size_t(p)];
    l.recvCounts[size_t(p)] = m[size_t(p)][size_t(rank)];
  }
  std::vector<int> order(static_cast<size_t>(n));
  for (int p = 0; p < n; p++) order[size_t(p)] = p;
  std::shuffle(order.begin(), order.end(), rng);
  size_t at = rng() % 3;
  for (size_t k = 0; k < order.size(); k++) {
    const size_t p = size_t(order[k]);
    // Every third block after the first starts inside the previous one: reads may overlap.
    if (k > 0 && k % 3 == 0 && at > 0)
      l.sdispls[p] = at - 1 - rng() % at;
    else {
      l.sdispls[p] = at;
      at += l.sendCounts[p] + rng() % 3;
    }
    l.sendElems = std::max(l.sendElems, l.sdispls[p] + l.sendCounts[p]);
  }
  std::shuffle(order.begin(), order.end(), rng);
  at = 1 + rng() % 4;  // a gap before the first block too
  for (int p : order) {
    l.rdispls[size_t(p)] = at;
    at += l.recvCounts[size_t(p)] + rng() % 5;
  }
  l.recvElems = at + 3;  // and after the last
  return l;
}

// The byte at `index` of rank's send buffer: independent of the library, so the reference can
// rebuild any rank's buffer.
unsigned char sendByte(int rank, size_t index, unsigned seed) {
  uint64_t x = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(index) + seed) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  return static_cast<unsigned char>(x * 0xBF58476D1CE4E5B9ull >> 56);
}

std::vector<unsigned char> sendBuffer(const Layout& l, int rank, size_t elt, unsigned seed) {
  std::vector<unsigned char> b(l.sendElems * elt);
  for (size_t i = 0; i < b.size(); i++) b[i] = sendByte(rank, i, seed);
  return b;
}

// What `rank` must hold after the call: each peer's block copied from the peer's send buffer,
// every other byte the sentinel.
std::vector<unsigned char> expectedReceive(const Matrix& m, int rank, size_t elt, unsigned seed) {
  const int n = int(m.size());
  const Layout mine = layoutOf(m, rank, seed);
  std::vector<unsigned char> want(mine.recvElems * elt, kSentinel);
  for (int p = 0; p < n; p++) {
    const Layout theirs = layoutOf(m, p, seed);
    const size_t bytes = m[size_t(p)][size_t(rank)] * elt;
    for (size_t b = 0; b < bytes; b++)
      want[mine.rdispls[size_t(p)] * elt + b] = sendByte(p, theirs.sdispls[size_t(rank)] * elt + b, seed);
  }
  return want;
}

// The first byte where got and want differ, in words.
std::string firstDifference(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want) {
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i]) {
      char text[128];
      std::snprintf(text, sizeof text, "byte %zu of %zu is 0x%02x, expected 0x%02x%s", i, want.size(), got[i], want[i],
                    want[i] == kSentinel ? " (untouched)" : "");
      return text;
    }
  return "";
}

const ncclDataType_t kTypes[] = {ncclInt8, ncclInt32, ncclFloat16, ncclBfloat16, ncclFloat64};
const Pattern kPatterns[] = {Pattern::Zeros, Pattern::HotColumn, Pattern::Skew, Pattern::Uniform};

}  // namespace

void exchangeAllToAllv(int rank, int n, ncclComm_t comm, AllToAllvIssue issue) {
  cudaStream_t stream = nullptr;
  if (issue == AllToAllvIssue::StreamInGroup) TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
  unsigned seed = 11;
  for (Pattern pattern : kPatterns)
    for (ncclDataType_t type : kTypes) {
      seed++;
      const Matrix m = countMatrix(pattern, n, seed);
      const Layout l = layoutOf(m, rank, seed);
      const size_t elt = tutti_test::elementBytes(type);
      const std::vector<unsigned char> in = sendBuffer(l, rank, elt, seed);
      std::vector<unsigned char> out(l.recvElems * elt, kSentinel);
      const std::string what = std::string(patternName(pattern)) + ", type " + std::to_string(int(type)) + ", rank " +
                               std::to_string(rank) + " of " + std::to_string(n);
      if (issue == AllToAllvIssue::NullStream) {
        TUTTI_NCCL_CHECK(ncclAllToAllv(in.data(), l.sendCounts.data(), l.sdispls.data(), out.data(),
                                       l.recvCounts.data(), l.rdispls.data(), type, comm, nullptr));
      } else {
        std::vector<int32_t> one(4, rank), sum(4, 0);
        TUTTI_NCCL_CHECK(ncclGroupStart());
        TUTTI_NCCL_CHECK(ncclAllToAllv(in.data(), l.sendCounts.data(), l.sdispls.data(), out.data(),
                                       l.recvCounts.data(), l.rdispls.data(), type, comm, stream));
        TUTTI_NCCL_CHECK(ncclAllReduce(one.data(), sum.data(), 4, ncclInt32, ncclSum, comm, stream));
        TUTTI_NCCL_CHECK(ncclGroupEnd());
        TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
        check(sum[3] == n * (n - 1) / 2, what + ": the all-reduce in the same group gave " + std::to_string(sum[3]));
      }
      const std::string difference = firstDifference(out, expectedReceive(m, rank, elt, seed));
      check(difference.empty(), what + ": " + difference);
    }
  if (stream != nullptr) TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
}

}  // namespace tutti_test
