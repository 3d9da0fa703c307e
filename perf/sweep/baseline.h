// --compare's baseline: a JSON report read back, and the sizes of this run slower than it.
#pragma once

#include <compare>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "perf/sweep/report.h"

namespace tutti::perf {

// A baseline's out-of-place and in-place times per (type, redop, root, bytes), read from a JSON report.
struct BaselineKey {
  std::string type, redop;
  int root;
  size_t bytes;
  auto operator<=>(const BaselineKey&) const = default;
};
struct Baseline {
  std::string collective;  // "" when the report does not say
  int nranks = 0;          // 0 when the report does not say
  std::string split;       // the split variable the run was made with, "" for none (or a report from before splits)
  std::map<BaselineKey, std::pair<double, double>> times;
};
// Reads a JSON report; source names it in errors, which also name the malformed field (perf::Error).
Baseline readBaseline(const std::string& jsonText, const std::string& source = "the baseline");

// "# compare" lines for rows slower than baseline by more than threshold (a fraction); slower counts them.
std::string compareLines(const std::vector<ResultRow>& rows,
                         const std::map<BaselineKey, std::pair<double, double>>& baseline, double threshold,
                         int* slower);

}  // namespace tutti::perf
