// The one Catch2 main shared by every test binary. It first applies TUTTI_TEST_ENV
// ("NAME=value|NAME=value"): the CTest properties that test discovery sets carry one environment
// variable only (a list would be split into separate properties), so the runs of a test binary
// under another configuration set all of theirs through this one.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

bool applyTestEnvironment(const std::string& list) {
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find('|', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "TUTTI_TEST_ENV: \"%s\" is not NAME=value (in \"%s\")\n", item.c_str(), list.c_str());
      return false;
    }
    setenv(item.substr(0, eq).c_str(), item.substr(eq + 1).c_str(), 1);
    start = end + 1;
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (const char* list = std::getenv("TUTTI_TEST_ENV"))
    if (!applyTestEnvironment(list)) return 2;
  return Catch::Session().run(argc, argv);
}
