// The flight recorder through the API: tuttiCommDump's record holds the calls made, a mismatch or a
// timeout with TUTTI_FLIGHT_RECORDER set leaves every rank's record, and tools/tutti-trace names the
// calls that disagree and the rank behind; a signal chosen with TUTTI_FLIGHT_RECORDER_SIGNAL dumps.
// The records are read by Python's json module (an independent parser), through small scripts.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <dirent.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::ScopedEnv;

namespace {

// A fresh directory under the system's temporary directory, removed with its files at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/tutti-flight-test-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    for (const std::string& f : files()) std::remove(f.c_str());
    rmdir(path.c_str());
  }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d))
        if (std::string(e->d_name).rfind("tutti-flight-", 0) == 0) out.push_back(path + "/" + e->d_name);
      closedir(d);
    }
    return out;
  }
};

// Runs a command; returns its standard output and sets *status to its exit status.
std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int raw = pclose(p);
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

// The record's entries, one line each: "collective op count type state", and its header fields.
std::string summary(const std::string& file) {
  int status = 0;
  const std::string out =
      run("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
          "print(d[\"reason\"], d[\"rank\"], d[\"nranks\"]); "
          "[print(e[\"collective\"], e[\"op\"], e[\"count\"], e[\"type\"], e[\"state\"]) for e in d[\"entries\"]]' " +
              file,
          &status);
  CHECK(status == 0);
  return out;
}

}  // namespace

TEST_CASE("flight recorder: tuttiCommDump writes each rank's calls, in order, done", "[flight]") {
  TempDir dir;
  const std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> f(1000, 1.0f);
    std::vector<int32_t> i(20, 1);
    TUTTI_NCCL_CHECK(ncclAllReduce(f.data(), f.data(), 1000, ncclFloat32, ncclSum, comm, nullptr));
    TUTTI_NCCL_CHECK(ncclBroadcast(i.data(), i.data(), 10, ncclInt32, 1, comm, nullptr));
    TUTTI_NCCL_CHECK(ncclAllGather(f.data(), f.data() + 500, 7, ncclFloat32, comm, nullptr));
    TUTTI_NCCL_CHECK(tuttiCommDump(comm, dir.path.c_str()));
    (void)rank;
  });
  REQUIRE(failures.empty());
  auto files = dir.files();
  REQUIRE(files.size() == 2);
  for (const std::string& f : files) {
    INFO(f);
    const std::string s = summary(f);
    const std::string rank = f.substr(f.size() - 6, 1);  // "...rankR.json"
    CHECK(s == "request " + rank +
                   " 2\n0 AllReduce 1000 float32 done\n1 Broadcast 10 int32 done\n2 AllGather 7 float32 done\n");
  }
  int status = 0;
  const std::string trace = run("python3 " TUTTI_TRACE_SCRIPT " " + dir.path, &status);
  INFO(trace);
  CHECK(status == 0);
  CHECK(trace.find("the ranks agree") != std::string::npos);
}

TEST_CASE("flight recorder: tuttiCommDump without a path needs TUTTI_FLIGHT_RECORDER", "[flight]") {
  ScopedEnv unset("TUTTI_FLIGHT_RECORDER", nullptr);
  const std::string failures = tutti_test::runThreads(1, [&](int, int, ncclComm_t comm) {
    tutti_test::check(tuttiCommDump(comm, nullptr) == ncclInvalidArgument,
                      "a NULL path without TUTTI_FLIGHT_RECORDER is refused");
    tutti_test::check(std::string(ncclGetLastError(comm)).find("TUTTI_FLIGHT_RECORDER is not set") != std::string::npos,
                      ncclGetLastError(comm));
  });
  CHECK(failures.empty());
  CHECK(tuttiCommDump(nullptr, "x") == ncclInvalidArgument);
}

