// alltoallv_perf's count pattern (alltoallv_pattern.h): the distance-weighted formula and the byte matrix file.
#include "perf/sweep/alltoallv_pattern.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tutti::perf {
namespace {

// A real from the environment, or fallback when unset or not a number.
double realFromEnvironment(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text, &end);
  return errno == ERANGE || end == text || *end != '\0' ? fallback : value;
}

AllToAllvPattern fromEnvironment() {
  AllToAllvPattern p;
  p.spread = std::clamp(realFromEnvironment("NCCL_TESTS_ALLTOALLV_SPREAD", 1.0), 0.0, 1.0);
  p.matrixScale = std::max(0.0, realFromEnvironment("NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", 1.0));
  if (const char* file = std::getenv("NCCL_TESTS_ALLTOALLV_MATRIX_FILE")) p.matrixFile = file;
  if (p.generated()) return p;
  std::ifstream in(p.matrixFile, std::ios::binary);
  if (!in) {
    p.problem = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE: cannot open " + p.matrixFile;
    return p;
  }
  std::stringstream text;
  text << in.rdbuf();
  p.problem = parseAllToAllvMatrix(text.str(), p);
  return p;
}

}  // namespace

size_t AllToAllvPattern::peerBytes(int from, int to, int nranks, size_t total) const {
  if (!generated()) return bytes[size_t(from) * size_t(dimension) + size_t(to)];
  if (nranks == 1) return total & ~size_t(15);
  const int distance = (to - from + nranks) % nranks;
  const double distances = double(nranks) * (nranks - 1) / 2;
  const double uniform = double(total) / nranks, weighted = distance * double(total) / distances;
  return size_t((1.0 - spread) * uniform + spread * weighted) & ~size_t(15);
}

size_t AllToAllvPattern::sentElements(int rank, int nranks, size_t total, size_t elementSize) const {
  size_t sum = 0;
  for (int p = 0; p < nranks; p++) sum += peerBytes(rank, p, nranks, total) / elementSize;
  return sum;
}

size_t AllToAllvPattern::receivedElements(int rank, int nranks, size_t total, size_t elementSize) const {
  size_t sum = 0;
  for (int p = 0; p < nranks; p++) sum += peerBytes(p, rank, nranks, total) / elementSize;
  return sum;
}

const AllToAllvPattern& allToAllvPattern() {
  static const AllToAllvPattern pattern = fromEnvironment();
  return pattern;
}

std::string parseAllToAllvMatrix(const std::string& text, AllToAllvPattern& pattern) {
  const std::string file = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE " + pattern.matrixFile;
  std::vector<size_t> cells;
  size_t rows = 0, columns = 0;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream row(line);
    std::string word;
    size_t n = 0;
    while (row >> word) {
      const std::string where = " at row " + std::to_string(rows + 1) + ", column " + std::to_string(n + 1);
      errno = 0;
      char* end = nullptr;
      const double value = std::strtod(word.c_str(), &end);
      if (end == word.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
        return file + ": '" + word + "'" + where + " is not a number";
      if (value < 0) return file + ": " + word + where + " is negative";
      const long double scaled = (long double)value * pattern.matrixScale;
      if (scaled > (long double)SIZE_MAX) return file + ": " + word + where + " times the scale overflows";
      cells.push_back(size_t(scaled) & ~size_t(15));  // 16-byte blocks, as every other sweep cuts them
      n++;
    }
    if (n == 0) continue;
    if (rows > 0 && n != columns)
      return file + ": row " + std::to_string(rows + 1) + " has " + std::to_string(n) + " values, the first " +
             std::to_string(columns);
    columns = n;
    rows++;
  }
  if (rows == 0) return file + ": no values";
  if (rows != columns)
    return file + ": the matrix must be square, not " + std::to_string(rows) + " x " + std::to_string(columns);
  pattern.bytes = std::move(cells);
  pattern.dimension = int(rows);
  return "";
}

std::optional<std::string> allToAllvProblem(int nranks, size_t minBytes, size_t maxBytes) {
  const AllToAllvPattern& p = allToAllvPattern();
  if (p.generated()) return std::nullopt;
  if (!p.problem.empty()) return p.problem;
  if (nranks > p.dimension)
    return "NCCL_TESTS_ALLTOALLV_MATRIX_FILE " + p.matrixFile + " has " + std::to_string(p.dimension) +
           " rows, fewer than the " + std::to_string(nranks) + " ranks";
  if (minBytes != maxBytes)
    return "with NCCL_TESTS_ALLTOALLV_MATRIX_FILE the matrix gives the sizes: -b and -e must be equal (e.g. -b 32M -e "
           "32M)";
  size_t largest = 0;
  for (int r = 0; r < nranks; r++)
    largest = std::max({largest, p.sentElements(r, nranks, 0, 1), p.receivedElements(r, nranks, 0, 1)});
  if (maxBytes < largest)
    return "-e " + std::to_string(maxBytes) + " is below the " + std::to_string(largest) + " bytes that a rank of " +
           "NCCL_TESTS_ALLTOALLV_MATRIX_FILE " + p.matrixFile + " sends or receives: raise -e (and -b)";
  return std::nullopt;
}

}  // namespace tutti::perf
