// The perf sweep's entry point (sweep.h): options, the world, the checks before any rank starts, the threads that
// drive the ranks (-g each).
#include "perf/sweep/sweep.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "perf/sweep/mpi_session.h"
#include "perf/sweep/preflight.h"
#include "perf/sweep/rank_gpu.h"
#include "perf/sweep/sweep_context.h"
#include "perf/sweep/thread_runner.h"

namespace tutti::perf {
namespace {

std::string baseName(const char* path) {
  std::string text = path ? path : "perf";
  size_t slash = text.rfind('/');
  return slash == std::string::npos ? text : text.substr(slash + 1);
}

}  // namespace

int runSweep(const char* collective, int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows line by line, as nccl-tests does
  std::string program = baseName(argc > 0 ? argv[0] : nullptr);
  Options options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
    return kUsageExitCode;
  }
  for (const std::string& warning : options.warnings) std::fprintf(stderr, "%s\n", warning.c_str());
  if (options.help) {
    std::printf("%s", usageText(program).c_str());
    return 0;
  }
  // The backend decides where the buffers live, and a GPU's context must be current before init: expect what tutti
  // will choose. The driver is not loaded where the host backends are asked for by name.
  const char* device = std::getenv("TUTTI_DEVICE");
  std::string noDriver;
  bool hostByName = device && (std::string(device) == "host" || std::string(device) == "emulated");
  const cuda::Driver* driver = hostByName ? nullptr : cuda::driver(&noDriver);
  const std::string expected = expectedBackend(device, driver);
  if (expected == "cuda" && (driver == nullptr || driver->deviceCount == 0)) {
    std::fprintf(stderr, "%s: TUTTI_DEVICE=cuda: the sweep needs a CUDA device for its buffers: %s\n", program.c_str(),
                 driver ? "the CUDA driver reports none" : noDriver.c_str());
    return 1;
  }
  const int bootstrapSeconds = boundBootstrap(options.timeoutSeconds);
  std::optional<MpiSession> mpi;
  World world;
  try {
    const Collective& coll = findCollective(collective,
                                            options.callAllToAllv          ? AllToAllvCall::NcclAllToAllv
                                            : options.callAllToAllvDevice  ? AllToAllvCall::TuttiDevice
                                            : options.callAllToAllvDynamic ? AllToAllvCall::TuttiDynamic
                                                                           : AllToAllvCall::Group,
                                            options.rmaRoundTrip != 0);
    auto env = processEnvironment();
    world = detectWorld(options, env);
    if (world.launcher == "mpi") {
      mpi.emplace(&argc, &argv);
      world = joinMpiWorld(world, env, mpi->rank(), mpi->size());
    }
    // Usage errors that need the world: every process finds the same ones, so each stops at once; process 0 says why.
    std::optional<Baseline> baseline;
    std::optional<GroupSplit> split;
    std::vector<int> colours;
    int usage = 0;
    try {
      split = groupSplitFromEnvironment(env);
      if (split) colours = groupColours(*split, world);
      checkOptionsForWorld(options, coll, world.nranks(), split, colours);
      requireGraphBackend(options, expected, device);
      if (world.processRank == 0) {
        requireWritable(options.jsonFile, "--json");
        requireWritable(options.csvFile, "--csv");
        if (!options.compareFile.empty()) baseline = readCompareBaseline(options, coll, world.nranks(), split);
      }
    } catch (const Error& error) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
      usage = kUsageExitCode;
    }
    if (mpi) usage = mpi->agreeExitCode(usage);  // the report checks are process 0's alone
    if (usage) return usage;
    ncclUniqueId id = mpi ? mpi->broadcastUniqueId() : shareUniqueId(world, options, env, bootstrapSeconds);
    SweepContext context{coll,
                         options,
                         world,
                         id,
                         program,
                         std::vector<std::string>(argv + 1, argv + argc),
                         std::move(baseline),
                         std::move(split),
                         std::move(colours),
                         expected,
                         expected == "cuda" ? driver : nullptr,
                         Watchdog(world.ranksPerProcess, options.timeoutSeconds),
                         0,
                         false,
                         {}};
    std::vector<std::thread> threads;
    for (int i = 0; i < world.ranksPerProcess / options.gpus; i++)
      threads.emplace_back([&context, i] { ThreadRunner(context, i).run(); });
    for (std::thread& t : threads) t.join();
    // Every rank has its communicator (or gave up): the id file has served, and must not mislead the next run.
    std::string idFile = uniqueIdFile(world, options, env);
    if (world.processRank == 0 && !idFile.empty()) std::remove(idFile.c_str());
    return mpi ? mpi->agreeExitCode(context.exitCode) : int(context.exitCode);
  } catch (const std::exception& error) {
    auto* perfError = dynamic_cast<const Error*>(&error);
    bool timedOut = perfError && perfError->code() == ErrorCode::Timeout;
    std::fprintf(stderr, "%s: %s%s\n", program.c_str(), timedOut ? "timed out in init: " : "", error.what());
    int code = timedOut ? kTimeoutExitCode : 1;
    if (mpi) mpi->abort(code);
    return code;
  }
}

}  // namespace tutti::perf
