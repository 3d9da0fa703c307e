// Tests of the perf sweep's library: flags, sizes, number cells, element conversions, counts, launchers, group splits,
// reports.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "perf/sweep/alltoallv_pattern.h"
#include "perf/sweep/baseline.h"
#include "perf/sweep/build_info.h"
#include "perf/sweep/collectives.h"
#include "perf/sweep/datatypes.h"
#include "perf/sweep/error.h"
#include "perf/sweep/group_split.h"
#include "perf/sweep/launcher.h"
#include "perf/sweep/mpi_session.h"
#include "perf/sweep/options.h"
#include "perf/sweep/preflight.h"
#include "perf/sweep/report.h"

using namespace tutti::perf;

namespace {

Options parse(std::vector<std::string> words) {
  words.insert(words.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parseOptions(int(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("perf options default to nccl-tests' defaults") {
  Options o = parse({});
  CHECK(o.threads == 1);
  CHECK(o.gpus == 1);
  CHECK(o.minBytes == 32u << 20);
  CHECK(o.maxBytes == 32u << 20);
  CHECK(o.stepBytes == 1u << 20);
  CHECK(o.stepFactor == 1);
  CHECK(o.iters == 20);
  CHECK(o.warmupIters == 1);
  CHECK(o.aggIters == 1);
  CHECK(o.runCycles == 1);
  CHECK(o.check == 1);
  CHECK(o.op == "sum");
  CHECK(o.datatype == "float");
  CHECK(o.root == 0);
  CHECK(o.average == 1);
  CHECK(o.timeoutSeconds == 0);
  CHECK(o.cudaGraph == 0);
  CHECK(flagNotes(o, "host").empty());
  CHECK(flagNotes(o, "cuda").empty());
}

TEST_CASE("perf options parse every nccl-tests flag, short, glued and long") {
  Options o = parse({"-t",        "2",         "-g1",
                     "-b",        "8",         "-e",
                     "128M",      "-f",        "2",
                     "-i",        "4K",        "-n",
                     "5",         "-m",        "3",
                     "-w",        "0",         "-N",
                     "2",         "-p",        "1",
                     "-c",        "0",         "-o",
                     "all",       "-d",        "half",
                     "-r",        "-1",        "-z",
                     "3",         "-y",        "1",
                     "-T",        "30",        "-C",
                     "1",         "-S",        "1",
                     "-J",        "out.json",  "-a",
                     "3",         "-u",        "1",
                     "-I",        "1",         "-K",
                     "1",         "-M",        "0",
                     "--local=4", "--csv",     "out.csv",
                     "--compare", "base.json", "--compare-threshold",
                     "0.25"});
  CHECK(o.threads == 2);
  CHECK(o.minBytes == 8);
  CHECK(o.maxBytes == 128u << 20);
  CHECK(o.stepFactor == 2);
  CHECK(o.stepBytes == 4096);
  CHECK(o.iters == 5);
  CHECK(o.aggIters == 3);
  CHECK(o.warmupIters == 0);
  CHECK(o.runCycles == 2);
  CHECK(o.check == 0);
  CHECK(o.op == "all");
  CHECK(o.datatype == "half");
  CHECK(o.root == -1);
  CHECK(o.blocking == 3);
  CHECK(o.streamNull == 1);
  CHECK(o.timeoutSeconds == 30);
  CHECK(o.reportCpuTime == 1);
  CHECK(o.reportTimestamps == 1);
  CHECK(o.jsonFile == "out.json");
  CHECK(o.average == 3);
  CHECK(o.unalign == 1);
  CHECK(o.perIterTiming == 1);
  CHECK(o.perIterSkip == 1);
  CHECK(o.localRanks == 4);
  CHECK(o.csvFile == "out.csv");
  CHECK(o.compareFile == "base.json");
  CHECK(o.compareThreshold == Approx(0.25));
  CHECK(parse({"--minbytes", "1K", "--maxbytes=2K", "--op", "max"}).maxBytes == 2048);
  CHECK(parse({"-h"}).help);
}

TEST_CASE("perf options reject bad input naming the flag") {
  CHECK_THROWS_WITH(parse({"-q", "1"}), Catch::Contains("-q"));
  CHECK(parse({"--tuttialltoallvdevice", "1"}).callAllToAllvDevice == 1);
  CHECK(parse({"--tuttialltoallvdynamic", "1"}).callAllToAllvDynamic == 1);
  CHECK_THROWS_WITH(parse({"--tuttialltoallvdevice", "2"}), Catch::Contains("--tuttialltoallvdevice"));
  CHECK_THROWS_WITH(parse({"--ncclalltoallv", "1", "--tuttialltoallvdynamic", "1"}),
                    Catch::Contains("exclude each other"));
  CHECK_THROWS_WITH(parse({"-b"}), Catch::Contains("needs a value"));
  CHECK_THROWS_WITH(parse({"-n", "x"}), Catch::Contains("-n"));
  CHECK_THROWS_WITH(parse({"-b", "2M", "-e", "1M"}), Catch::Contains("minbytes"));
  CHECK_THROWS_WITH(parse({"-b", "12Q"}), Catch::Contains("suffix"));
  CHECK_THROWS_WITH(parse({"-a", "7"}), Catch::Contains("-a"));
  CHECK_THROWS_AS(selectDataTypes("float128"), tutti::perf::Error);
  CHECK_THROWS_AS(selectRedOps("xor"), tutti::perf::Error);
}

TEST_CASE("perf options explain the GPU-only flags for the backend the run has") {
  Options o = parse({"-x", "1", "-D", "1", "-R", "1", "-M", "1", "-y", "1", "-G", "10", "-g", "2"});
  std::vector<std::string> host = flagNotes(o, "host");
  CHECK(host.size() == 4);  // -x -D -R -M; -y 1 is the host backend's null stream, -G and -g are no notes
  for (const std::string& n : host) CHECK(n.find("host mode") != std::string::npos);
  CHECK(flagNotes(o, "emulated") == host);
  std::vector<std::string> gpu = flagNotes(o, "cuda");
  REQUIRE(gpu.size() == 4);  // -x -D -M -y
  CHECK(gpu[3].find("-y 1: each rank runs on a non-blocking stream of its own, never the legacy default stream") == 0);
  for (const std::string& n : gpu) CHECK(n.find("host mode") == std::string::npos);
}

TEST_CASE("perf options explain -V, nccl-tests' CTA count of device-API kernels, in host mode") {
  std::vector<std::string> notes = flagNotes(parse({"-V", "8"}), "host");
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("-V 8") == 0);
  CHECK(notes[0].find("GPU") != std::string::npos);
  CHECK(flagNotes(parse({}), "host").empty());
}

TEST_CASE("perf options: -G and -g as nccl-tests' flags, -G refused where nothing may wait for a captured iteration") {
  Options o = parse({"-G", "4", "-g", "2", "-t", "3"});
  CHECK(o.cudaGraph == 4);
  CHECK(o.gpus == 2);
  CHECK(o.threads == 3);
  Options l = parse({"--cudagraph=2", "--ngpus", "4", "--nthreads=2"});
  CHECK(l.cudaGraph == 2);
  CHECK(l.gpus == 4);
  CHECK(l.threads == 2);
  CHECK(parse({"-G0", "-g1"}).cudaGraph == 0);
  CHECK_THROWS_WITH(parse({"-G", "-1"}), Catch::Contains("option -G '-1': must not be negative"));
  CHECK_THROWS_WITH(parse({"-g", "0"}), Catch::Contains("option -g '0': must be at least 1"));
  CHECK_THROWS_WITH(parse({"-G", "2", "-z", "1"}),
                    Catch::Contains("option -G '2': CUDA graphs cannot be combined with -z 1"));
  CHECK_THROWS_WITH(parse({"-G", "2", "-I", "1"}),
                    Catch::Contains("option -G '2': CUDA graphs cannot be combined with -I 1"));
  CHECK_THROWS_WITH(parse({"--local", "3", "-g", "2"}),
                    Catch::Contains("option --local '3': must be a multiple of -g 2"));
  CHECK(parse({"--local", "4", "-g", "2"}).localRanks == 4);
  // A launched process has -t x -g ranks, each thread driving -g of them.
  std::map<std::string, std::string> env;
  CHECK(detectWorld(parse({"-t", "3", "-g", "2"}), env).ranksPerProcess == 6);
}

TEST_CASE("perf -G needs the cuda device backend, as the run expects it before init") {
  Options o = parse({"-G", "3"});
  CHECK_NOTHROW(requireGraphBackend(o, "cuda", "cuda"));
  CHECK_NOTHROW(requireGraphBackend(parse({}), "host", "host"));
  CHECK_THROWS_WITH(requireGraphBackend(o, "host", "host"),
                    "option -G 3: -G needs the cuda device backend, and this run's is host (TUTTI_DEVICE=host)");
  CHECK_THROWS_WITH(requireGraphBackend(o, "host", nullptr),
                    Catch::Contains("(TUTTI_DEVICE unset and no CUDA device)"));
  CHECK_THROWS_WITH(requireGraphBackend(o, "emulated", "emulated"), Catch::Contains("this run's is emulated"));
}

TEST_CASE("perf fingerprints carry the build and every node's topology, in the header lines and the JSON") {
  BuildInfo build = thisBuild();
  CHECK(!build.buildType.empty());
  CHECK(build.compiler.find_first_of("0123456789") != std::string::npos);  // id and version
  CHECK(build.mpi == mpiBuilt());
  Report r;
  r.program = "all_reduce_perf", r.collective = "all_reduce";
  Fingerprint& f = r.fingerprint;
  f.tuttiVersion = "tutti 0.1.0";
  f.build = {"RelWithDebInfo", "GNU 13.2.0", true, "abc1234"};
  f.nodes.push_back({"alpha", 2, 2, 16, 0, {{"eth0", 25000}, {"lo", 0}}});
  f.nodes.push_back({"beta", 1, 1, 0, 4, {}});
  CHECK(buildLine(f) == "# Build: tutti 0.1.0, RelWithDebInfo, GNU 13.2.0, with MPI, commit abc1234\n");
  CHECK(topologyLines(f) ==
        "# Topology: node 0 alpha: 2 ranks, 2 NUMA nodes, 16 CPUs, 0 GPUs, 2 NICs (eth0 25000 Mb/s, lo speed unknown)\n"
        "# Topology: node 1 beta: 1 ranks, 1 NUMA nodes, ? CPUs, 4 GPUs, 0 NICs\n");
  std::string json = jsonReport(r);
  INFO(json);
  CHECK(json.find("\"build_type\": \"RelWithDebInfo\", \"compiler\": \"GNU 13.2.0\", \"mpi\": true, \"git_commit\": "
                  "\"abc1234\"") != std::string::npos);
  CHECK(json.find("{\"hostname\": \"alpha\", \"ranks\": 2, \"numa_nodes\": 2, \"cpus\": 16, \"gpus\": 0, \"nics\": "
                  "[{\"name\": \"eth0\", \"speed_mbps\": 25000}, {\"name\": \"lo\", \"speed_mbps\": null}]}") !=
        std::string::npos);
  CHECK(json.find("\"cpus\": null, \"gpus\": 4, \"nics\": []") != std::string::npos);
  // A tree that was no git checkout has no commit: the line leaves it out and the JSON says null.
  f.build.commit.clear();
  f.build.mpi = false;
  CHECK(buildLine(f) == "# Build: tutti 0.1.0, RelWithDebInfo, GNU 13.2.0, without MPI\n");
  CHECK(jsonReport(r).find("\"git_commit\": null") != std::string::npos);
  CHECK(readBaseline(jsonReport(r)).collective == "all_reduce");  // still a report the tool reads back
}

TEST_CASE("perf fingerprints name the GPUs on the cuda backend: device lines, # GPUs:, and the JSON's devices") {
  Report r;
  r.program = "all_reduce_perf", r.collective = "all_reduce";
  Fingerprint& f = r.fingerprint;
  f.backend = "host";
  f.ranks.push_back({0, 100, 0, "alpha", "0-7"});
  CHECK(gpuLine(f).empty());
  CHECK(deviceLine(f.ranks[0], f.backend) ==
        "#  Rank  0 Group  0 Pid    100 on      alpha device  0 [0000:00:00] host (CPUs 0-7)\n");
  std::string json = jsonReport(r);
  CHECK(json.find("\"cuda_driver\": null") != std::string::npos);
  CHECK(json.find("\"device\": 0, \"device_hex\": \"0000:00:00\", \"device_info\": \"host\", ") != std::string::npos);
  // Three ranks on two GPUs of one node (TUTTI_ALLOW_SHARED_GPU=1): each GPU counted once.
  f.backend = "cuda";
  f.cudaDriver = "13.0";
  f.ranks.clear();
  for (int rank = 0; rank < 3; rank++) {
    RankDescription& d = f.ranks.emplace_back();
    d.rank = rank, d.pid = 100, d.localIndex = rank, d.host = "alpha", d.affinity = "0-7";
    d.gpuOrdinal = rank % 2, d.gpu = "NVIDIA H200", d.pciBusId = rank % 2 ? "0000:9a:00.0" : "0000:18:00.0";
  }
  CHECK(deviceLine(f.ranks[1], f.backend) ==
        "#  Rank  1 Group  0 Pid    100 on      alpha device  1 [0000:9a:00] NVIDIA H200 (CPUs 0-7)\n");
  CHECK(deviceLine(f.ranks[2], f.backend).find(" device  0 [0000:18:00] NVIDIA H200 ") != std::string::npos);
  CHECK(gpuLine(f) == "# GPUs: CUDA driver 13.0; 2 x NVIDIA H200 on 1 node, shared by 3 ranks\n");
  json = jsonReport(r);
  INFO(json);
  CHECK(json.find("\"cuda_driver\": \"13.0\"") != std::string::npos);
  CHECK(json.find("{\"rank\": 1, \"group\": 0, \"pid\": 100, \"hostname\": \"alpha\", \"device\": 1, \"device_hex\": "
                  "\"0000:9a:00\", "
                  "\"device_info\": \"NVIDIA H200\", \"cpu_affinity\": \"0-7\"}") != std::string::npos);
  CHECK(readBaseline(json).collective == "all_reduce");
}

TEST_CASE("perf sizes use powers of 1024 like nccl-tests") {
  CHECK(parseSize("8", "-b") == 8);
  CHECK(parseSize("1K", "-b") == 1024);
  CHECK(parseSize("1.5M", "-b") == 1572864);
  CHECK(parseSize("2g", "-b") == (size_t(2) << 30));
}

TEST_CASE("perf number cells keep nccl-tests' widths") {
  CHECK(formatNumber(12.345, 7) == "  12.35");
  CHECK(formatNumber(1234.567, 7) == "1234.57");
  CHECK(formatNumber(12345.67, 7) == "12345.7");
  CHECK(formatNumber(1234567.8, 7) == "1234568");
  CHECK(formatNumber(12345678.9, 7) == "1.2e+07");
  CHECK(formatNumber(0.001, 6) == "  0.00");
  CHECK(formatNumber(123456.0, 6) == "123456");
  CHECK(formatNumber(1234567.0, 6) == " 1e+06");
}

TEST_CASE("perf table header, row and footer have nccl-tests' shape") {
  std::string header = tableHeader(false, false);
  CHECK(header.find("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
                    "algbw   busbw  #wrong \n") != std::string::npos);
  CHECK(header.find("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
                    "(GB/s)  (GB/s)         \n") != std::string::npos);
  CHECK(tableHeader(true, false).find("cputime") != std::string::npos);
  ResultRow row;
  row.bytes = 1048576, row.count = 262144, row.type = "float", row.redop = "sum", row.root = -1;
  row.outOfPlace = {123.456, 8.49, 12.74, 0, {}};
  row.inPlace = {120.0, 8.74, 13.11, -1, {}};
  CHECK(tableRow(row) ==
        "     1048576        262144     float     sum      -1   123.46    8.49   12.74       0   120.00    8.74   "
        "13.11    N/A\n");
  std::string footer = tableFooter(0, 12.5, "all_reduce_perf");
  CHECK(footer ==
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 12.5 \n#\n# Collective test concluded: "
        "all_reduce_perf\n");
  CHECK(tableFooter(3, 1, "x").find("# Out of bounds values : 3 FAILED\n") == 0);
}

TEST_CASE("perf -I and -K: bad values are warned about and disabled as nccl-tests does") {
  Options on = parse({"-I", "1", "-K", "2", "-n", "5"});
  CHECK(on.perIterTiming == 1);
  CHECK(on.perIterSkip == 2);
  CHECK(on.warnings.empty());
  Options badTiming = parse({"-I", "2"});
  CHECK(badTiming.perIterTiming == 0);
  REQUIRE(badTiming.warnings.size() == 1);
  CHECK(badTiming.warnings[0] == "per-iteration timing (-I) only supports 0=off or 1=on. Disabling.");
  Options skipTooLarge = parse({"-I", "1", "-K", "5", "-n", "5"});
  CHECK(skipTooLarge.perIterSkip == 0);
  REQUIRE(skipTooLarge.warnings.size() == 1);
  CHECK(skipTooLarge.warnings[0] == "per-iteration skip (-K) must be between 0 and 4. Disabling.");
  CHECK(parse({"-I", "1", "-K", "-1"}).warnings.size() == 1);
  Options skipWithoutTiming = parse({"-K", "1"});
  CHECK(skipWithoutTiming.perIterSkip == 0);
  REQUIRE(skipWithoutTiming.warnings.size() == 1);
  CHECK(skipWithoutTiming.warnings[0] == "per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.");
}

TEST_CASE("perf per-iteration statistics skip the first -K times and use nearest-rank percentiles") {
  // Skipping 1 leaves {4, 1, 3, 2}: mean 2.5, population variance 1.25, p50 = sorted[2] = 3, p95 and p99 the 4th of 4.
  IterationStats s = iterationStats({10, 4, 1, 3, 2}, 1);
  CHECK(s.skipped == 1);
  CHECK(s.timesUs == std::vector<double>{10, 4, 1, 3, 2});
  CHECK(s.minUs == 1);
  CHECK(s.maxUs == 4);
  CHECK(s.avgUs == Approx(2.5));
  CHECK(s.p50Us == 3);
  CHECK(s.p95Us == 4);
  CHECK(s.p99Us == 4);
  CHECK(s.stdevUs == Approx(std::sqrt(1.25)));
  CHECK(s.cvPercent == Approx(std::sqrt(1.25) / 2.5 * 100));
  // 200 samples 1..200: the 95th and 99th nearest-rank percentiles are the 190th and 198th values.
  std::vector<double> many;
  for (int i = 200; i >= 1; i--) many.push_back(i);
  IterationStats big = iterationStats(many, 0);
  CHECK(big.p95Us == 190);
  CHECK(big.p99Us == 198);
  CHECK(big.p50Us == 101);
  CHECK(iterationStats({5, 5, 5}, 0).cvPercent == 0);
}

TEST_CASE("perf table with -I has four per-iteration columns per placement and they reach the JSON report") {
  std::string header = tableHeader(false, false, true);
  CHECK(header.find("  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max   "
                    " i_p99    i_cv% \n") != std::string::npos);
  CHECK(header.find(
            "(us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)") !=
        std::string::npos);
  ResultRow row;
  row.bytes = 64, row.count = 16, row.type = "float", row.redop = "sum", row.root = -1;
  row.outOfPlace = {30, 1, 1, 0, {}};
  row.inPlace = {31, 1, 1, 0, {}};
  row.outOfPlace.perIteration = iterationStats({50, 20, 40}, 1);
  row.inPlace.perIteration = iterationStats({21, 22, 23}, 0);
  std::string text = tableRow(row);
  std::istringstream in(text);
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  REQUIRE(fields.size() == 5 + 2 * 8);
  CHECK(fields[9] == "20.00");   // out-of-place i_min, the skipped 50 left out
  CHECK(fields[10] == "40.00");  // i_max
  CHECK(fields[17] == "21.00");  // in-place i_min
  CHECK(fields[19] == "23.00");  // in-place i_p99
  Report r;
  r.rows.push_back(row);
  std::string json = jsonReport(r);
  CHECK(json.find("\"out_of_place_per_iter\": {\"skipped_iterations\": 1, \"min_us\": 20, \"max_us\": 40") !=
        std::string::npos);
  CHECK(json.find("\"times_us\": [50, 20, 40]") != std::string::npos);
  CHECK(json.find("\"in_place_per_iter\": {\"skipped_iterations\": 0") != std::string::npos);
  CHECK(json.find("per_process_max_times_us") == std::string::npos);                 // one process
  CHECK(readBaseline(json).times.at({"float", "sum", -1, 64}).first == Approx(30));  // still readable as a baseline
}

TEST_CASE("perf element conversions match the IEEE and OCP bit patterns") {
  unsigned char b[8];
  auto bits16 = [&] {
    uint16_t v;
    std::memcpy(&v, b, 2);
    return v;
  };
  writeElement(ncclFloat16, b, 0, 1.0);
  CHECK(bits16() == 0x3C00);
  writeElement(ncclFloat16, b, 0, -2.5);
  CHECK(bits16() == 0xC100);
  writeElement(ncclFloat16, b, 0, 70000.0);
  CHECK(bits16() == 0x7C00);  // overflows to inf
  writeElement(ncclFloat16, b, 0, 1.0 + 0x1p-11);
  CHECK(bits16() == 0x3C00);  // a tie rounds to even
  writeElement(ncclBfloat16, b, 0, 1.0);
  CHECK(bits16() == 0x3F80);
  writeElement(ncclFloat8e4m3, b, 0, 448.0);
  CHECK(b[0] == 0x7E);
  writeElement(ncclFloat8e4m3, b, 0, 1000.0);
  CHECK(b[0] == 0x7E);  // saturates
  writeElement(ncclFloat8e4m3, b, 0, 0x1p-9);
  CHECK(b[0] == 0x01);  // the smallest subnormal
  writeElement(ncclFloat8e5m2, b, 0, 57344.0);
  CHECK(b[0] == 0x7B);
  writeElement(ncclFloat8e5m2, b, 0, -1.0);
  CHECK(b[0] == 0xBC);
  for (const DataTypeInfo& t : allDataTypes())
    for (double v : {0.0, 1.0, 3.0, 16.0, 100.0}) {
      writeElement(t.type, b, 0, v);
      CHECK(readElement(t.type, b, 0) == Approx(v).epsilon(0.07));
    }
  writeElement(ncclInt8, b, 0, 130.0);
  CHECK(readElement(ncclInt8, b, 0) == -126.0);  // integers wrap
}

TEST_CASE("perf counts and bus bandwidth factors are nccl-tests'") {
  BufferCounts ag = findCollective("all_gather").counts(1000, 4, 4);
  CHECK(ag.param == 248);  // 250 rounded down to 16 bytes
  CHECK(ag.recv == 992);
  CHECK(ag.sendInPlaceOffset == 248);
  BufferCounts rs = findCollective("reduce_scatter").counts(1000, 4, 4);
  CHECK(rs.send == 992);
  CHECK(rs.recvInPlaceOffset == 248);
  CHECK(findCollective("alltoall").counts(1000, 4, 4).send == 992);
  CHECK(findCollective("all_reduce").counts(1000, 4, 4).param == 1000);
  struct Case {
    const char* name;
    double alg, bus;  // for 1e9 bytes of count*typesize in one second on 4 ranks
  };
  for (Case c : {Case{"all_reduce", 1, 1.5}, Case{"all_gather", 4, 3}, Case{"reduce_scatter", 4, 3},
                 Case{"broadcast", 1, 1}, Case{"reduce", 1, 1}, Case{"alltoall", 4, 3}, Case{"sendrecv", 1, 1},
                 Case{"gather", 4, 3}, Case{"scatter", 4, 3}, Case{"hypercube", 3, 3}}) {
    double alg = 0, bus = 0;
    findCollective(c.name).bandwidth(250000000, 4, 1.0, 4, &alg, &bus);
    INFO(c.name);
    CHECK(alg == Approx(c.alg));
    CHECK(bus == Approx(c.bus));
  }
  CHECK(findCollective("hypercube").unsupported(3).has_value());
  CHECK_FALSE(findCollective("hypercube").unsupported(4).has_value());
  CHECK_THROWS_AS(findCollective("allreduce"), tutti::perf::Error);
}

TEST_CASE("perf alltoallv: nccl-tests' distance-weighted pattern, its sizes and bandwidth, and the byte matrix") {
  AllToAllvPattern p;  // spread 1: the bytes grow with the distance (j - i) mod n, 16-byte blocks
  CHECK(p.peerBytes(0, 0, 4, 1200) == 0);
  CHECK(p.peerBytes(0, 1, 4, 1200) == 192);  // 1200 * 1 / 6 = 200
  CHECK(p.peerBytes(0, 2, 4, 1200) == 400);
  CHECK(p.peerBytes(0, 3, 4, 1200) == 592);  // 600
  CHECK(p.peerBytes(3, 0, 4, 1200) == 192);  // distance 1
  CHECK(p.peerBytes(0, 0, 1, 1200) == 1200);
  p.spread = 0;  // uniform, itself included
  CHECK(p.peerBytes(0, 0, 4, 1200) == 288);
  CHECK(p.peerBytes(2, 1, 4, 1200) == 288);
  p.spread = 0.5;
  CHECK(p.peerBytes(0, 1, 4, 1200) == 240);  // 150 + 100
  // The sweep's own pattern (no NCCL_TESTS_ALLTOALLV_* set here): 1000 floats on 4 ranks is 248 per peer, 3968
  // bytes in all, of which each rank sends and receives 656 + 1312 + 1984 bytes.
  REQUIRE(allToAllvPattern().generated());
  BufferCounts c = findCollective("alltoallv").counts(1000, 4, 4);
  CHECK(c.param == 248);
  CHECK(c.send == 988);
  CHECK(c.recv == 988);
  double alg = 0, bus = 0;
  findCollective("alltoallv").bandwidth(248, 4, 1.0, 4, &alg, &bus);
  CHECK(alg == Approx(3952e-9));
  CHECK(bus == Approx(3952e-9 * 0.75));
  using tutti::perf::AllToAllvCall;
  CHECK(std::string(findCollective("alltoallv", AllToAllvCall::NcclAllToAllv).algorithm) == "ncclAllToAllv");
  CHECK(std::string(findCollective("alltoallv", AllToAllvCall::TuttiDevice).algorithm) == "tuttiAllToAllvDevice");
  CHECK(std::string(findCollective("alltoallv", AllToAllvCall::TuttiDynamic).algorithm) == "tuttiAllToAllvDynamic");
  CHECK(findCollective("alltoallv", AllToAllvCall::NcclAllToAllv).run != findCollective("alltoallv").run);
  CHECK(findCollective("alltoallv", AllToAllvCall::TuttiDevice).run !=
        findCollective("alltoallv", AllToAllvCall::TuttiDynamic).run);
  CHECK_THROWS_AS(findCollective("all_reduce", AllToAllvCall::NcclAllToAllv), tutti::perf::Error);
  CHECK_THROWS_AS(findCollective("all_reduce", AllToAllvCall::TuttiDevice), tutti::perf::Error);

  AllToAllvPattern m;
  m.matrixFile = "m.txt";
  m.matrixScale = 2;
  REQUIRE(parseAllToAllvMatrix("0 50 9\n\n16 0 0\n1e3 2 3\n", m) == "");
  CHECK(m.dimension == 3);
  CHECK(m.bytes == std::vector<size_t>{0, 96, 16, 32, 0, 0, 2000, 0, 0});
  CHECK(m.peerBytes(2, 0, 3, 0) == 2000);
  CHECK(m.sentElements(2, 3, 0, 4) == 500);
  CHECK(m.receivedElements(0, 3, 0, 1) == 2032);
  for (auto [text, words] :
       std::vector<std::pair<std::string, std::string>>{{"1 2\n3 4\n5 6\n", "must be square"},
                                                        {"1 2\n3\n", "row 2 has 1 values"},
                                                        {"1 x\n3 4\n", "'x' at row 1, column 2 is not a number"},
                                                        {"1 2\n-3 4\n", "-3 at row 2, column 1 is negative"},
                                                        {"\n \n", "no values"}}) {
    AllToAllvPattern bad;
    bad.matrixFile = "m.txt";
    const std::string problem = parseAllToAllvMatrix(text, bad);
    INFO(text << " -> " << problem);
    CHECK(problem.find("m.txt") != std::string::npos);
    CHECK(problem.find(words) != std::string::npos);
  }
}

TEST_CASE("perf launchers: local, Slurm, torchrun and OpenMPI environments") {
  Options o = parse({});
  CHECK(detectWorld(o, {}).launcher == "single");
  World slurm = detectWorld(o, {{"SLURM_PROCID", "3"},
                                {"SLURM_NTASKS", "8"},
                                {"SLURM_LOCALID", "1"},
                                {"MASTER_ADDR", "h"},
                                {"MASTER_PORT", "1"}});
  CHECK(slurm.launcher == "slurm");
  CHECK(slurm.processRank == 3);
  CHECK(slurm.nranks() == 8);
  CHECK(slurm.localRank == 1);
  World torch = detectWorld(o, {{"RANK", "1"},
                                {"WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "1"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "29500"}});
  CHECK(torch.launcher == "torchrun");
  CHECK(torch.firstRank() == 1);
  // OpenMPI wins over the Slurm variables of the allocation it runs in.
  World mpi = detectWorld(o, {{"OMPI_COMM_WORLD_RANK", "0"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"SLURM_PROCID", "5"},
                              {"SLURM_NTASKS", "9"},
                              {"NCCL_COMM_ID", "127.0.0.1:5000"}});
  CHECK(mpi.launcher == (mpiBuilt() ? "mpi" : "openmpi"));
  CHECK(mpi.processCount == 2);
  // A world larger than one that this process cannot join is refused, not run as separate jobs; under mpirun a build
  // with MPI finds the others through MPI.
  CHECK_THROWS_WITH(detectWorld(o, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}), Catch::Contains("Refusing"));
  if (mpiBuilt())
    CHECK(detectWorld(o, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}).launcher == "mpi");
  else
    CHECK_THROWS_WITH(detectWorld(o, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
                      Catch::Contains("Refusing"));
  CHECK_THROWS_WITH(detectWorld(o, {{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
                    Catch::Contains("not below"));
  // --local ignores the launcher.
  World local = detectWorld(parse({"--local", "3"}), {{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  CHECK(local.launcher == "local");
  CHECK(local.nranks() == 3);
}

TEST_CASE("perf JSON reports read back as a baseline, and slower sizes are marked") {
  Report r;
  r.program = "all_reduce_perf", r.collective = "all_reduce";
  r.fingerprint.transports = "p2p (threads), shm";
  r.fingerprint.ranks.push_back({0, 1, 0, "host\"1", "0-1"});
  for (size_t bytes : {1024u, 2048u}) {
    ResultRow row;
    row.bytes = bytes, row.count = bytes / 4, row.type = "float", row.redop = "sum", row.root = -1,
    row.algorithm = "ring";
    row.outOfPlace = {100.0, 1, 1, 0, {}};
    row.inPlace = {200.0, 1, 1, 0, {}};
    r.rows.push_back(row);
  }
  auto baseline = readBaseline(jsonReport(r)).times;
  REQUIRE(baseline.size() == 2);
  CHECK(baseline.at({"float", "sum", -1, 1024}).first == Approx(100.0));
  CHECK(baseline.at({"float", "sum", -1, 2048}).second == Approx(200.0));
  std::vector<ResultRow> now = r.rows;
  now[0].outOfPlace.timeUs = 125;  // 25% slower
  now[1].inPlace.timeUs = 210;     // 5% slower: within the threshold
  int slower = 0;
  std::string lines = compareLines(now, baseline, 0.10, &slower);
  CHECK(slower == 1);
  CHECK(lines.find("SLOWER         1024 B") != std::string::npos);
  CHECK(lines.find("2048 B") == std::string::npos);
  INFO(csvReport(r));
  CHECK(csvReport(r).find("\"p2p (threads), shm\"") != std::string::npos);
  CHECK_THROWS_AS(readBaseline("{\"results\": [ }"), tutti::perf::Error);
}

TEST_CASE("perf baselines: the collective and rank count are read, and a malformed field is named with the file") {
  Report r;
  r.program = "all_reduce_perf", r.collective = "all_reduce";
  r.config["nranks"] = "4";
  ResultRow row;
  row.bytes = 1024, row.count = 256, row.type = "float", row.redop = "sum", row.root = 0;
  r.rows.push_back(row);
  std::string json = jsonReport(r);
  Baseline baseline = readBaseline(json, "--compare base.json");
  CHECK(baseline.collective == "all_reduce");
  CHECK(baseline.nranks == 4);
  CHECK(baseline.times.count({"float", "sum", 0, 1024}) == 1);
  // nccl-tests writes the root as a string: a number in a string is read, anything else is named.
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = json;
    return text.replace(text.find(from), from.size(), to);
  };
  std::string quoted = replaced("\"root\": 0", "\"root\": \"3\"");
  CHECK(readBaseline(quoted).times.count({"float", "sum", 3, 1024}) == 1);
  std::string bad = replaced("\"root\": 0", "\"root\": \"x\"");
  CHECK_THROWS_WITH(readBaseline(bad, "--compare base.json"), Catch::Contains("--compare base.json") &&
                                                                  Catch::Contains("results[0].root") &&
                                                                  Catch::Contains("\"x\", not a number"));
  std::string badSize = replaced("\"size\": 1024", "\"size\": -5");
  CHECK_THROWS_WITH(readBaseline(badSize, "b.json"), Catch::Contains("b.json") && Catch::Contains("results[0].size"));
  CHECK_THROWS_WITH(readBaseline("{\"results\": [ }", "b.json"), Catch::StartsWith("b.json: "));
  CHECK_THROWS_WITH(readBaseline("{\"results\": [{\"type\": \"\\uzzzz\"}]}", "b.json"), Catch::Contains("escape"));
}

TEST_CASE("perf options: an unknown -o or -d is refused by the parser") {
  CHECK_THROWS_WITH(parse({"-o", "bogus"}), Catch::Contains("option -o 'bogus'"));
  CHECK_THROWS_WITH(parse({"-d", "bogus"}), Catch::Contains("option -d 'bogus'"));
  CHECK(parse({"-o", "all", "-d", "all"}).op == "all");
}

TEST_CASE("perf launchers: the innermost launcher decides, and half a launch is refused") {
  Options o = parse({});
  // srun -n1 torchrun --nproc-per-node 2: Slurm's one task runs torchrun, whose two workers are the world.
  World torch = detectWorld(o, {{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "1"},
                                {"SLURM_LOCALID", "0"},
                                {"RANK", "1"},
                                {"WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "1"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "29500"}});
  CHECK(torch.launcher == "torchrun");
  CHECK(torch.processRank == 1);
  CHECK(torch.processCount == 2);
  CHECK(torch.localRank == 1);
  // torchrun under mpirun too: its variables describe the workers.
  CHECK(detectWorld(o, {{"OMPI_COMM_WORLD_RANK", "0"},
                        {"OMPI_COMM_WORLD_SIZE", "1"},
                        {"RANK", "0"},
                        {"WORLD_SIZE", "4"},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", "29500"}})
            .processCount == 4);
  // Half of torchrun's pair names the variables.
  CHECK_THROWS_WITH(detectWorld(o, {{"WORLD_SIZE", "4"}}),
                    Catch::Contains("WORLD_SIZE=4") && Catch::Contains("RANK is not"));
  CHECK_THROWS_WITH(detectWorld(o, {{"RANK", "1"}}), Catch::Contains("RANK=1") && Catch::Contains("WORLD_SIZE is not"));
  CHECK(detectWorld(o, {{"WORLD_SIZE", "1"}}).launcher == "single");
  // MPICH and Intel MPI (Hydra): through MPI in a build with it, else refused unless another way is given.
  std::map<std::string, std::string> hydra = {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}};
  if (mpiBuilt()) {
    CHECK(detectWorld(o, hydra).launcher == "mpi");
  } else {
    CHECK_THROWS_WITH(detectWorld(o, hydra), Catch::Contains("this build has no MPI") && Catch::Contains("Refusing"));
    hydra["NCCL_COMM_ID"] = "127.0.0.1:5000";
    World pmi = detectWorld(o, hydra);
    CHECK(pmi.launcher == "pmi");
    CHECK(pmi.processRank == 1);
    CHECK(pmi.localRank == 1);
  }
  CHECK(detectWorld(o, {{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}).launcher == (mpiBuilt() ? "mpi" : "pmi"));
}

TEST_CASE("perf launchers: MPI's world must be the size the launcher declared") {
  World world;
  world.launcher = "mpi";
  World joined = joinMpiWorld(world, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 1, 2);
  CHECK(joined.processRank == 1);
  CHECK(joined.processCount == 2);
  // A singleton MPI_Init under another MPI's launcher (or outside mpirun) sees one process.
  CHECK_THROWS_WITH(joinMpiWorld(world, {{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}}, 0, 1),
                    Catch::Contains("PMI_SIZE=4") && Catch::Contains("MPI_Comm_size is 1"));
  CHECK_THROWS_WITH(joinMpiWorld(world, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 0, 1),
                    Catch::Contains("OMPI_COMM_WORLD_SIZE=2") && Catch::Contains("MPI_Comm_size is 1"));
  CHECK(joinMpiWorld(world, {}, 0, 3).processCount == 3);
}

TEST_CASE("perf launchers: the bootstrap root avoids torchrun's store port, and NCCL_COMM_ID wins") {
  std::map<std::string, std::string> env = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  CHECK(bootstrapAddress({}) == "");
  CHECK(bootstrapAddress(env) == "127.0.0.1:29500");
  env["TORCHELASTIC_RUN_ID"] = "none";
  CHECK(bootstrapAddress(env) == "127.0.0.1:29501");
  env["NCCL_COMM_ID"] = "127.0.0.1:4000";
  CHECK(bootstrapAddress(env) == "127.0.0.1:4000");
  CHECK_THROWS_WITH(bootstrapAddress({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}, {"TORCHELASTIC_RUN_ID", "x"}}),
                    Catch::Contains("NCCL_COMM_ID"));
}

TEST_CASE("perf group splits read nccl-tests' NCCL_TESTS_SPLIT_MASK and NCCL_TESTS_SPLIT") {
  auto split = [](const std::map<std::string, std::string>& env) { return groupSplitFromEnvironment(env); };
  CHECK(!split({}));
  CHECK(!split({{"NCCL_TESTS_SPLIT_MASK", ""}, {"NCCL_TESTS_SPLIT", " "}}));  // set but empty: as unset
  // The mask is hexadecimal with or without 0x, as nccl-tests' strtoul(..., 16) reads it: "10" is 16.
  auto colours = [](const GroupSplit& s, int processes) {
    std::vector<int> out;
    for (int p = 0; p < processes; p++) out.push_back(s.colour(p));
    return out;
  };
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT_MASK", "1"}}), 4) == std::vector<int>{0, 1, 0, 1});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT_MASK", "0x2"}}), 4) == std::vector<int>{0, 0, 2, 2});
  CHECK(split({{"NCCL_TESTS_SPLIT_MASK", "10"}})->operand == 16);
  CHECK(split({{"NCCL_TESTS_SPLIT_MASK", "0X1f"}})->operand == 31);
  // Each operation and its symbol, case-insensitive, with the value in decimal, 0x, 0b or (leading 0) octal.
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "AND 0x1"}}), 4) == std::vector<int>{0, 1, 0, 1});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "&0b10"}}), 4) == std::vector<int>{0, 0, 2, 2});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "or 0x7"}}), 10) == std::vector<int>{7, 7, 7, 7, 7, 7, 7, 7, 15, 15});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "|1"}}), 3) == std::vector<int>{1, 1, 3});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "MOD 3"}}), 5) == std::vector<int>{0, 1, 2, 0, 1});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "% 010"}}), 10) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "Div 2"}}), 5) == std::vector<int>{0, 0, 1, 1, 2});
  CHECK(colours(*split({{"NCCL_TESTS_SPLIT", "/8"}}), 2) == std::vector<int>{0, 0});
  // The mask wins when both are set, as in nccl-tests, and the report says the other was ignored.
  GroupSplit both = *split({{"NCCL_TESTS_SPLIT_MASK", "1"}, {"NCCL_TESTS_SPLIT", "DIV 2"}});
  CHECK(both.describe() == "NCCL_TESTS_SPLIT_MASK=1");
  CHECK(both.ignored == "NCCL_TESTS_SPLIT=DIV 2");
  CHECK(split({{"NCCL_TESTS_SPLIT", "AND 1"}})->describe() == "NCCL_TESTS_SPLIT='AND 1'");
  // What nccl-tests would silently read as 0 (one group) or divide by is refused, naming the variable and value.
  for (auto [name, value, why] :
       {std::tuple{"NCCL_TESTS_SPLIT_MASK", "zz", "not a hexadecimal number"},
        std::tuple{"NCCL_TESTS_SPLIT_MASK", "1z", "not a hexadecimal number"},
        std::tuple{"NCCL_TESTS_SPLIT_MASK", "-1", "not a hexadecimal number"},
        std::tuple{"NCCL_TESTS_SPLIT_MASK", "0x10000000000000000", "not a hexadecimal number"},
        std::tuple{"NCCL_TESTS_SPLIT", "XOR 1", "AND, OR, MOD or DIV"},
        std::tuple{"NCCL_TESTS_SPLIT", "7", "AND, OR, MOD or DIV"},
        std::tuple{"NCCL_TESTS_SPLIT", "AND", "the value after AND is not a number"},
        std::tuple{"NCCL_TESTS_SPLIT", "AND 0b12", "the value after AND is not a number"},
        std::tuple{"NCCL_TESTS_SPLIT", "AND 08", "a leading 0 is octal"},
        std::tuple{"NCCL_TESTS_SPLIT", "MOD 0", "divides by zero"},
        std::tuple{"NCCL_TESTS_SPLIT", "/0x0", "divides by zero"}}) {
    INFO(name << "=" << value);
    CHECK_THROWS_WITH(split({{name, value}}),
                      Catch::StartsWith(std::string(name) + "='" + value + "': ") && Catch::Contains(why));
  }
  // A colour must fit ncclCommSplit's int.
  CHECK_THROWS_WITH(split({{"NCCL_TESTS_SPLIT", "OR 0xffffffff"}})->colour(0),
                    Catch::Contains("NCCL_TESTS_SPLIT='OR 0xffffffff': gives process 0 the colour 4294967295"));
}

