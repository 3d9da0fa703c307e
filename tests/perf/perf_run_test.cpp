// Runs each *_perf binary as a 2-rank local sweep with checking and reads its output against nccl-tests' format.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "perf/sweep/build_info.h"

namespace {

// A port for a bootstrap root the test names itself (NCCL_COMM_ID, MASTER_PORT): below the
// kernel's ephemeral range (32768 up), where the listeners of the tests that run beside this one
// (they bind port 0) never land, and free when asked. Distinct offsets give distinct ports.
int testPort(int offset) {
  for (int attempt = 0; attempt < 500; attempt++) {
    const int port = 10000 + int((uint64_t(getpid()) * 7 + uint64_t(offset) * 211 + uint64_t(attempt) * 4099) % 22000);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool free = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0) close(fd);
    if (free) return port;
  }
  return 10000 + int(getpid() % 22000);
}

struct Run {
  int exitCode;
  std::string output;  // stdout and stderr together
};

// Runs a shell command, capturing stdout and stderr together.
Run runShell(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, output};
}

using tutti::perf::thisBuild;

std::string toolPath(const std::string& binary) { return std::string(TUTTI_PERF_BINARY_DIR) + "/" + binary; }

Run runTool(const std::string& environment, const std::string& binary, const std::string& arguments) {
  return runShell("env " + environment + " timeout 60 " + toolPath(binary) + " " + arguments + " 2>&1");
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The data rows of nccl-tests' table: 5 fixed columns, then time, algbw, busbw, #wrong twice.
const std::regex kRow(R"(^ {0,11}\d+  +\d+ +\S+ +\S+ +-?\d+(  +[0-9.e+]+  +[0-9.e+]+  +[0-9.e+]+  +(\d+|N/A)){2}$)");

// The fields of every data row in a run's output: size, count, type, redop, root, then time, algbw, busbw, #wrong
// out-of-place (5-8) and in-place (9-12).
std::vector<std::vector<std::string>> tableRows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : lines(output)) {
    if (!std::regex_match(line, kRow)) continue;
    std::istringstream in(line);
    rows.emplace_back();
    for (std::string field; in >> field;) rows.back().push_back(field);
  }
  return rows;
}

}  // namespace

TEST_CASE("perf binaries: a 2-rank local sweep with -c 1 has nccl-tests' output and no wrong values") {
  const char* binaries[] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf",
                            "reduce_perf",     "alltoall_perf",   "sendrecv_perf",       "gather_perf",
                            "scatter_perf",    "hypercube_perf",  "alltoallv_perf",      "rma_perf"};
  for (const char* binary : binaries) {
    INFO(binary);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", binary, "--local 2 -b 8 -e 64K -f 8 -c 1 -n 2 -w 1");
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    std::vector<std::string> out = lines(run.output);
    REQUIRE(out.size() > 12);
    CHECK(std::regex_match(out[0], std::regex(R"(# nccl-tests version \S+ .*nccl-headers=\d+ nccl-library=\d+)")));
    CHECK(out[1] == std::string("# Collective test starting: ") + binary);
    CHECK(std::regex_match(
        out[2],
        std::regex(
            R"(# nThread 2 nGpus 1 minBytes 8 maxBytes 65536 step: 8\(factor\) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0)")));
    CHECK((run.output.find("# tutti: an in-place sendrecv sends from and receives into one buffer in one group, "
                           "which NCCL calls invalid usage") != std::string::npos) ==
          (std::string(binary) == "sendrecv_perf"));
    size_t devices = 0;
    while (devices < out.size() && out[devices] != "# Using devices") devices++;
    REQUIRE(devices + 2 < out.size());
    for (int r = 0; r < 2; r++)
      CHECK(std::regex_match(
          out[devices + 1 + size_t(r)],
          std::regex("#  Rank  " + std::to_string(r) +
                     R"( Group  0 Pid +\d+ on +\S+ device +\d+ \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\] .*)")));
    size_t header = devices + 3;
    REQUIRE(header + 3 < out.size());
    CHECK(out[header] == "#");
    CHECK(rtrim(out[header + 2]) ==
          "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
          "busbw  #wrong");
    CHECK(rtrim(out[header + 3]) ==
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
          "(GB/s)");
    std::vector<std::string> rows;
    size_t i = header + 4;
    for (; i < out.size() && out[i].rfind("#", 0) != 0; i++) rows.push_back(out[i]);
    CHECK(rows.size() == 5);  // 8, 64, 512, 4096, 32768 bytes
    for (const std::string& row : rows) {
      INFO(row);
      // nccl-tests' cells: 118 characters, one less for each "N/A" (it is printed in 7, a count in 8).
      size_t notChecked = row.find("N/A") == std::string::npos ? 0 : 1;
      CHECK(row.size() == 118 - notChecked);
      CHECK(std::regex_match(row, kRow));
      std::istringstream fields(row);
      std::string bytes, count, type, redop, root, t1, a1, b1, w1, t2, a2, b2, w2;
      fields >> bytes >> count >> type >> redop >> root >> t1 >> a1 >> b1 >> w1 >> t2 >> a2 >> b2 >> w2;
      CHECK(type == "float");
      CHECK(w1 == "0");
      // An in-place sendrecv is invalid usage (one buffer sent from and received into in one
      // group), alltoallv runs out of place only, and a put goes into another rank's window: not run,
      // their columns N/A, and the header says why.
      if (std::string(binary) == "sendrecv_perf" || std::string(binary) == "alltoallv_perf" ||
          std::string(binary) == "rma_perf") {
        CHECK(w2 == "N/A");
        CHECK(std::stod(t2) == 0.0);
      } else {
        CHECK(w2 == "0");
      }
    }
    REQUIRE(i + 3 < out.size());
    CHECK(out[i] == "# Out of bounds values : 0 OK");
    CHECK(std::regex_match(out[i + 1], std::regex(R"(# Avg bus bandwidth    : [0-9.e+-]+ ?)")));
    CHECK(out[i + 2] == "#");
    CHECK(out[i + 3] == std::string("# Collective test concluded: ") + binary);
  }
}

