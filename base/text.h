// Case-insensitive comparison of ASCII text, as NCCL's variables and names are compared.
#pragma once

#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace tutti {

inline char asciiLower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

inline bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (asciiLower(a[i]) != asciiLower(b[i])) return false;
  return true;
}

inline bool startsWithIgnoringCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && equalsIgnoringCase(text.substr(0, prefix.size()), prefix);
}

inline std::string toLower(std::string_view text) {
  std::string lowered(text);
  for (char& c : lowered) c = asciiLower(c);
  return lowered;
}

}  // namespace tutti
