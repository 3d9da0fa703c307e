// Tests of logging: NCCL's line shape, levels, subsystem filtering, NCCL_DEBUG_FILE and threads.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"

namespace fs = std::filesystem;

// Inside tutti, so that log:: names tutti::log rather than the C library's log().
namespace tutti {
namespace {

// A fresh directory for one test's log files; removed afterwards, and logging is reset so no
// later test writes into it.
class LogDirectory {
 public:
  LogDirectory() {
    std::string pattern = (fs::temp_directory_path() / "tutti-log-test-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~LogDirectory() {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_SUBSYS");
    unsetenv("NCCL_DEBUG_FILE");
    log::reset();
    log::setThreadDevice(0);
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Points the log at `file` with this level and subsystem list, and re-reads the environment.
void configure(const char* level, const char* subsys, const fs::path& file) {
  setenv("NCCL_DEBUG", level, 1);
  if (subsys != nullptr)
    setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  else
    unsetenv("NCCL_DEBUG_SUBSYS");
  setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
  log::reset();
}

// The lines of a log file, without the version banner (written once per process, whenever
// logging is first configured, so it may or may not be in a given file).
std::vector<std::string> logLines(const fs::path& file) {
  // Closes the file, so everything written is on disk.
  unsetenv("NCCL_DEBUG");
  log::reset();
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.find("NCCL version ") == std::string::npos) lines.push_back(line);
  return lines;
}

std::string shortHostname() {
  char name[256] = {};
  REQUIRE(gethostname(name, sizeof name - 1) == 0);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

std::string linePrefix(int device) {
  return shortHostname() + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid)) + " [" +
         std::to_string(device) + "]";
}

// Runs one hidden test case of this binary in a fresh process (so process-wide once-only
// behaviour can be observed), with stdout discarded; returns its exit status.
int runInFreshProcess(const char* testSpec) {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    execl("/proc/self/exe", "log_test_child", testSpec, static_cast<char*>(nullptr));
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL("the child test process did not finish within 20 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("log: NCCL_DEBUG_SUBSYS syntax", "[log]") {
  CHECK(log::parseSubsysMask("INIT") == log::Init);
  CHECK(log::parseSubsysMask("INIT,NET") == (log::Init | log::Net));
  CHECK(log::parseSubsysMask("init, coll ,P2P") == (log::Init | log::Coll | log::P2p));
  CHECK(log::parseSubsysMask("ALL") == log::All);
  CHECK(log::parseSubsysMask("^INIT") == (log::All & ~uint64_t(log::Init)));
  CHECK(log::parseSubsysMask("^INIT,BOOTSTRAP") == (log::All & ~uint64_t(log::Init | log::Bootstrap)));
  CHECK(log::parseSubsysMask("^ALL") == 0);
  CHECK(log::parseSubsysMask("BOGUS,SHM") == log::Shm);
  CHECK(log::parseSubsysMask("") == 0);
  CHECK(log::parseSubsysMask("INIT,BOOTSTRAP,ENV") == (log::Init | log::Bootstrap | log::Env));
}

TEST_CASE("log: NCCL_DEBUG_FILE expands %h and %p", "[log]") {
  CHECK(log::expandDebugFileName("/x/nccl.%h.%p.log", "node7", 1234) == "/x/nccl.node7.1234.log");
  CHECK(log::expandDebugFileName("plain", "node7", 1) == "plain");
  CHECK(log::expandDebugFileName("100%%-%p", "h", 5) == "100%-5");
  CHECK(log::expandDebugFileName("a%q%", "h", 5) == "a%q%");
  CHECK(log::expandDebugFileName("%h%h", "h", 5) == "hh");
}

TEST_CASE("log: INFO and WARN lines have NCCL's shape and go to the expanded file", "[log]") {
  LogDirectory dir;
  configure("INFO", "INIT,NET", dir.path() / "nccl.%h.%p");
  log::setThreadDevice(3);
  TUTTI_INFO(log::Init, "hello %d", 42);
  TUTTI_INFO(log::Coll, "filtered out");
  TUTTI_INFO(log::Net, "net line\n");
  int warnLine = __LINE__ + 1;
  TUTTI_WARN("warned %s", "loudly");
  TUTTI_TRACE(log::Init, "too detailed");

  fs::path expected = dir.path() / ("nccl." + shortHostname() + "." + std::to_string(getpid()));
  REQUIRE(fs::exists(expected));
  std::vector<std::string> lines = logLines(expected);
  std::string head = linePrefix(3);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == head + " NCCL INFO hello 42");
  CHECK(lines[1] == head + " NCCL INFO net line");
  CHECK(lines[2] == head + " tests/base/log_test.cpp:" + std::to_string(warnLine) + " NCCL WARN warned loudly");
  // The shape NCCL's log tooling parses.
  std::regex shape(R"(^[^:.\s]+:\d+:\d+ \[\d+\] (\S+:\d+ )?NCCL (INFO|WARN) .*$)");
  for (const std::string& line : lines) CHECK(std::regex_match(line, shape));
}

TEST_CASE("log: ^ excludes subsystems, TRACE and CALL lines", "[log]") {
  LogDirectory dir;
  fs::path file = dir.path() / "trace.log";
  configure("TRACE", "^INIT,BOOTSTRAP", file);
  TUTTI_INFO(log::Init, "excluded init");
  TUTTI_INFO(log::Bootstrap, "excluded bootstrap");
  TUTTI_INFO(log::Coll, "coll info");
  TUTTI_TRACE(log::Proxy, "proxy trace %u", 7u);
  TUTTI_TRACE(log::Call, "ncclAllReduce(%d)", 1);
  std::vector<std::string> lines = logLines(file);
  REQUIRE(lines.size() == 3);
  std::string head = linePrefix(0);
  CHECK(lines[0] == head + " NCCL INFO coll info");
  CHECK(std::regex_match(lines[1],
                         std::regex("^" + head.substr(0, head.size() - 4) +
                                    R"( \[0\] \d+\.\d{6} tests/base/log_test\.cpp:\d+ NCCL TRACE proxy trace 7$)")));
  std::string callHead = shortHostname() + ":" + std::to_string(getpid()) + ":" + std::to_string(syscall(SYS_gettid));
  CHECK(lines[2] == callHead + " NCCL CALL ncclAllReduce(1)");
}

TEST_CASE("log: levels decide what is enabled", "[log]") {
  LogDirectory dir;
  fs::path file = dir.path() / "levels.log";

  setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  log::reset();
  CHECK_FALSE(log::enabled(log::Level::Warn, log::All));
  TUTTI_WARN("nobody sees this");
  CHECK_FALSE(fs::exists(file));  // an unset NCCL_DEBUG creates no file

  configure("WARN", nullptr, file);
  CHECK(log::enabled(log::Level::Warn, log::All));
  CHECK_FALSE(log::enabled(log::Level::Info, log::Init));

  configure("info", nullptr, file);  // case-insensitive
  CHECK(log::enabled(log::Level::Info, log::Init));
  CHECK(log::enabled(log::Level::Info, log::Env));
  CHECK_FALSE(log::enabled(log::Level::Info, log::Coll));  // not in the default subsystems
  CHECK_FALSE(log::enabled(log::Level::Trace, log::Init));

  configure("TRACE", "ALL", file);
  CHECK(log::enabled(log::Level::Trace, log::Coll));

  configure("WARN", "^ALL", file);
  CHECK_FALSE(log::enabled(log::Level::Warn, log::All));

  configure("LOUD", nullptr, file);
  CHECK(log::enabled(log::Level::Warn, log::All));
  CHECK_FALSE(log::enabled(log::Level::Info, log::Init));
  std::vector<std::string> lines = logLines(file);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("NCCL WARN NCCL_DEBUG=LOUD: unknown level") != std::string::npos);
}

TEST_CASE("log: reset() reopening the same file appends", "[log]") {
  LogDirectory dir;
  fs::path file = dir.path() / "same.log";
  configure("INFO", "INIT", file);
  TUTTI_INFO(log::Init, "first");
  configure("INFO", "INIT", file);
  TUTTI_INFO(log::Init, "second");
  std::vector<std::string> lines = logLines(file);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].ends_with("first"));
  CHECK(lines[1].ends_with("second"));
}

