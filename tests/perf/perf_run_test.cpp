// Runs each *_perf binary as a 2-rank local sweep with checking and reads its output against nccl-tests' format.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

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

}  // namespace

TEST_CASE("perf binaries: a 2-rank local sweep with -c 1 has nccl-tests' output and no wrong values") {
  const char* binaries[] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "broadcast_perf", "reduce_perf",
                            "alltoall_perf",   "sendrecv_perf",   "gather_perf",         "scatter_perf",   "hypercube_perf"};
  for (const char* binary : binaries) {
    INFO(binary);
    Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", binary, "--local 2 -b 8 -e 64K -f 8 -c 1 -n 2 -w 1");
    INFO(run.output);
    REQUIRE(run.exitCode == 0);
    std::vector<std::string> out = lines(run.output);
    REQUIRE(out.size() > 12);
    CHECK(std::regex_match(out[0], std::regex(R"(# nccl-tests version \S+ .*nccl-headers=\d+ nccl-library=\d+)")));
    CHECK(out[1] == std::string("# Collective test starting: ") + binary);
    CHECK(std::regex_match(out[2], std::regex(R"(# nThread 2 nGpus 1 minBytes 8 maxBytes 65536 step: 8\(factor\) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0)")));
    size_t devices = 0;
    while (devices < out.size() && out[devices] != "# Using devices") devices++;
    REQUIRE(devices + 2 < out.size());
    for (int r = 0; r < 2; r++)
      CHECK(std::regex_match(out[devices + 1 + size_t(r)],
                             std::regex("#  Rank  " + std::to_string(r) + R"( Group  0 Pid +\d+ on +\S+ device +\d+ \[[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\] .*)")));
    size_t header = devices + 3;
    REQUIRE(header + 3 < out.size());
    CHECK(out[header] == "#");
    CHECK(rtrim(out[header + 2]) == "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong");
    CHECK(rtrim(out[header + 3]) == "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)");
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
      CHECK((w2 == "0" || (w2 == "N/A" && std::string(binary) == "alltoall_perf")));
    }
    REQUIRE(i + 3 < out.size());
    CHECK(out[i] == "# Out of bounds values : 0 OK");
    CHECK(std::regex_match(out[i + 1], std::regex(R"(# Avg bus bandwidth    : [0-9.e+-]+ ?)")));
    CHECK(out[i + 2] == "#");
    CHECK(out[i + 3] == std::string("# Collective test concluded: ") + binary);
  }
}

TEST_CASE("perf binaries: an injected corruption is reported with rank, collective, size and offset, and fails the run") {
  Run run = runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo TUTTI_PERF_CORRUPT=1:5", "all_reduce_perf", "--local 2 -b 64 -e 64 -c 1 -n 1 -w 0");
  INFO(run.output);
  CHECK(run.exitCode != 0);
  CHECK(run.output.find("rank 1: all_reduce 64 B float sum root -1 out-of-place: 1 wrong elements, first at element 5") != std::string::npos);
  CHECK(run.output.find("# Out of bounds values : 2 FAILED") != std::string::npos);
  CHECK(std::regex_search(run.output, std::regex(R"(\n +64 +16 +float +sum +-1 +\S+ +\S+ +\S+ +1 +\S+ +\S+ +\S+ +1\n)")));
  // The same run without the corruption passes: the failure above came from the hook alone.
  CHECK(runTool("TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo", "all_reduce_perf", "--local 2 -b 64 -e 64 -c 1 -n 1 -w 0").exitCode == 0);
}

TEST_CASE("perf binaries: a launcher world the tool cannot join is refused") {
  Run run = runTool("-u NCCL_COMM_ID -u MASTER_ADDR -u MASTER_PORT -u TUTTI_PERF_ID_FILE TUTTI_DEVICE=host OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2",
                    "all_reduce_perf", "-b 8 -e 8");
  INFO(run.output);
  CHECK(run.exitCode != 0);
  CHECK(run.output.find("Refusing to run 2 separate one-process jobs") != std::string::npos);
}

TEST_CASE("perf binaries: two processes launched torchrun-style form one world") {
  int port = 20000 + int(getpid() % 20000);
  std::string env = "env TUTTI_DEVICE=host NCCL_SOCKET_IFNAME=lo WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  std::string tool = " timeout 60 " + toolPath("all_reduce_perf") + " -b 8 -e 4K -f 8 -n 2 -c 1";
  // Rank 1 in the background, rank 0 in the foreground; the exit code is rank 0's, or rank 1's if that failed.
  Run run = runShell(env + " RANK=1 LOCAL_RANK=1" + tool + " >/dev/null 2>&1 & " + env + " RANK=0 LOCAL_RANK=0" + tool +
                     " 2>&1; rc=$?; wait $! || rc=$?; exit $rc");
  INFO(run.output);
  CHECK(run.exitCode == 0);
  CHECK(run.output.find("launcher torchrun") != std::string::npos);
  CHECK(run.output.find("2 ranks in 2 processes on 1 hosts") != std::string::npos);
  CHECK(run.output.find("# Out of bounds values : 0 OK") != std::string::npos);
}