TEST_CASE("perf binaries: -t 2 -g 2 drives 4 ranks from 2 threads, each thread's ranks in one group") {
  for (const char* arguments : {"-t 2 -g 2", "--local 4 -g 2 -y 1"}) {
    INFO(arguments);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf",
                      std::string(arguments) + " -b 8 -e 64K -f 8 -c 1 -n 2 -w 1");
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    CHECK(run.output.find("\n# nThread 2 nGpus 2 minBytes 8 maxBytes 65536 ") != std::string::npos);
    CHECK(run.output.find(", 4 ranks in 1 processes on 1 nodes\n") != std::string::npos);
    for (int r = 0; r < 4; r++)
      CHECK(std::regex_search(run.output, std::regex("\n#  Rank  " + std::to_string(r) + " Group  0 Pid ")));
    std::vector<std::vector<std::string>> rows = tableRows(run.output);
    CHECK(rows.size() == 5);
    for (const std::vector<std::string>& f : rows) CHECK((f[8] == "0" && f[12] == "0"));
    CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
  // Point-to-point operations of a thread's two ranks meet inside one group.
  Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "sendrecv_perf",
                    "--local 4 -g 2 -b 8 -e 4K -f 8 -c 1 -n 2 -w 1");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
}

// rma_perf's -c 1 reads every rank's window after the puts of the previous rank: rank i's inputs land in rank
// i + 1's window, as sendrecv_perf's receives do.
TEST_CASE("perf binaries: rma_perf checks its puts as a ring and as a round trip, from threads and grouped") {
  struct Case {
    const char* arguments;
    size_t rows;
  };
  const Case cases[] = {
      {"--local 3 -b 0 -e 1M -f 16 -c 1 -n 3 -w 1", 7},  // 0 B (a signal alone), 1 B (too), 16 B .. 1 MiB
      {"--local 2 -b 0 -e 64K -f 16 -c 1 -n 3 -w 1 --rma_roundtrip 1", 6},
      {"--local 3 -b 8 -e 64K -f 8 -c 1 -n 3 -w 1 --rma_roundtrip 1 -d all", 5 * 12},
      {"-t 2 -g 2 -b 8 -e 64K -f 8 -c 2 -n 2 -w 1 -m 2", 5},      // each thread's two ranks in one group
      {"--local 2 -b 8 -e 4K -f 8 -c 1 -n 2 -w 1 -u 3 -y 1", 4},  // unaligned, NULL streams
  };
  for (const Case& c : cases) {
    INFO(c.arguments);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo TUTTI_TIMEOUT=60", "rma_perf", c.arguments);
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    CHECK(run.output.find("# Collective test starting: rma_perf") != std::string::npos);
    CHECK(run.output.find("# tutti: a put goes from the local buffer into another rank's window") != std::string::npos);
    std::vector<std::vector<std::string>> rows = tableRows(run.output);
    CHECK(rows.size() == c.rows);
    for (const std::vector<std::string>& f : rows) {
      CHECK(f[8] == "0");
      CHECK(f[12] == "N/A");
    }
    CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
}

// The check is live: a byte changed in what rank 1 read after the puts is counted as wrong.
TEST_CASE("perf binaries: rma_perf counts a corrupted window byte as wrong") {
  for (const char* mode : {"0", "1"}) {
    INFO(mode);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo TUTTI_PERF_CORRUPT=1:5", "rma_perf",
                      std::string("--local 2 -b 64 -e 64 -c 1 -n 1 -w 1 --rma_roundtrip ") + mode);
    INFO(run.output);
    CHECK(run.output.find("rma_perf: rank 1: rma 64 B float none root -1 out-of-place: 1 wrong elements") !=
          std::string::npos);
    CHECK(run.output.find("# Out of bounds values : 1 FAILED") != std::string::npos);
  }
}

TEST_CASE("perf binaries: rma_perf's round trip refuses -g and -m, whose groups would put before the wait") {
  for (const char* arguments : {"--local 4 -g 2 --rma_roundtrip 1", "--local 2 -m 2 --rma_roundtrip 1"}) {
    INFO(arguments);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "rma_perf", std::string(arguments) + " -b 8 -e 8");
    INFO(run.output);
    CHECK(run.exitCode == 2);
    CHECK(run.output.find("--rma_roundtrip 1 issues each rank's wait before its put") != std::string::npos);
  }
  Run other =
      runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "sendrecv_perf", "--local 2 -b 8 -e 8 --rma_roundtrip 1");
  INFO(other.output);
  CHECK(other.exitCode != 0);
  CHECK(other.output.find("--rma_roundtrip 1 applies to rma_perf only, not sendrecv_perf") != std::string::npos);
}

TEST_CASE("perf binaries: -G needs the cuda device backend: refused before the sweep with exit code 2") {
  for (const char* device : {"host", "emulated"}) {
    INFO(device);
    Run run = runTool(std::string("NCCL_SOCKET_IFNAME=lo TUTTI_DEVICE=") + device, "all_reduce_perf",
                      "--local 2 -b 8 -e 8 -G 2");
    INFO(run.output);
    CHECK(run.exitCode == 2);
    CHECK(run.output.find("all_reduce_perf: option -G 2: -G needs the cuda device backend, and this run's is " +
                          std::string(device)) != std::string::npos);
    CHECK(run.output.find("# nccl-tests version") == std::string::npos);
  }
}