namespace {
struct SunkLine {
  log::Level level;
  uint64_t subsys;
  std::string message;
};
std::vector<SunkLine> sunk;
void sink(log::Level level, uint64_t subsys, const char*, int, const char* message) {
  sunk.push_back({level, subsys, message});
}
}  // namespace

TEST_CASE("log: a redirected log hands its lines to the sink and never opens NCCL_DEBUG_FILE", "[log]") {
  // What a net plugin's copy of this code does: the host's file must not be truncated by it.
  LogDirectory dir;
  fs::path file = dir.path() / "host.log";
  { std::ofstream(file) << "a line the host wrote\n"; }
  sunk.clear();
  log::redirect(sink);
  configure("INFO", "NET", file);
  TUTTI_INFO(log::Net, "through the sink %d", 42);
  TUTTI_INFO(log::Init, "filtered out");
  TUTTI_WARN("a warning");
  log::redirect(nullptr);
  REQUIRE(sunk.size() == 2);
  CHECK(sunk[0].level == log::Level::Info);
  CHECK(sunk[0].subsys == log::Net);
  CHECK(sunk[0].message == "through the sink 42");
  CHECK(sunk[1].level == log::Level::Warn);
  std::ifstream in(file);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "a line the host wrote\n");
}

TEST_CASE("log: an unopenable NCCL_DEBUG_FILE falls back to stdout with a warning", "[log]") {
  LogDirectory dir;
  fs::path captured = dir.path() / "stdout.txt";
  std::fflush(stdout);
  int savedStdout = dup(STDOUT_FILENO);
  REQUIRE(savedStdout >= 0);
  int capture = open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(capture >= 0);
  dup2(capture, STDOUT_FILENO);
  close(capture);

  configure("WARN", nullptr, dir.path() / "no-such-dir" / "x.log");
  TUTTI_WARN("after the fallback");
  std::fflush(stdout);
  dup2(savedStdout, STDOUT_FILENO);
  close(savedStdout);

  std::vector<std::string> lines = logLines(captured);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("NCCL WARN NCCL_DEBUG_FILE: cannot open " + (dir.path() / "no-such-dir" / "x.log").string() +
                      ": No such file or directory; logging to stdout") != std::string::npos);
  CHECK(lines[1].ends_with("NCCL WARN after the fallback"));
}

