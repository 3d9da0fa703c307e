// The emulated CUDA driver's modules and kernel launches (emulated_entries.h). Any module image
// loads; the one kernel it knows is the executor's, tuttiRunLaunches (kernels/cuda/
// executor_kernel.cu), which it runs from the same device source on host threads, a group of
// threads per thread block (emulated_device.h), in stream order. Before a launch runs, every FIFO
// its connections name must be memory its context reaches: a GPU's kernel would fault on another
// device's memory without peer access, so the launch fails at once, naming both devices.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/tunables.h"
#include "kernels/cuda/executor_params.h"
#include "kernels/emulated/emulated_device.h"
#include "kernels/emulated/emulated_entries.h"
#include "kernels/emulated/emulated_gpu.h"

namespace tutti::kern::emulated {

namespace {

// A kernel the emulated driver can run: its parameter buffer, the grid's blocks.
struct Kernel {
  const char* name;
  // "" when the launch may run, else why it would fault.
  std::string (*check)(const std::vector<char>& params, uint32_t blocks, Context& context);
  void (*run)(const std::vector<char>& params, uint32_t blocks);
};

struct Module;
// A kernel as a module of a context hands it out: valid while the module is loaded and its
// context has not been reset since.
struct Function {
  const Kernel* kernel;
  Module* module;
};
struct Module {
  Context* context;
  uint64_t generation;  // the context's when loaded
  bool loaded = true;
  Function executor{nullptr, nullptr};
  bool live() const {
    std::lock_guard<std::mutex> lock(context->mutex);
    return loaded && generation == context->generation;
  }
};

const dev::ParamLaunch* launchesOf(const dev::ExecutorParams& p) { return p.table != nullptr ? p.table : p.launches; }

std::string checkExecutor(const std::vector<char>& params, uint32_t blocks, Context& context) {
  if (params.size() != sizeof(dev::ExecutorParams))
    return "tuttiRunLaunches takes " + std::to_string(sizeof(dev::ExecutorParams)) + " bytes of parameters";
  const auto& p = *reinterpret_cast<const dev::ExecutorParams*>(params.data());
  const dev::ParamLaunch* launches = launchesOf(p);
  if (p.nlaunches == 0 || launches[0].firstBlock != 0) return "a grid whose first launch does not start at block 0";
  for (uint32_t i = 0; i < p.nlaunches; i++) {
    const LaunchWork& w = *launches[i].work;
    const uint32_t end = i + 1 < p.nlaunches ? launches[i + 1].firstBlock : blocks;
    if (end <= launches[i].firstBlock || end - launches[i].firstBlock > w.nworkers)
      return "launch " + std::to_string(i) + " has blocks [" + std::to_string(launches[i].firstBlock) + ", " +
             std::to_string(end) + ") for " + std::to_string(w.nworkers) + " workers";
    if (integrated()) continue;  // an integrated device's memory is the host's, which every device reaches
    for (uint32_t c = 0; c < w.nconns; c++) {
      const ConnEnd& conn = w.conns()[c];
      for (const void* memory : {static_cast<const void*>(conn.fifo), static_cast<const void*>(conn.slots)}) {
        const int owner = memory == nullptr ? -1 : ownerOf(memory);
        if (owner < 0 || context.reaches(owner)) continue;
        return "emulated device " + std::to_string(context.device) + " cannot access emulated device " +
               std::to_string(owner) + "'s memory, which holds the FIFO of its connection with rank " +
               std::to_string(conn.peer) +
               (peerAccessPossible(context.device, owner)
                    ? " (peer access was not enabled"
                    : " (TUTTI_EMULATED_NO_PEER_ACCESS gives the pair no peer access") +
               "; a GPU would fault here)";
      }
    }
  }
  return "";
}

void runExecutor(const std::vector<char>& params, uint32_t blocks) {
  const auto& p = *reinterpret_cast<const dev::ExecutorParams*>(params.data());
  const dev::ParamLaunch* launches = launchesOf(p);
  std::vector<dev::EmulatedLaunch> runs;
  for (uint32_t i = 0; i < p.nlaunches; i++) {
    const OpWork* ops = launches[i].ops != nullptr ? launches[i].ops : p.ops + launches[i].opsFirst;
    const uint32_t end = i + 1 < p.nlaunches ? launches[i + 1].firstBlock : blocks;
    runs.push_back(dev::EmulatedLaunch{launches[i].work, ops, launches[i].control, end - launches[i].firstBlock});
  }
  dev::runEmulatedLaunches(runs, int(std::clamp<int64_t>(tunables::kEmulatedThreads.get(), 1, 64)));
}

const Kernel kExecutor{"tuttiRunLaunches", checkExecutor, runExecutor};

CUresult moduleLoadData(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* context = currentContext();
  if (context == nullptr) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuModuleLoadData without a current context");
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(context->mutex);
    generation = context->generation;
  }
  // Kept after unloading (a few bytes), so that a stale function is told from a live one.
  auto* made = new Module{context, generation};
  made->executor = Function{&kExecutor, made};
  *module = reinterpret_cast<CUmodule>(made);
  return CUDA_SUCCESS;
}

CUresult moduleUnload(CUmodule module) {
  auto* m = reinterpret_cast<Module*>(module);
  if (m == nullptr || !m->loaded) return CUDA_ERROR_INVALID_HANDLE;
  m->loaded = false;
  return CUDA_SUCCESS;
}

CUresult moduleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  auto* m = reinterpret_cast<Module*>(module);
  if (function == nullptr || m == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!m->live()) return fail(CUDA_ERROR_INVALID_HANDLE, "the module was unloaded, or its context reset");
  if (std::strcmp(name, kExecutor.name) != 0)
    return fail(CUDA_ERROR_NOT_FOUND, std::string("the emulated driver runs no kernel named ") + name);
  *function = reinterpret_cast<CUfunction>(&m->executor);
  return CUDA_SUCCESS;
}