TEST_CASE("flight recorder: a mismatch leaves every rank's record, and tutti-trace names the calls", "[flight]") {
  TempDir dir;
  ScopedEnv record("TUTTI_FLIGHT_RECORDER", dir.path.c_str());
  ScopedEnv algo("NCCL_ALGO", "ring");
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "1");
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  tutti_test::runThreads(3, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> x(400, 1.0f);
    TUTTI_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 400, ncclFloat32, ncclSum, comm, nullptr));
    ncclAllReduce(x.data(), x.data(), rank == 0 ? 100 : 400, ncclFloat32, ncclSum, comm, nullptr);  // fails
  });
  REQUIRE(dir.files().size() == 3);
  int status = 0;
  const std::string trace = run("python3 " TUTTI_TRACE_SCRIPT " --json " + dir.path, &status);
  INFO(trace);
  CHECK(status == 1);
  CHECK(trace.find("\"collective\": 1") != std::string::npos);
  CHECK(trace.find("AllReduce(count 100, float32, sum) as collective #1") != std::string::npos);
  CHECK(trace.find("AllReduce(count 400, float32, sum) as collective #1") != std::string::npos);
}

TEST_CASE("flight recorder: a timeout's records show the rank behind and whom the other waited for", "[flight]") {
  TempDir dir;
  ScopedEnv record("TUTTI_FLIGHT_RECORDER", dir.path.c_str());
  ScopedEnv algo("NCCL_ALGO", "ring");
  ncclComm_t comms[2] = {nullptr, nullptr};
  {
    ScopedEnv timeout("TUTTI_TIMEOUT", "2");
    tutti_test::initPair(comms);
  }
  std::vector<float> x(4096, 1.0f), y(4096, 1.0f);
  std::thread other([&] { ncclAllReduce(y.data(), y.data(), 4096, ncclFloat32, ncclSum, comms[1], nullptr); });
  REQUIRE(ncclAllReduce(x.data(), x.data(), 4096, ncclFloat32, ncclSum, comms[0], nullptr) == ncclSuccess);
  other.join();
  // Rank 1 never makes the second call.
  CHECK(ncclAllReduce(x.data(), x.data(), 4096, ncclFloat32, ncclSum, comms[0], nullptr) == ncclRemoteError);
  // Rank 1 learns of it by a notice, and writes its record too.
  for (int i = 0; i < 100 && dir.files().size() < 2; i++) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(dir.files().size() == 2);
  int status = 0;
  const std::string trace = run("python3 " TUTTI_TRACE_SCRIPT " " + dir.path, &status);
  INFO(trace);
  CHECK(status == 1);
  CHECK(trace.find("rank 1 is behind: its last collective is #0, others reached #1") != std::string::npos);
  CHECK(trace.find("rank 0 last waited for rank 1") != std::string::npos);
  ncclCommDestroy(comms[0]);
  ncclCommDestroy(comms[1]);
}

TEST_CASE("flight recorder: the signal TUTTI_FLIGHT_RECORDER_SIGNAL names makes a process dump", "[flight]") {
  TempDir dir;
  const std::string failures = tutti_test::runProcesses(
      1,
      [&](int, int, ncclComm_t comm) {
        std::vector<float> x(64, 1.0f);
        TUTTI_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        raise(SIGUSR2);
        bool seen = false;
        for (int i = 0; i < 200 && !seen; i++) {
          if (DIR* d = opendir(dir.path.c_str())) {
            while (dirent* e = readdir(d))
              seen = seen || std::string(e->d_name).find(".json") == std::string(e->d_name).size() - 5;
            closedir(d);
          }
          if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        tutti_test::check(seen, "no flight record appeared after SIGUSR2");
      },
      60, 1,
      [&](int) {
        setenv("TUTTI_FLIGHT_RECORDER", dir.path.c_str(), 1);
        setenv("TUTTI_FLIGHT_RECORDER_SIGNAL", "SIGUSR2", 1);
      });
  REQUIRE(failures.empty());
  auto files = dir.files();
  REQUIRE(files.size() == 1);
  CHECK(summary(files[0]) == "signal 0 1\n0 AllReduce 64 float32 done\n");
}