TEST_CASE("log: lines from many threads never interleave", "[log]") {
  LogDirectory dir;
  fs::path file = dir.path() / "threads.log";
  configure("INFO", "COLL", file);
  constexpr int kThreads = 4;
  constexpr int kLines = 500;
  const std::string filler(300, 'x');  // longer lines are likelier to tear if unguarded
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      log::setThreadDevice(t);
      for (int i = 0; i < kLines; ++i) TUTTI_INFO(log::Coll, "thread %d line %d %s end", t, i, filler.c_str());
    });
  for (std::thread& thread : threads) thread.join();

  std::vector<std::string> lines = logLines(file);
  REQUIRE(lines.size() == size_t(kThreads * kLines));
  std::regex shape(R"(^[^:\s]+:\d+:\d+ \[(\d)\] NCCL INFO thread (\d) line (\d+) x{300} end$)");
  std::vector<int> nextLine(kThreads, 0);
  for (const std::string& line : lines) {
    std::smatch match;
    REQUIRE(std::regex_match(line, match, shape));
    int thread = std::stoi(match[2]);
    CHECK(std::stoi(match[1]) == thread);
    CHECK(std::stoi(match[3]) == nextLine[thread]++);  // each thread's lines in order
  }
}

// Runs in a child process started by the test below (hidden: not run on its own).
TEST_CASE("log: version banner child", "[.][log-banner-child]") {
  log::reset();
  log::reset();
  TUTTI_INFO(log::Init, "after two resets");
}

TEST_CASE("log: the version banner is written once per process", "[log]") {
  LogDirectory dir;
  const std::string banner = std::string("NCCL version 2.28.9+tutti-") + TUTTI_VERSION_STRING;
  for (const char* level : {"VERSION", "INFO"}) {
    INFO(level);
    fs::path file = dir.path() / (std::string("banner-") + level + ".log");
    // The child inherits these; ~LogDirectory unsets them.
    setenv("NCCL_DEBUG", level, 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
    REQUIRE(runInFreshProcess("[log-banner-child]") == 0);
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    if (std::string(level) == "VERSION") {
      REQUIRE(lines.size() == 1);
      CHECK(lines[0] == banner);  // bare, as NCCL writes it at VERSION
    } else {
      REQUIRE(lines.size() == 2);
      CHECK(std::regex_match(lines[0], std::regex(R"(^[^:\s]+:\d+:\d+ \[0\] NCCL INFO .*$)")));
      CHECK(lines[0].ends_with(" NCCL INFO " + banner));
      CHECK(lines[1].ends_with("NCCL INFO after two resets"));
    }
  }
}

}  // namespace tutti
