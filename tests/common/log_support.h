// Capturing tutti's log in a test: a fresh file for this process and the rank processes it forks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tutti_test {

// Sends this process's log (and that of the rank processes it forks, which inherit the open file)
// at `level` for `subsystems` to a fresh file, for as long as it lives; then restores the previous
// configuration.
class CapturedLog {
 public:
  explicit CapturedLog(const char* level = "INFO", const char* subsystems = "INIT,NET");
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // The lines written so far that contain `text`.
  std::vector<std::string> linesWith(const std::string& text) const;

 private:
  std::filesystem::path directory_;
  std::filesystem::path file_;
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

}  // namespace tutti_test
