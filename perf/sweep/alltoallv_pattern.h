// alltoallv_perf's count pattern, as nccl-tests' alltoallv_perf defines it: the bytes rank i sends rank j, either
// distance-weighted from the size (NCCL_TESTS_ALLTOALLV_SPREAD) or read from a byte matrix
// (NCCL_TESTS_ALLTOALLV_MATRIX_FILE, scaled by NCCL_TESTS_ALLTOALLV_MATRIX_SCALE).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tutti::perf {

struct AllToAllvPattern {
  double spread = 1.0;        // 0: every peer alike; 1: bytes grow with the distance (j - i) mod n
  std::string matrixFile;     // empty: the generated pattern
  double matrixScale = 1.0;   // applied to every cell of the matrix
  int dimension = 0;          // the matrix's rows (and columns)
  std::vector<size_t> bytes;  // the matrix, row by row, each cell scaled and rounded down to 16 bytes
  std::string problem;        // why the matrix cannot be used (empty: it can)

  bool generated() const { return matrixFile.empty(); }
  // Bytes from rank `from` to rank `to` of nranks; total: the bytes each rank sends in all (generated pattern only).
  size_t peerBytes(int from, int to, int nranks, size_t total) const;
  // Elements rank sends and receives in all, of elementSize bytes.
  size_t sentElements(int rank, int nranks, size_t total, size_t elementSize) const;
  size_t receivedElements(int rank, int nranks, size_t total, size_t elementSize) const;
};

// The environment's pattern, read once (the matrix file too). A bad value of NCCL_TESTS_ALLTOALLV_SPREAD or
// _MATRIX_SCALE is clamped, as nccl-tests clamps it; a bad matrix file sets `problem`.
const AllToAllvPattern& allToAllvPattern();

// Parses a matrix file's text (whitespace-separated non-negative numbers, one row per line, square); returns the
// problem, naming the file, row and column, or "" after filling pattern.bytes and pattern.dimension.
std::string parseAllToAllvMatrix(const std::string& text, AllToAllvPattern& pattern);

// Why a sweep of alltoallv over nranks with these sizes cannot run: a matrix that cannot be read, that has fewer
// rows than ranks, a sweep (-b and -e differ) over a matrix, or a -e below the largest rank's bytes.
std::optional<std::string> allToAllvProblem(int nranks, size_t minBytes, size_t maxBytes);

}  // namespace tutti::perf