TEST_CASE(
    "perf binaries: TUTTI_DEVICE=emulated sweeps run the device executor's code on host memory, with no wrong values") {
  Run run = runTool("TUTTI_DEVICE=emulated NCCL_SOCKET_IFNAME=lo", "all_reduce_perf", "--local 2 -b 8 -e 1M -f 4 -c 1");
  INFO(run.output);
  REQUIRE(run.exitCode == 0);
  CHECK(run.output.find("\n# tutti: device backend emulated, ") != std::string::npos);
  CHECK(run.output.find("\n# GPUs:") == std::string::npos);  // host memory: no GPU, no driver
  std::vector<std::vector<std::string>> rows = tableRows(run.output);
  CHECK(rows.size() == 9);  // 8 B to 512 KiB, by 4
  for (const std::vector<std::string>& f : rows) CHECK((f[8] == "0" && f[12] == "0"));
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
}

TEST_CASE(
    "perf binaries: an injected corruption is reported with rank, collective, size and offset, and fails the run") {
  Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo TUTTI_PERF_CORRUPT=1:5", "all_reduce_perf",
                    "--local 2 -b 64 -e 64 -c 1 -n 1 -w 0");
  INFO(run.output);
  CHECK(run.exitCode != 0);
  CHECK(
      run.output.find("rank 1: all_reduce 64 B float sum root -1 out-of-place: 1 wrong elements, first at element 5") !=
      std::string::npos);
  CHECK(run.output.find("# Out of bounds values : 2 FAILED") != std::string::npos);
  CHECK(
      std::regex_search(run.output, std::regex(R"(\n +64 +16 +float +sum +-1 +\S+ +\S+ +\S+ +1 +\S+ +\S+ +\S+ +1\n)")));
  // The same run without the corruption passes: the failure above came from the hook alone.
  CHECK(runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf", "--local 2 -b 64 -e 64 -c 1 -n 1 -w 0")
            .exitCode == 0);
}

TEST_CASE("perf binaries: a launcher world the tool cannot join is refused") {
  // Slurm's variables: mpirun's would start MPI in a build that has it.
  Run run = runTool(
      "-u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT -u TUTTI_PERF_ID_FILE TUTTI_DEVICE=host SLURM_PROCID=0 "
      "SLURM_NTASKS=2",
      "all_reduce_perf", "-b 8 -e 8");
  INFO(run.output);
  CHECK(run.exitCode != 0);
  CHECK(run.output.find("Refusing to run 2 separate one-process jobs") != std::string::npos);
}

TEST_CASE("perf binaries: two processes launched torchrun-style form one world") {
  int port = testPort(0);
  std::string env = "env TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                    std::to_string(port);
  std::string tool = " timeout 60 " + toolPath("all_reduce_perf") + " -b 8 -e 4K -f 8 -n 2 -c 1";
  // Rank 1 in the background, rank 0 in the foreground; the exit code is rank 0's, or rank 1's if that failed.
  Run run = runShell(env + " RANK=1 LOCAL_RANK=1" + tool + " >/dev/null 2>&1 & " + env + " RANK=0 LOCAL_RANK=0" + tool +
                     " 2>&1; rc=$?; wait $! || rc=$?; exit $rc");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  CHECK(run.output.find("launcher torchrun") != std::string::npos);
  CHECK(run.output.find("2 ranks in 2 processes on 1 nodes") != std::string::npos);
  CHECK(run.output.find("transports shm,") != std::string::npos);
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
}

