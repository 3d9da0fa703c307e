// Capturing tutti's log in a test.
#include "tests/common/log_support.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "base/log.h"

namespace tutti_test {

namespace {
std::filesystem::path makeDirectory() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tutti-test-log-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  return pattern;
}
}  // namespace

CapturedLog::CapturedLog(const char* level, const char* subsystems)
    : directory_(makeDirectory()), file_(directory_ / "tutti.log") {
  for (auto& [name, value] : std::vector<std::pair<const char*, std::string>>{
           {"NCCL_DEBUG", level}, {"NCCL_DEBUG_SUBSYS", subsystems}, {"NCCL_DEBUG_FILE", file_.string()}}) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name, value.c_str(), 1);
  }
  tutti::log::reset();
}

CapturedLog::~CapturedLog() {
  for (auto& [name, old] : saved_) {
    if (old)
      setenv(name, old->c_str(), 1);
    else
      unsetenv(name);
  }
  tutti::log::reset();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::vector<std::string> CapturedLog::linesWith(const std::string& text) const {
  std::vector<std::string> found;
  std::ifstream in(file_);
  for (std::string line; std::getline(in, line);)
    if (line.find(text) != std::string::npos) found.push_back(line);
  return found;
}

}  // namespace tutti_test
