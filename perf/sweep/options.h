// The perf sweep's command line: nccl-tests' flags (same letters, meanings and defaults) plus tutti's own.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tutti::perf {

// Every setting of one sweep. Defaults are nccl-tests' (2.19) defaults.
struct Options {
  int threads = 1;                 // -t: threads per process (each drives -g ranks)
  int gpus = 1;                    // -g: ranks (GPUs) per thread, driven in one NCCL group
  size_t minBytes = 32u << 20;     // -b
  size_t maxBytes = 32u << 20;     // -e
  size_t stepBytes = 1u << 20;     // -i
  size_t stepFactor = 1;           // -f (> 1: multiply instead of adding -i)
  int iters = 20;                  // -n
  int aggIters = 1;                // -m: operations fused in one group per iteration
  int warmupIters = 1;             // -w
  int runCycles = 1;               // -N (0: forever)
  int parallelInit = 0;            // -p
  int check = 1;                   // -c: checking passes per size (0: no check)
  std::string op = "sum";          // -o: sum prod max min avg mulsum all
  std::string datatype = "float";  // -d: a type name or all
  int root = 0;                    // -r (-1: every root in turn)
  int blocking = 0;                // -z
  int streamNull = 0;              // -y
  int timeoutSeconds = 0;          // -T (0: none)
  int cudaGraph = 0;               // -G: CUDA graph launches of the captured iterations (cuda backend only)
  int reportCpuTime = 0;           // -C
  int reportTimestamps = 0;        // -S
  std::string jsonFile;            // -J / --json
  int average = 1;                 // -a: 0 rank 0, 1 mean, 2 min, 3 max
  int localRegister = 0;           // -R
  int unalign = 0;                 // -u: elements of misalignment
  int perIterTiming = 0;           // -I
  int perIterSkip = 0;             // -K
  int memoryReport = 0;            // -M
  int ctaPolicy = -1;              // -x (GPU only)
  int deviceImplementation = 0;    // -D (GPU only)
  int deviceCtaCount = -1;         // -V (GPU only); -1: not given (nccl-tests then uses 16)
  bool help = false;               // -h
  // tutti's own.
  int localRanks = 0;                 // --local N: N ranks of this process, ignoring any launcher
  std::string csvFile;                // --csv FILE
  std::string compareFile;            // --compare BASELINE.json
  double compareThreshold = 0.10;     // --compare-threshold: slower by more than this fraction is marked
  std::string idFile;                 // --id-file: where a launched world exchanges the unique id
  int callAllToAllv = 0;              // --ncclalltoallv 1: alltoallv_perf calls ncclAllToAllv, not a send/recv group
  int rmaRoundTrip = 0;               // --rma_roundtrip 1: rma_perf times a put+signal round trip, not a ring of puts
  int callAllToAllvDevice = 0;        // --tuttialltoallvdevice 1: tuttiAllToAllvDevice (counts in device memory)
  int callAllToAllvDynamic = 0;       // --tuttialltoallvdynamic 1: tuttiAllToAllvDynamic (receive counts found)
  std::vector<std::string> warnings;  // nccl-tests' stderr lines for values it disables (-I, -K)
};

// Parses argv into options; throws perf::Error (InvalidArgument) naming the flag on bad input.
Options parseOptions(int argc, char** argv);

// What the run does with the GPU-only flags given, on a communicator whose device backend is backend ("host",
// "emulated" or "cuda"): one line each, printed in the header.
std::vector<std::string> flagNotes(const Options& options, const std::string& backend);

// nccl-tests' size syntax: a number with an optional K, M or G suffix (powers of 1024).
size_t parseSize(const std::string& text, const char* flag);

// The usage text for program.
std::string usageText(const std::string& program);

}  // namespace tutti::perf