TEST_CASE("perf binaries: every binary across two hosts over NCCL_NET=IB on the verbs stand-in, with no wrong values") {
  // Two rank processes on two NCCL_HOSTID hosts of this machine: every byte between them goes
  // through the IB backend, which runs on the stand-in that TUTTI_IBVERBS_LIB loads.
  for (const char* name : {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf", "reduce_perf",
                           "alltoall_perf", "sendrecv_perf", "gather_perf", "scatter_perf", "hypercube_perf"}) {
    int port = testPort(100 + int(std::hash<std::string>{}(name) % 1000));
    std::string env = std::string("env TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo NCCL_NET=IB TUTTI_IBVERBS_LIB=") +
                      TUTTI_IBVERBS_STANDIN + " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
    std::string tool = " timeout 60 " + toolPath(name) + " -b 8 -e 64K -f 8 -n 2 -w 1 -c 1";
    Run run =
        runShell(env + " NCCL_HOSTID=perf-ib-b RANK=1 LOCAL_RANK=0" + tool + " >/dev/null 2>&1 & " + env +
                 " NCCL_HOSTID=perf-ib-a RANK=0 LOCAL_RANK=0" + tool + " 2>&1; rc=$?; wait $! || rc=$?; exit $rc");
    INFO(name << ":\n" << run.output);
    CHECK(run.exitCode == 0);
    CHECK(run.output.find("2 ranks in 2 processes on 2 nodes") != std::string::npos);
    CHECK(run.output.find("net/IB") != std::string::npos);
    CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
}

namespace {

std::vector<double> numbers(const std::string& list) {
  std::vector<double> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stod(item));
  return out;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("perf binaries: -I 1 -K 1 adds per-iteration columns that agree with the times and reach the JSON") {
  std::string json = "/tmp/tutti_perf_iter_" + std::to_string(getpid()) + ".json";
  // -a 3: the time is the slowest rank's, which bounds the per-iteration maxima from both sides (see below).
  Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf",
                    "--local 2 -b 8 -e 4K -f 8 -n 5 -w 1 -c 1 -a 3 -I 1 -K 1 --json " + json);
  INFO(run.output);
  REQUIRE(run.exitCode == 0);
  CHECK(run.output.find("# Per-Iteration Report: host clock timing") != std::string::npos);
  CHECK(run.output.find("summary skips first 1 iterations") != std::string::npos);
  std::vector<std::string> out = lines(run.output);
  size_t header = 0;
  while (header < out.size() && out[header].rfind("#       size", 0) != 0) header++;
  REQUIRE(header + 2 < out.size());
  CHECK(rtrim(out[header]) ==
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    "
        "i_p99    i_cv%"
        "     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%");
  size_t rows = 0;
  for (size_t i = header + 2; i < out.size() && out[i].rfind("#", 0) != 0; i++, rows++) {
    INFO(out[i]);
    std::istringstream in(out[i]);
    std::vector<std::string> f;
    for (std::string field; in >> field;) f.push_back(field);
    REQUIRE(f.size() == 5 + 2 * 8);
    for (size_t p : {5u, 13u}) {
      CHECK(f[p + 3] == "0");  // #wrong
      double iMin = std::stod(f[p + 4]), iMax = std::stod(f[p + 5]), iP99 = std::stod(f[p + 6]),
             cv = std::stod(f[p + 7]);
      CHECK(iMin <= iP99);
      CHECK(iP99 <= iMax);
      CHECK(cv >= 0);
    }
  }
  CHECK(rows == 4);  // 8, 64, 512, 4096 bytes
  std::string report = readText(json);
  std::remove(json.c_str());
  INFO(report);
  CHECK(report.find("\"per_iter_timing\": true") != std::string::npos);
  CHECK(report.find("\"per_iter_skip\": 1") != std::string::npos);
  std::regex placement(
      R"re("(out_of_place|in_place)": \{"time": ([^,]+),[^}]*\}, "\1_per_iter": \{"skipped_iterations": (\d+), "min_us": ([^,]+), "max_us": ([^,]+),[^\]]*"times_us": \[([^\]]*)\])re");
  size_t placements = 0;
  for (std::sregex_iterator m(report.begin(), report.end(), placement), end; m != end; ++m, placements++) {
    double time = std::stod((*m)[2]), minUs = std::stod((*m)[4]), maxUs = std::stod((*m)[5]);
    std::vector<double> times = numbers((*m)[6]);
    CHECK((*m)[3] == "1");
    REQUIRE(times.size() == 5);
    // The summary is over the iterations after the first one.
    CHECK(minUs == Approx(*std::min_element(times.begin() + 1, times.end())).epsilon(1e-5));
    CHECK(maxUs == Approx(*std::max_element(times.begin() + 1, times.end())).epsilon(1e-5));
    // The slowest rank's loop holds all its iterations, each at most that iteration's maximum over ranks: so time (a
    // per-iteration average) is at least (n-K)/(n*ranks) = 0.4 of i_min, and at most the largest iteration plus loop
    // overhead.
    CHECK(minUs <= 2.5 * time * 1.0001);
    CHECK(time <= 1.2 * *std::max_element(times.begin(), times.end()) + 200);
  }
  CHECK(placements == 2 * 4);
}

TEST_CASE("perf binaries: the header and the JSON name the build and each node's NUMA nodes, CPUs, GPUs and NICs") {
  std::string json = "/tmp/tutti_perf_fingerprint_" + std::to_string(getpid()) + ".json";
  Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf",
                    "--local 2 -b 8 -e 8 -n 1 -w 0 -c 0 --json " + json);
  INFO(run.output);
  REQUIRE(run.exitCode == 0);
  std::string report = readText(json);
  std::remove(json.c_str());
  CHECK(std::regex_search(
      run.output,
      std::regex(R"(\n# Build: tutti \S+ .*, \S+, \S+ [0-9.]+, with(out)? MPI(, commit [0-9a-f]+(-dirty)?)?\n)")));
  // The binary names the commit this build wrote, the same that this test (built with it) holds.
  std::string commit = thisBuild().commit;
  CHECK(run.output.find(commit.empty() ? " MPI\n" : ", commit " + commit + "\n") != std::string::npos);
  // One host: one node holding both ranks, with at least one NUMA node and the interfaces discovery found.
  CHECK(std::regex_search(
      run.output,
      std::regex(R"(\n# Topology: node 0 \S+: 2 ranks, [1-9]\d* NUMA nodes, (\d+|\?) CPUs, \d+ GPUs, \d+ NICs.*\n)")));
  CHECK(run.output.find("# Topology: node 1") == std::string::npos);
  INFO(report);
  CHECK(std::regex_search(
      report,
      std::regex(
          R"("build_type": "[^"]+", "compiler": "[^"]+", "mpi": (true|false), "git_commit": ("[0-9a-f]+(-dirty)?"|null))")));
  CHECK(std::regex_search(report, std::regex(R"("nodes": \[\{"hostname": "[^"]+", "ranks": 2, "numa_nodes": [1-9])")));
}

TEST_CASE("perf binaries: mpirun -np 2 forms one world through MPI, with no NCCL_COMM_ID or MASTER_ADDR") {
#ifndef TUTTI_PERF_MPI
  WARN("skipped: this build has no MPI (install libopenmpi-dev and openmpi-bin, then re-run cmake)");
  return;
#endif
  if (runShell("command -v mpirun").exitCode != 0) {
    WARN("skipped: mpirun is not installed (apt-get install openmpi-bin)");
    return;
  }
  // OpenMPI's own traffic stays on loopback; running as root (containers, CI) needs its explicit consent.
  std::string mpirun =
      "env -u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT -u TUTTI_PERF_ID_FILE OMPI_ALLOW_RUN_AS_ROOT=1 "
      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun -np 2 --oversubscribe --mca pml ob1 --mca btl self,tcp "
      "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x TUTTI_DEVICE=host -x NCCL_SOCKET_IFNAME=lo ";
  Run run = runShell(mpirun + toolPath("all_reduce_perf") + " -b 8 -e 1M -f 8 -c 1 -n 5 2>&1");
  INFO(run.output);
  REQUIRE(run.exitCode == 0);
  CHECK(run.output.find("launcher mpi,") != std::string::npos);
  CHECK(run.output.find("2 ranks in 2 processes on 1 nodes") != std::string::npos);
  CHECK(run.output.find("transports shm,") != std::string::npos);
  std::vector<std::vector<std::string>> rows = tableRows(run.output);
  CHECK(rows.size() == 6);  // 8 B to 256 KiB by factors of 8
  for (const std::vector<std::string>& f : rows) {
    CHECK(f[8] == "0");
    CHECK(f[12] == "0");
  }
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  // One-sided puts between the two processes (cross-memory writes), as a ring and as a round trip.
  for (const char* mode : {"0", "1"}) {
    Run rma = runShell(mpirun + toolPath("rma_perf") + " -b 0 -e 1M -f 8 -c 1 -n 5 --rma_roundtrip " + mode + " 2>&1");
    INFO(rma.output);
    REQUIRE(rma.exitCode == 0);
    CHECK(rma.output.find("2 ranks in 2 processes on 1 nodes") != std::string::npos);
    std::vector<std::vector<std::string>> rmaRows = tableRows(rma.output);
    CHECK(rmaRows.size() == 8);  // 0 B, 1 B, then 8 B to 256 KiB by factors of 8
    for (const std::vector<std::string>& f : rmaRows) CHECK(f[8] == "0");
    CHECK(rma.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  }
}

TEST_CASE("perf-plot: two JSON reports make one valid PNG") {
  if (runShell("command -v python3 && command -v gnuplot").exitCode != 0) {
    WARN("skipped: perf-plot needs python3 and gnuplot (apt-get install gnuplot-nox)");
    return;
  }
  std::string base = "/tmp/tutti_perf_plot_" + std::to_string(getpid());
  for (const char* binary : {"all_reduce_perf", "all_gather_perf"}) {
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", binary,
                      "--local 2 -b 8 -e 64K -f 8 -n 2 -c 0 --json " + base + "-" + binary + ".json");
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
  }
  Run plot = runShell("python3 " TUTTI_PERF_PLOT " -o " + base + ".png " + base + "-all_reduce_perf.json " + base +
                      "-all_gather_perf.json 2>&1");
  INFO(plot.output);
  CHECK(plot.exitCode == 0);
  CHECK(plot.output.find("(2 series)") != std::string::npos);  // one line per report
  std::string png = readText(base + ".png");
  // A whole PNG: the signature, the header chunk first, the end chunk last, and more than an empty canvas's bytes.
  REQUIRE(png.size() > 10000);
  CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(png.compare(12, 4, "IHDR") == 0);
  CHECK(png.compare(png.size() - 8, 4, "IEND") == 0);
  // A report without results is refused, not drawn as an empty plot.
  std::ofstream(base + "-empty.json") << "{\"results\": []}";
  Run empty = runShell("python3 " TUTTI_PERF_PLOT " -o " + base + "-empty.png " + base + "-empty.json 2>&1");
  CHECK(empty.exitCode != 0);
  CHECK(empty.output.find("no out-of-place results") != std::string::npos);
  runShell("rm -f " + base + "*");
}

namespace {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) count++;
  return count;
}

// A loopback port that some other process (here, this test) listens on, as torchrun's store does; -1 if none.
class BusyPort {
 public:
  explicit BusyPort(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;  // the port may still hold an earlier run's closed connections
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(uint16_t(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(fd_, 4) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~BusyPort() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Two launched processes of all_reduce_perf, rank 1 in the background; the exit code is rank 0's, or rank 1's if that
// failed.
Run runPair(const std::string& environment, const std::string& arguments, const std::string& beforeRank0 = "") {
  std::string env = "env " + environment + " TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2";
  std::string tool = " timeout 60 " + toolPath("all_reduce_perf") + " " + arguments;
  return runShell(env + " RANK=1 LOCAL_RANK=1" + tool + " >/dev/null 2>&1 & " + beforeRank0 + env +
                  " RANK=0 LOCAL_RANK=0" + tool + " 2>&1; rc=$?; wait $! || rc=$?; exit $rc");
}

}  // namespace

TEST_CASE(
    "perf binaries: option errors that need the world size fail once, before any output, with the parser's code") {
  struct Case {
    const char* binary;
    const char* arguments;
    const char* error;
  };
  for (Case c : {Case{"all_reduce_perf", "--local 2 -o bogus", "option -o 'bogus'"},
                 Case{"all_reduce_perf", "--local 2 -d bogus", "option -d 'bogus'"},
                 Case{"broadcast_perf", "--local 2 -r 7", "option -r 7: only 2 ranks"},
                 Case{"hypercube_perf", "--local 3", "power-of-two number of ranks"}}) {
    INFO(c.binary << " " << c.arguments);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", c.binary, std::string(c.arguments) + " -b 8 -e 8");
    INFO(run.output);
    CHECK(run.exitCode == 2);
    CHECK(occurrences(run.output, c.error) == 1);
    CHECK(run.output.find("# nccl-tests version") == std::string::npos);
    CHECK(run.output.find("#       size") == std::string::npos);
  }
}

TEST_CASE("perf binaries: report paths and the --compare baseline are checked before the sweep") {
  std::string base = "/tmp/tutti_perf_early_" + std::to_string(getpid());
  std::string args = "--local 2 -b 8 -e 64 -f 8 -n 1 -c 0 ";
  Run made = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf", args + "--json " + base + ".json");
  INFO(made.output);
  REQUIRE(made.exitCode == 0);
  std::string report = readText(base + ".json");
  auto expectRefused = [&](const std::string& binary, const std::string& arguments, const std::string& error) {
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", binary, arguments);
    INFO(binary << " " << arguments);
    INFO(run.output);
    CHECK(run.exitCode == 2);
    CHECK(occurrences(run.output, error) == 1);
    CHECK(run.output.find("# nccl-tests version") == std::string::npos);
  };
  // The same baseline with itself passes; another collective or rank count is refused.
  CHECK(runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf", args + "--compare " + base + ".json")
            .exitCode == 0);
  expectRefused("all_gather_perf", args + "--compare " + base + ".json",
                "the baseline measured all_reduce, this run all_gather");
  expectRefused("all_reduce_perf", "--local 4 -b 8 -e 64 -f 8 -n 1 -c 0 --compare " + base + ".json",
                "the baseline ran on 2 ranks, this run has 4");
  // A malformed field names the file and the field.
  std::string bad = report;
  bad.replace(bad.find("\"root\": -1"), 10, "\"root\": \"x\"");
  std::ofstream(base + "-bad.json") << bad;
  expectRefused("all_reduce_perf", args + "--compare " + base + "-bad.json",
                "--compare " + base + "-bad.json: field results[0].root");
  expectRefused("all_reduce_perf", args + "--compare " + base + "-missing.json",
                "--compare " + base + "-missing.json: cannot read it");
  expectRefused("all_reduce_perf", args + "--json /nonexistent-dir/out.json",
                "--json /nonexistent-dir/out.json: cannot write it");
  expectRefused("all_reduce_perf", args + "--csv /nonexistent-dir/out.csv",
                "--csv /nonexistent-dir/out.csv: cannot write it");
  runShell("rm -f " + base + "*");
}

TEST_CASE("perf binaries: -T bounds init, and a rank that never came is named once, with the timeout's exit code") {
  // Rank 1 of 2 is never started: without -T the bootstrap would wait 120 s.
  std::string env =
      "env TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 NCCL_COMM_ID=127.0.0.1:" +
      std::to_string(testPort(1));
  auto start = std::chrono::steady_clock::now();
  Run run = runShell(env + " timeout 30 " + toolPath("all_reduce_perf") + " -b 8 -e 8 -T 2 2>&1");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(run.output);
  CHECK(run.exitCode == 3);
  CHECK(seconds < 15);
  CHECK(occurrences(run.output, "timed out in init") == 1);
  CHECK(run.output.find("rank 1 of 2 never arrived") != std::string::npos);
  CHECK(run.output.find("# nccl-tests version") == std::string::npos);
}

TEST_CASE("perf binaries: a peer that stops mid-run times out once, without follow-on errors") {
  // Rank 1 runs forever (-N 0) and is stopped (the tool under its timeout) once rank 0 has printed its first row, so
  // mid-sweep (or after 15 s, whatever rank 0 is doing then); rank 0 must report -T's timeout, name rank 1 as the
  // peer it waits for, and print nothing after it.
  std::string env =
      "env TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:" + std::to_string(testPort(2));
  std::string tool = " timeout 60 " + toolPath("all_reduce_perf") + " -b 8 -e 4K -f 8 -n 2 -c 1 -N 0 -T 2";
  Run run = runShell(env + " RANK=1" + tool + " >/dev/null 2>&1 & peer=$!; " + env + " RANK=0" + tool +
                     " >/tmp/tutti_perf_stall_$$ 2>&1 & self=$!; "
                     "for i in $(seq 150); do grep -qE '^ +8 +2 ' /tmp/tutti_perf_stall_$$ && break; sleep 0.1; done; "
                     "kill -STOP $(pgrep -P $peer); wait $self; rc=$?; "
                     "kill -KILL $(pgrep -P $peer); "
                     "cat /tmp/tutti_perf_stall_$$; rm -f /tmp/tutti_perf_stall_$$; exit $rc");
  INFO(run.output);
  CHECK(run.exitCode == 3);
  CHECK(occurrences(run.output, "# Test timeout (-T 2 s)") + occurrences(run.output, "timed out in init") == 1);
  CHECK(run.output.find("aborted") == std::string::npos);
  CHECK(run.output.find("not a live communicator") == std::string::npos);
  // Under the late rank's line, what its communicator waits for: data, room or input from rank 1, named with host and
  // pid.
  CHECK(std::regex_search(
      run.output, std::regex("#   rank 0 did not finish [^\\n]*\\n"
                             "#     waiting: [^\\n]* waiting [0-9.]+ s for "
                             "(data from|free FIFO space at|the input of) rank 1 \\([^\\n]* pid [0-9]+\\)\\n")));
}

TEST_CASE("perf binaries: under torchrun's agent the bootstrap root leaves MASTER_PORT to torchrun's store") {
  int port = testPort(3);
  BusyPort store(port);  // torchrun's TCPStore
  REQUIRE(store.ok());
  std::string env = "TORCHELASTIC_RUN_ID=test MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  Run run = runPair(env, "-b 8 -e 64 -f 8 -n 1 -c 1 -T 20");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
  // When MASTER_PORT+1 is taken too, rank 0 says which port, that it is in use, and how to choose another.
  BusyPort next(port + 1);
  REQUIRE(next.ok());
  Run taken = runPair(env, "-b 8 -e 64 -f 8 -n 1 -c 1 -T 8");
  INFO(taken.output);
  CHECK(taken.exitCode != 0);
  CHECK(taken.output.find("port " + std::to_string(port + 1) + " of the bootstrap root") != std::string::npos);
  CHECK(taken.output.find("is in use") != std::string::npos);
  CHECK(taken.output.find("NCCL_COMM_ID=host:port") != std::string::npos);
}

TEST_CASE("perf binaries: --id-file ignores a file left by an earlier run, and removes its own") {
  std::string path = "/tmp/tutti_perf_id_" + std::to_string(getpid());
  // An earlier run's id, an hour old: a rank that starts before process 0 rewrites it must not take it.
  std::ofstream(path) << std::string(128, '\x5a');
  runShell("touch -d '1 hour ago' " + path);
  Run run = runPair("-u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT",
                    "-b 8 -e 64 -f 8 -n 1 -c 1 -T 20 --id-file " + path, "sleep 1; ");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  CHECK(run.output.find("2 ranks in 2 processes") != std::string::npos);
  CHECK(access(path.c_str(), F_OK) != 0);  // a later run cannot read this run's id
  std::remove(path.c_str());
}

TEST_CASE("perf binaries: without -T the wait for --id-file's file is the bootstrap's (TUTTI_BOOTSTRAP_TIMEOUT)") {
  // Process 1 of 2 alone: process 0, which would write the file, never starts.
  std::string path = "/tmp/tutti_perf_id_absent_" + std::to_string(getpid());
  std::remove(path.c_str());
  auto start = std::chrono::steady_clock::now();
  Run run = runTool(
      "-u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2 RANK=1 "
      "LOCAL_RANK=0 TUTTI_BOOTSTRAP_TIMEOUT=2",
      "all_reduce_perf", "-b 8 -e 8 --id-file " + path);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(run.output);
  CHECK(run.exitCode != 0);
  CHECK(seconds < 20);
  CHECK(run.output.find("the unique id file " + path + " did not appear within 2 s") != std::string::npos);
}

namespace {

// A number of a JSON report's row by key, as written (e.g. "\"time\": 12.5"), from position at.
double jsonNumberAfter(const std::string& text, const std::string& key, size_t at) {
  size_t found = text.find("\"" + key + "\": ", at);
  REQUIRE(found != std::string::npos);
  return std::stod(text.substr(found + key.size() + 4));
}

}  // namespace

TEST_CASE(
    "perf binaries: NCCL_TESTS_SPLIT_MASK=1 runs 4 local ranks as two groups of 2, as nccl-tests shows and counts "
    "them") {
  std::string json = "/tmp/tutti_perf_split_" + std::to_string(getpid()) + ".json";
  for (const char* binary : {"all_reduce_perf", "all_gather_perf"}) {
    INFO(binary);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo NCCL_TESTS_SPLIT_MASK=1", binary,
                      "--local 4 -b 8K -e 64K -f 8 -c 1 -n 3 -w 1 --json " + json);
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    // nccl-tests' device lines: the world rank and its colour, process rank & mask (each --local rank a process).
    for (int r = 0; r < 4; r++)
      CHECK(std::regex_search(
          run.output, std::regex("\n#  Rank  " + std::to_string(r) + " Group  " + std::to_string(r & 1) + " Pid ")));
    CHECK(run.output.find("\n# Groups: NCCL_TESTS_SPLIT_MASK=1 splits the 4 ranks into 2 groups that run side by side: "
                          "group 0 ranks 0,2; "
                          "group 1 ranks 1,3\n") != std::string::npos);
    CHECK(run.output.find("\n# Groups: sizes and bandwidths are those of rank 0's group (2 ranks)") !=
          std::string::npos);
    std::vector<std::vector<std::string>> rows = tableRows(run.output);
    CHECK(rows.size() == 2);  // 8 KiB, 64 KiB
    for (const std::vector<std::string>& f : rows) {
      CHECK(f[8] == "0");
      CHECK(f[12] == "0");
      // all_gather's size is its count from each rank of the group: 2 ranks, not the world's 4.
      if (std::string(binary) == "all_gather_perf") CHECK(std::stoul(f[0]) == std::stoul(f[1]) * 4 * 2);
    }
    CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
    // Bandwidths from the printed time, with nccl-tests' factors for a group of 2 (all_reduce 2(n-1)/n = 1, all_gather
    // (n-1)/n = 1/2), not for the world of 4 (3/2 and 3/4).
    std::string report = readText(json);
    INFO(report);
    CHECK(report.find(
              "\"split\": {\"setting\": \"NCCL_TESTS_SPLIT_MASK=1\", \"groups\": [{\"group\": 0, \"ranks\": [0, 2]}, "
              "{\"group\": 1, \"ranks\": [1, 3]}]}") != std::string::npos);
    CHECK(report.find("{\"rank\": 3, \"group\": 1, ") != std::string::npos);
    double factor = std::string(binary) == "all_reduce_perf" ? 1.0 : 0.5;
    size_t measured = 0;
    for (size_t at = report.find("{\"size\": "); at != std::string::npos; at = report.find("{\"size\": ", at + 1)) {
      double size = jsonNumberAfter(report, "size", at), time = jsonNumberAfter(report, "time", at);
      double algBw = jsonNumberAfter(report, "alg_bw", at), busBw = jsonNumberAfter(report, "bus_bw", at);
      CHECK(algBw == Approx(size / time / 1e3).epsilon(1e-4));  // bytes per µs / 1e3 = GB/s
      CHECK(busBw == Approx(algBw * factor).epsilon(1e-4));
      measured++;
    }
    CHECK(measured == 2);
  }
  // A baseline made with groups is not compared with a run without them.
  Run unsplit = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_gather_perf",
                        "--local 4 -b 8K -e 64K -f 8 -n 1 --compare " + json);
  INFO(unsplit.output);
  CHECK(unsplit.exitCode == 2);
  CHECK(unsplit.output.find("the baseline ran with NCCL_TESTS_SPLIT_MASK=1, this run unsplit") != std::string::npos);
  std::remove(json.c_str());
}

TEST_CASE("perf binaries: under a launcher a process's ranks share its colour, as in nccl-tests' MPI processes") {
  int port = testPort(4);
  Run run = runPair("NCCL_TESTS_SPLIT_MASK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port),
                    "-t 2 -b 8 -e 4K -f 8 -n 2 -c 1 -T 30");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  for (int r = 0; r < 4; r++)
    CHECK(std::regex_search(
        run.output, std::regex("\n#  Rank  " + std::to_string(r) + " Group  " + std::to_string(r / 2) + " Pid ")));
  CHECK(run.output.find("group 0 ranks 0-1; group 1 ranks 2-3\n") != std::string::npos);
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
}

TEST_CASE(
    "perf binaries: a split variable that is no number, or groups an option cannot run in, is refused before the "
    "sweep") {
  struct Case {
    const char* environment;
    const char* binary;
    const char* arguments;
    const char* error;
  };
  for (Case c :
       {Case{"NCCL_TESTS_SPLIT_MASK=zz", "all_reduce_perf", "", "NCCL_TESTS_SPLIT_MASK='zz': not a hexadecimal number"},
        Case{"NCCL_TESTS_SPLIT='XOR 1'", "all_reduce_perf", "",
             "NCCL_TESTS_SPLIT='XOR 1': not an operation and a number"},
        Case{"NCCL_TESTS_SPLIT='MOD 0'", "all_reduce_perf", "", "NCCL_TESTS_SPLIT='MOD 0': MOD 0 divides by zero"},
        Case{"NCCL_TESTS_SPLIT='DIV 3'", "hypercube_perf", "",
             "group 0 (NCCL_TESTS_SPLIT='DIV 3'): hypercube needs a power-of-two"},
        Case{"NCCL_TESTS_SPLIT_MASK=1", "broadcast_perf", "-r 2",
             "option -r 2: only 2 ranks in group 0 (NCCL_TESTS_SPLIT_MASK=1)"},
        Case{"NCCL_TESTS_SPLIT='DIV 3'", "broadcast_perf", "-r -1",
             "option -r -1 (every root) needs groups of one size"}}) {
    INFO(c.environment << " " << c.binary << " " << c.arguments);
    Run run = runTool(std::string("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo ") + c.environment, c.binary,
                      std::string("--local 4 -b 8 -e 8 ") + c.arguments);
    INFO(run.output);
    CHECK(run.exitCode == 2);
    CHECK(occurrences(run.output, c.error) == 1);
    CHECK(run.output.find("# nccl-tests version") == std::string::npos);
  }
}

TEST_CASE("perf build commit: the script the build runs names HEAD, marks a changed tree, rewrites only on change") {
  if (runShell("command -v git").exitCode != 0) {
    WARN("skipped: git is not installed");
    return;
  }
  std::string tree = "/tmp/tutti_perf_commit_" + std::to_string(getpid());
  std::string output = tree + "-built_commit.cpp";
  auto runScript = [&](const std::string& source) {
    Run run = runShell(std::string(TUTTI_PERF_CMAKE) + " -DSOURCE_DIR=" + source + " -DOUTPUT=" + output +
                       " -DGIT_EXECUTABLE=$(command -v git) -P " TUTTI_PERF_COMMIT_SCRIPT " 2>&1");
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    return readText(output);
  };
  auto named = [](const std::string& commit) {
    return "const char* tutti::perf::builtCommit() { return \"" + commit + "\"; }\n";
  };
  std::string git = "git -C " + tree + " -c user.name=test -c user.email=test@example.com ";
  REQUIRE(runShell("mkdir -p " + tree + " && echo one > " + tree + "/file && " + git + "init -q && " + git +
                   "add file && " + git + "commit -q -m one 2>&1")
              .exitCode == 0);
  std::string head = runShell(git + "rev-parse --short HEAD").output;
  head.erase(head.find_last_not_of('\n') + 1);
  CHECK(runScript(tree).find(named(head)) != std::string::npos);
  // Unchanged: the file is left alone (an hour-old time stays), so nothing that includes it is rebuilt.
  REQUIRE(runShell("touch -d '1 hour ago' " + output).exitCode == 0);
  runScript(tree);
  CHECK(runShell("test -z \"$(find " + output + " -newermt '-10 minutes')\"").exitCode == 0);
  // A changed tracked file marks the tree dirty; an untracked one does not.
  runShell("echo stray > " + tree + "/untracked");
  CHECK(runScript(tree).find(named(head)) != std::string::npos);
  runShell("echo two > " + tree + "/file");
  CHECK(runScript(tree).find(named(head + "-dirty")) != std::string::npos);
  // A new commit is named at the next build, without reconfiguring.
  REQUIRE(runShell(git + "commit -q -am two 2>&1").exitCode == 0);
  std::string next = runShell(git + "rev-parse --short HEAD").output;
  next.erase(next.find_last_not_of('\n') + 1);
  CHECK(next != head);
  CHECK(runScript(tree).find(named(next)) != std::string::npos);
  // A tree that is no git checkout (a tarball) names none.
  runShell("rm -rf " + tree + "/.git");
  CHECK(runScript(tree).find(named("")) != std::string::npos);
  runShell("rm -rf " + tree + " " + output);
}
