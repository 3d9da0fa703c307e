// Parses the perf sweep's command line: nccl-tests' flags and tutti's long options.
#include "perf/sweep/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "perf/sweep/datatypes.h"
#include "perf/sweep/error.h"

namespace tutti::perf {
namespace {

[[noreturn]] void badValue(const std::string& flag, const std::string& value, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, "option " + flag + " '" + value + "': " + why);
}

long parseInteger(const std::string& text, const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 0);  // base 0 like nccl-tests: 0x.. and 0.. work
  if (text.empty() || *end != '\0' || errno == ERANGE) badValue(flag, text, "not an integer");
  return value;
}

double parseReal(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value)) badValue(flag, text, "not a number");
  return value;
}

// One flag: short letter, long name, and what to do with its value (all of nccl-tests' take one).
struct Flag {
  char letter;
  const char* name;
  std::function<void(Options&, const std::string&, const std::string&)> apply;
};

auto intoInt(int Options::*field) {
  return [field](Options& o, const std::string& v, const std::string& f) { o.*field = int(parseInteger(v, f)); };
}
auto intoSize(size_t Options::*field) {
  return [field](Options& o, const std::string& v, const std::string& f) { o.*field = parseSize(v, f.c_str()); };
}
auto intoString(std::string Options::*field) {
  return [field](Options& o, const std::string& v, const std::string&) { o.*field = v; };
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {'t', "nthreads", intoInt(&Options::threads)},
      {'g', "ngpus", intoInt(&Options::gpus)},
      {'b', "minbytes", intoSize(&Options::minBytes)},
      {'e', "maxbytes", intoSize(&Options::maxBytes)},
      {'i', "stepbytes", intoSize(&Options::stepBytes)},
      {'f', "stepfactor",
       [](Options& o, const std::string& v, const std::string& f) {
         long factor = parseInteger(v, f);
         if (factor < 0) badValue(f, v, "must not be negative");
         o.stepFactor = size_t(factor);
       }},
      {'n', "iters", intoInt(&Options::iters)},
      {'m', "agg_iters", intoInt(&Options::aggIters)},
      {'w', "warmup_iters", intoInt(&Options::warmupIters)},
      {'N', "run_cycles", intoInt(&Options::runCycles)},
      {'p', "parallel_init", intoInt(&Options::parallelInit)},
      {'c', "check", intoInt(&Options::check)},
      {'o', "op", intoString(&Options::op)},
      {'d', "datatype", intoString(&Options::datatype)},
      {'r', "root", intoInt(&Options::root)},
      {'z', "blocking", intoInt(&Options::blocking)},
      {'y', "stream_null", intoInt(&Options::streamNull)},
      {'T', "timeout", intoInt(&Options::timeoutSeconds)},
      {'G', "cudagraph", intoInt(&Options::cudaGraph)},
      {'C', "report_cputime", intoInt(&Options::reportCpuTime)},
      {'S', "report_timestamps", intoInt(&Options::reportTimestamps)},
      {'J', "output_file", intoString(&Options::jsonFile)},
      {'a', "average", intoInt(&Options::average)},
      {'R', "local_register", intoInt(&Options::localRegister)},
      {'x', "cta_policy", intoInt(&Options::ctaPolicy)},
      {'D', "device_implementation", intoInt(&Options::deviceImplementation)},
      {'V', "device_cta_count", intoInt(&Options::deviceCtaCount)},
      {'M', "memory", intoInt(&Options::memoryReport)},
      {'u', "unalign", intoInt(&Options::unalign)},
      {'I', "per_iter_timing", intoInt(&Options::perIterTiming)},
      {'K', "per_iter_skip", intoInt(&Options::perIterSkip)},
      // tutti's own (long only).
      {0, "json", intoString(&Options::jsonFile)},
      {0, "csv", intoString(&Options::csvFile)},
      {0, "compare", intoString(&Options::compareFile)},
      {0, "compare-threshold",
       [](Options& o, const std::string& v, const std::string& f) {
         o.compareThreshold = parseReal(v, f);
         if (o.compareThreshold < 0) badValue(f, v, "must not be negative");
       }},
      {0, "local", intoInt(&Options::localRanks)},
      {0, "id-file", intoString(&Options::idFile)},
      {0, "ncclalltoallv", intoInt(&Options::callAllToAllv)},
      {0, "rma_roundtrip", intoInt(&Options::rmaRoundTrip)},
      {0, "tuttialltoallvdevice", intoInt(&Options::callAllToAllvDevice)},
      {0, "tuttialltoallvdynamic", intoInt(&Options::callAllToAllvDynamic)},
  };
  return table;
}