CUresult funcSetAttribute(CUfunction function, CUfunction_attribute, int) {
  return function == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult occupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function, int blockSize, size_t) {
  if (blocks == nullptr || function == nullptr || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
  *blocks = blockSize > dev::kExecutorThreads ? 0 : kBlocksPerMultiprocessor;
  return CUDA_SUCCESS;
}

CUresult launchKernel(CUfunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ, unsigned int blockX,
                      unsigned int blockY, unsigned int blockZ, unsigned int, CUstream stream, void** kernelParams,
                      void** extra) {
  const auto* handle = reinterpret_cast<const Function*>(f);
  Context* context = currentContext();
  if (handle == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (context == nullptr) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuLaunchKernel without a current context");
  if (!handle->module->live())
    return fail(CUDA_ERROR_INVALID_HANDLE,
                "the kernel's module was unloaded, or its context reset since it was loaded");
  if (handle->module->context != context)
    return fail(CUDA_ERROR_INVALID_CONTEXT, "the kernel's module belongs to another context");
  const Kernel* function = handle->kernel;
  if (gridX == 0 || gridY != 1 || gridZ != 1 || blockX == 0 || blockX > unsigned(dev::kExecutorThreads) ||
      blockY != 1 || blockZ != 1)
    return fail(CUDA_ERROR_INVALID_VALUE,
                "the emulated driver runs one-dimensional grids of at most 512-thread blocks");
  if (kernelParams != nullptr)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "the emulated driver takes kernel parameters as one buffer (extra)");
  const void* buffer = nullptr;
  size_t bytes = 0;
  for (void** e = extra; e != nullptr && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buffer = e[1];
    else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      bytes = *static_cast<const size_t*>(e[1]);
    else
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (buffer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult broken = context->health(); broken != CUDA_SUCCESS) return broken;
  auto params =
      std::make_shared<std::vector<char>>(static_cast<const char*>(buffer), static_cast<const char*>(buffer) + bytes);
  // The work it names is in device memory, which the emulated host reads once what comes before
  // it in the stream has run: as a GPU would find it when the blocks start. On a stream of the
  // calling thread the launch fails at once; on a queued one it breaks the context.
  if (runsInline(stream)) {
    if (std::string problem = function->check(*params, gridX, *context); !problem.empty())
      return fail(CUDA_ERROR_ILLEGAL_ADDRESS, problem);
  }
  return onStream(stream, [function, params, gridX, context] {
    if (std::string problem = function->check(*params, gridX, *context); !problem.empty()) {
      context->breakWith(CUDA_ERROR_ILLEGAL_ADDRESS, problem);
      return;
    }
    function->run(*params, gridX);
  });
}

const Entry kEntries[] = {
    TUTTI_EMULATED_ENTRY(cuModuleLoadData, moduleLoadData),
    TUTTI_EMULATED_ENTRY(cuModuleUnload, moduleUnload),
    TUTTI_EMULATED_ENTRY(cuModuleGetFunction, moduleGetFunction),
    TUTTI_EMULATED_ENTRY(cuFuncSetAttribute, funcSetAttribute),
    TUTTI_EMULATED_ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor, occupancyMaxActiveBlocksPerMultiprocessor),
    TUTTI_EMULATED_ENTRY(cuLaunchKernel, launchKernel),
};

}  // namespace

std::span<const Entry> kernelEntries() { return kEntries; }

}  // namespace tutti::kern::emulated