TEST_CASE("perf group splits colour a launched process's ranks alike, and each --local rank as a process") {
  GroupSplit mask = *groupSplitFromEnvironment({{"NCCL_TESTS_SPLIT_MASK", "1"}});
  World launched;
  launched.launcher = "torchrun", launched.processCount = 2,
  launched.ranksPerProcess = 2;  // -t 2 in each of 2 processes
  CHECK(groupColours(mask, launched) == std::vector<int>{0, 0, 1, 1});
  World local;
  local.launcher = "local", local.ranksPerProcess = 4;
  CHECK(groupColours(mask, local) == std::vector<int>{0, 1, 0, 1});
}

TEST_CASE(
    "perf reports show a split: Group column, # Groups lines, the JSON's split and groups, and a baseline's split") {
  Report r;
  r.program = "all_reduce_perf", r.collective = "all_reduce";
  Fingerprint& f = r.fingerprint;
  CHECK(groupLines(f).empty());
  CHECK(jsonReport(r).find("\"split\": null") != std::string::npos);
  CHECK(readBaseline(jsonReport(r)).split.empty());
  for (int rank = 0; rank < 6; rank++) f.ranks.push_back({rank, 100, rank, "h", "0-1", rank % 2 ? 7 : 0});
  f.split = "NCCL_TESTS_SPLIT='MOD 2'";
  f.groups = {{0, {0, 2, 4}}, {7, {1, 3, 5}}};
  CHECK(deviceLine(f.ranks[1], "host") ==
        "#  Rank  1 Group  7 Pid    100 on          h device  1 [0000:00:00] host (CPUs 0-1)\n");
  CHECK(groupLines(f) ==
        "# Groups: NCCL_TESTS_SPLIT='MOD 2' splits the 6 ranks into 2 groups that run side by side: group 0 ranks "
        "0,2,4; group 7 ranks 1,3,5\n"
        "# Groups: sizes and bandwidths are those of rank 0's group (3 ranks); times (-a) and #wrong are over all 6 "
        "ranks\n");
  f.groups = {{0, {0, 1, 2, 3}}, {1, {4, 5}}};
  CHECK(groupLines(f).find("group 0 ranks 0-3; group 1 ranks 4-5\n") != std::string::npos);
  std::string json = jsonReport(r);
  INFO(json);
  CHECK(json.find("\"split\": {\"setting\": \"NCCL_TESTS_SPLIT='MOD 2'\", \"groups\": [{\"group\": 0, \"ranks\": [0, "
                  "1, 2, 3]}, "
                  "{\"group\": 1, \"ranks\": [4, 5]}]}") != std::string::npos);
  CHECK(json.find("{\"rank\": 1, \"group\": 7, \"pid\": 100,") != std::string::npos);
  CHECK(readBaseline(json).split == "NCCL_TESTS_SPLIT='MOD 2'");
  // The CSV says which split, and the group size its bandwidths were computed for.
  ResultRow row;
  row.bytes = 8, row.count = 2, row.type = "float", row.redop = "sum";
  r.rows.push_back(row);
  std::string csv = csvReport(r);
  INFO(csv);
  CHECK(csv.find(",launcher,split,group_ranks\n") != std::string::npos);
  CHECK(csv.find(",NCCL_TESTS_SPLIT='MOD 2',4\n") != std::string::npos);
}

// rma_perf: a ring of puts, or with --rma_roundtrip 1 a round trip; both one-sided (runWindowed), neither in place.
TEST_CASE("perf rma: --rma_roundtrip picks the round trip, for rma_perf only") {
  CHECK(parse({"--rma_roundtrip", "1"}).rmaRoundTrip == 1);
  CHECK_THROWS_WITH(parse({"--rma_roundtrip", "2"}), Catch::Contains("--rma_roundtrip"));
  CHECK(findCollective("rma").runWindowed != nullptr);
  CHECK(findCollective("rma", tutti::perf::AllToAllvCall::Group, true).runWindowed != nullptr);
  CHECK(findCollective("rma", tutti::perf::AllToAllvCall::Group, true).runWindowed !=
        findCollective("rma").runWindowed);
  CHECK(findCollective("rma").run == nullptr);
  CHECK(findCollective("rma").noInPlace != nullptr);
  CHECK(findCollective("sendrecv").runWindowed == nullptr);
  CHECK_THROWS_AS(findCollective("sendrecv", tutti::perf::AllToAllvCall::Group, true), tutti::perf::Error);
}