// Checks the values together.
void validate(Options& o) {
  auto require = [](bool ok, const std::string& flag, long value, const char* why) {
    if (!ok) badValue(flag, std::to_string(value), why);
  };
  require(o.threads >= 1, "-t", o.threads, "must be at least 1");
  require(o.gpus >= 1, "-g", o.gpus, "must be at least 1");
  require(o.iters >= 1, "-n", o.iters, "must be at least 1");
  require(o.aggIters >= 1, "-m", o.aggIters, "must be at least 1");
  require(o.warmupIters >= 0, "-w", o.warmupIters, "must not be negative");
  require(o.runCycles >= 0, "-N", o.runCycles, "must not be negative");
  require(o.check >= 0, "-c", o.check, "must not be negative");
  require(o.root >= -1, "-r", o.root, "must be a rank or -1 (every root)");
  require(o.blocking >= 0 && o.blocking <= 3, "-z", o.blocking, "must be 0, 1, 2 or 3");
  require(o.timeoutSeconds >= 0, "-T", o.timeoutSeconds, "must not be negative");
  require(o.average >= 0 && o.average <= 3, "-a", o.average, "must be 0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
  require(o.unalign >= 0, "-u", o.unalign, "must not be negative");
  require(o.localRanks >= 0, "--local", o.localRanks, "must not be negative");
  require(o.callAllToAllv == 0 || o.callAllToAllv == 1, "--ncclalltoallv", o.callAllToAllv, "must be 0 or 1");
  require(o.rmaRoundTrip == 0 || o.rmaRoundTrip == 1, "--rma_roundtrip", o.rmaRoundTrip, "must be 0 or 1");
  require(o.callAllToAllvDevice == 0 || o.callAllToAllvDevice == 1, "--tuttialltoallvdevice", o.callAllToAllvDevice,
          "must be 0 or 1");
  require(o.callAllToAllvDynamic == 0 || o.callAllToAllvDynamic == 1, "--tuttialltoallvdynamic", o.callAllToAllvDynamic,
          "must be 0 or 1");
  if (o.callAllToAllv + o.callAllToAllvDevice + o.callAllToAllvDynamic > 1)
    throw Error(ErrorCode::InvalidArgument,
                "--ncclalltoallv, --tuttialltoallvdevice and --tuttialltoallvdynamic exclude each other: give one");
  selectDataTypes(o.datatype);  // an unknown -d or -o is refused here, before any rank starts
  selectRedOps(o.op);
  if (o.minBytes > o.maxBytes)
    throw Error(ErrorCode::InvalidArgument, "invalid sizes for 'minbytes' and 'maxbytes': " +
                                                std::to_string(o.minBytes) + " > " + std::to_string(o.maxBytes));
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes)
    throw Error(ErrorCode::InvalidArgument, "option -i 0 with -f 1 would never reach -e; give -i or -f");
  // Like nccl-tests, out-of-range -I and -K values are warned about and switched off, not refused.
  if (o.perIterTiming != 0 && o.perIterTiming != 1) {
    o.warnings.push_back("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.");
    o.perIterTiming = 0;
  }
  if (o.perIterSkip < 0 || o.perIterSkip >= o.iters) {
    o.warnings.push_back("per-iteration skip (-K) must be between 0 and " + std::to_string(o.iters - 1) +
                         ". Disabling.");
    o.perIterSkip = 0;
  }
  if (o.perIterSkip && !o.perIterTiming) {
    o.warnings.push_back("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.");
    o.perIterSkip = 0;
  }
  require(o.cudaGraph >= 0, "-G", o.cudaGraph, "must not be negative");
  // A captured stream runs nothing until the graph is launched: nothing can wait for one iteration of it.
  if (o.cudaGraph && o.blocking)
    badValue("-G", std::to_string(o.cudaGraph),
             "CUDA graphs cannot be combined with -z " + std::to_string(o.blocking) +
                 " (a captured iteration cannot be waited for)");
  if (o.cudaGraph && o.perIterTiming)
    badValue("-G", std::to_string(o.cudaGraph),
             "CUDA graphs cannot be combined with -I 1 (a captured iteration cannot be timed)");
  if (o.localRanks % o.gpus != 0)
    badValue("--local", std::to_string(o.localRanks),
             "must be a multiple of -g " + std::to_string(o.gpus) + " (ranks per thread)");
}

}  // namespace

