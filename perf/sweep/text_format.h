// printf into a std::string, for the report and header lines that keep nccl-tests' printf formats.
#pragma once

#include <cstdio>
#include <string>

namespace tutti::perf {

template <class... Args>
std::string printf1(const char* format, Args... args) {
  int size = std::snprintf(nullptr, 0, format, args...);
  std::string out(size_t(size > 0 ? size : 0), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}

}  // namespace tutti::perf