std::vector<std::string> flagNotes(const Options& o, const std::string& backend) {
  std::vector<std::string> notes;
  if (backend != "cuda") {
    if (o.ctaPolicy >= 0) notes.push_back("-x: CTA policies are a GPU setting; ignored in host mode");
    if (o.deviceImplementation)
      notes.push_back("-D: device-API kernels need a GPU; host mode uses the NCCL API implementation");
    if (o.deviceCtaCount >= 0)
      notes.push_back("-V " + std::to_string(o.deviceCtaCount) +
                      ": the CTA count of device-API kernels (-D) is a GPU setting; ignored in host mode");
    if (o.localRegister)
      notes.push_back(
          "-R: in host mode buffers are registered with ncclCommRegister (host memory needs no pinning), and ranks "
          "of a host then read each other's buffers in place (zero-copy, docs/algorithms.md; between processes through "
          "process_vm_readv with TUTTI_CMA=1, or, on the emulated device with device memory, mapped by the "
          "peers unless TUTTI_MAP_REGISTERED=0)");
    if (o.memoryReport) notes.push_back("-M: GPU memory usage has no meaning in host mode; no memory report");
    return notes;
  }
  if (o.ctaPolicy >= 0) notes.push_back("-x: CTA policies are not supported by tutti yet; ignored");
  if (o.deviceImplementation)
    notes.push_back("-D: device-API kernels are not supported by tutti yet; the NCCL API implementation runs");
  if (o.deviceCtaCount >= 0)
    notes.push_back("-V " + std::to_string(o.deviceCtaCount) +
                    ": device-API kernels (-D) are not supported by tutti yet; ignored");
  if (o.memoryReport) notes.push_back("-M: no GPU memory report yet");
  if (o.streamNull)
    notes.push_back(
        "-y 1: each rank runs on a non-blocking stream of its own, never the legacy default stream, which would wait "
        "for "
        "the kernels of other ranks on a shared GPU");
  return notes;
}

size_t parseSize(const std::string& text, const char* flag) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || !std::isfinite(value) || value < 0) badValue(flag, text, "not a size");
  std::string suffix(end);
  double unit = 1;
  if (suffix == "K" || suffix == "k")
    unit = 1024.0;
  else if (suffix == "M" || suffix == "m")
    unit = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    unit = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    badValue(flag, text, "unknown suffix (use K, M or G)");
  return size_t(value * unit);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    const Flag* flag = nullptr;
    std::string value, shown;
    bool haveValue = false;
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      std::string name = arg.substr(2);
      size_t equals = name.find('=');
      if (equals != std::string::npos) {
        value = name.substr(equals + 1);
        name.resize(equals);
        haveValue = true;
      }
      for (const Flag& f : flags())
        if (name == f.name) flag = &f;
      shown = "--" + name;
    } else if (arg.size() >= 2 && arg[0] == '-') {
      for (const Flag& f : flags())
        if (f.letter == arg[1]) flag = &f;
      if (arg.size() > 2) {
        value = arg.substr(2);
        haveValue = true;
      }
      shown = arg.substr(0, 2);
    }
    if (!flag) throw Error(ErrorCode::InvalidArgument, "invalid option '" + arg + "' (see -h)");
    if (!haveValue) {
      if (i + 1 >= argc) throw Error(ErrorCode::InvalidArgument, "option " + shown + " needs a value");
      value = argv[++i];
    }
    flag->apply(o, value, shown);
  }
  validate(o);
  return o;
}

std::string usageText(const std::string& program) {
  return "USAGE: " + program +
         "\n"
         "  nccl-tests' flags (same meaning and defaults):\n"
         "  [-t,--nthreads <num threads>] [-g,--ngpus <GPUs (ranks) per thread, driven in one group>]\n"
         "  [-b,--minbytes <min size in bytes>] [-e,--maxbytes <max size in bytes>]\n"
         "  [-i,--stepbytes <increment size>] [-f,--stepfactor <increment factor>]\n"
         "  [-n,--iters <iteration count>] [-m,--agg_iters <aggregated iteration count>]\n"
         "  [-w,--warmup_iters <warmup iteration count>] [-N,--run_cycles <cycle count> (0=infinite)]\n"
         "  [-p,--parallel_init <0/1>] [-c,--check <check iteration count>]\n"
         "  [-o,--op <sum/prod/min/max/avg/mulsum/all>] [-d,--datatype <nccltype/all>] [-r,--root <root, -1=all>]\n"
         "  [-z,--blocking <0/1/2/3> 1=sync and barrier after each inner iteration (-m), 2=sync, no barrier,\n"
         "      3=sync and barrier after each outer iteration (-n), time excludes the barrier]\n"
         "  [-y,--stream_null <0/1>] [-T,--timeout <seconds>] [-C,--report_cputime <0/1>]\n"
         "  [-S,--report_timestamps <0/1>] [-J,--output_file <file.json>]\n"
         "  [-a,--average <0/1/2/3> time reported: 0=rank 0, 1=mean, 2=min, 3=max]\n"
         "  [-R,--local_register <0/1/2>] [-u,--unalign <index of first element>]\n"
         "  [-I,--per_iter_timing <0/1> per-iteration host clock timing] [-K,--per_iter_skip <count>] [-M,--memory "
         "<0/1>]\n"
         "  [-G,--cudagraph <num graph launches>] (cuda device backend only; not with -z or -I)\n"
         "  GPU-only, accepted and explained: [-x,--cta_policy <n>] [-D,--device_implementation <n>] "
         "[-V,--device_cta_count <n>]\n"
         "  tutti's own:\n"
         "  [--local N] run N ranks in this process (N / -g threads), ignoring any launcher\n"
         "  [--json FILE] [--csv FILE] reports with an environment fingerprint\n"
         "  [--compare BASELINE.json] [--compare-threshold FRACTION (default 0.10)] mark slower sizes\n"
         "  [--id-file PATH] exchange the unique id through a file (launched worlds without MASTER_ADDR)\n"
         "  [--ncclalltoallv <0/1>] alltoallv_perf: one ncclAllToAllv instead of a group of ncclSend/ncclRecv per "
         "peer\n"
         "  [--rma_roundtrip <0/1>] rma_perf: time a put+signal's round trip around the ranks (2 ranks: a ping-pong; "
         "-b 0:\n"
         "      a signal alone) instead of a ring of puts\n"
         "  [--tuttialltoallvdevice <0/1>] [--tuttialltoallvdynamic <0/1>] alltoallv_perf: tutti's calls whose counts "
         "live in device memory\n"
         "  alltoallv_perf's pattern: NCCL_TESTS_ALLTOALLV_SPREAD=<0.0-1.0> (default 1.0, distance-weighted), or\n"
         "  NCCL_TESTS_ALLTOALLV_MATRIX_FILE=<bytes matrix> with NCCL_TESTS_ALLTOALLV_MATRIX_SCALE=<factor> (-b = -e)\n"
         "  [-h,--help]\n"
         "  Launchers, innermost first: --local N; torchrun-style "
         "(RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT);\n"
         "  OpenMPI's mpirun (OMPI_COMM_WORLD_*); MPICH/Intel MPI (PMI_RANK/PMI_SIZE); Slurm "
         "(SLURM_PROCID/SLURM_NTASKS).\n"
         "  A launched world finds its root through NCCL_COMM_ID, MASTER_ADDR:MASTER_PORT (MASTER_PORT+1 under "
         "torchrun,\n"
         "  whose store owns MASTER_PORT) or --id-file; under mpirun, a build with MPI needs none of them.\n"
         "  -T bounds init and the warm-up too; a run it stops exits with code 3.\n"
         "  NCCL_TESTS_SPLIT_MASK=<hex> or NCCL_TESTS_SPLIT=<AND|OR|MOD|DIV><n> split the ranks into groups that run "
         "side\n"
         "  by side, as nccl-tests: colour = process rank (each --local rank a process) combined with n.\n"
         "  TUTTI_DEVICE=host|emulated|cuda|auto picks the device backend (auto: cuda where the CUDA driver reports a\n"
         "  device); on cuda the i'th rank of a node uses GPU i % GPUs, with device buffers, a stream of its\n"
         "  own and CUDA event timing. See perf/README.md.\n";
}

}  // namespace tutti::perf
