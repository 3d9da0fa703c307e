// A rank's memory on the cuda backend (rank_memory.h): device buffers from cuMemAlloc, a non-blocking stream of the
// rank's own, copies through host staging on that stream, CUDA events and graphs. Never the legacy default stream,
// and nothing freed before the rank is done: ranks sharing a GPU run kernels that wait for each other, and the legacy
// stream or cuMemFree would wait for the whole device.
#include <algorithm>
#include <vector>

#include "perf/sweep/cuda_driver.h"
#include "perf/sweep/error.h"
#include "perf/sweep/rank_gpu.h"
#include "perf/sweep/rank_memory.h"

namespace tutti::perf {
namespace {

constexpr size_t kExchangeAlignment = 256;

cuda::DevicePtr device(const void* pointer) { return reinterpret_cast<cuda::DevicePtr>(pointer); }

class CudaMemory final : public RankMemory {
 public:
  explicit CudaMemory(const RankGpu& gpu) : gpu_(gpu), d_(gpu.driver()) {}

  // The fallible half of construction: the factory owns the object by then, so the destructor frees what was made.
  void open(size_t exchangeBytes) {
    gpu_.makeCurrent();
    check(d_.cuStreamCreate(&stream_, cuda::kStreamNonBlocking), "cuStreamCreate");
    check(d_.cuEventCreate(&start_, cuda::kEventDefault), "cuEventCreate");
    check(d_.cuEventCreate(&stop_, cuda::kEventDefault), "cuEventCreate");
    exchange_ = allocate(exchangeBytes);
    exchangeBytes_ = exchangeBytes;
  }

  ~CudaMemory() override {
    d_.cuCtxSetCurrent(gpu_.context());
    if (stream_) d_.cuStreamSynchronize(stream_);
    for (cuda::GraphExec exec : graphExecs_) d_.cuGraphExecDestroy(exec);
    for (cuda::Graph graph : graphs_) d_.cuGraphDestroy(graph);
    for (cuda::DevicePtr p : buffers_) d_.cuMemFree(p);
    if (start_) d_.cuEventDestroy(start_);
    if (stop_) d_.cuEventDestroy(stop_);
    if (stream_) d_.cuStreamDestroy(stream_);
  }

  cudaStream_t stream() const override { return stream_; }
  void synchronize() override {
    gpu_.makeCurrent();
    check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

  char* allocate(size_t bytes) override {
    gpu_.makeCurrent();
    cuda::DevicePtr p = 0;
    check(d_.cuMemAlloc(&p, std::max<size_t>(bytes, 1)), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    buffers_.push_back(p);
    return reinterpret_cast<char*>(p);
  }
  void fill(char* buffer, unsigned char value, size_t bytes) override {
    gpu_.makeCurrent();
    check(d_.cuMemsetD8Async(device(buffer), value, bytes, stream_), "cuMemsetD8Async");
  }
  char* hostInput(char*, size_t bytes) override {
    if (staging_.size() < bytes) staging_.resize(bytes);
    return staging_.data();
  }
  void upload(char* buffer, size_t bytes) override {
    gpu_.makeCurrent();
    check(d_.cuMemcpyHtoDAsync(device(buffer), staging_.data(), bytes, stream_), "cuMemcpyHtoDAsync");
    synchronize();  // the staging memory is reused at once
  }
  char* hostOutput(char* buffer, size_t bytes) override {
    if (staging_.size() < bytes) staging_.resize(bytes);
    gpu_.makeCurrent();
    check(d_.cuMemcpyDtoHAsync(staging_.data(), device(buffer), bytes, stream_), "cuMemcpyDtoHAsync");
    synchronize();
    return staging_.data();
  }

  // The exchange buffer holds the input first, the output after it.
  Staged stage(const void* in, size_t inBytes, void*, size_t outBytes) override {
    size_t outOffset = (inBytes + kExchangeAlignment - 1) / kExchangeAlignment * kExchangeAlignment;
    if (outOffset + outBytes > exchangeBytes_)
      throw Error(ErrorCode::System, "rank " + std::to_string(gpu_.rank()) + ": perf's exchange buffer (" +
                                         std::to_string(exchangeBytes_) + " bytes) is too small for " +
                                         std::to_string(outOffset + outBytes));
    gpu_.makeCurrent();
    check(d_.cuMemcpyHtoDAsync(device(exchange_), in, inBytes, stream_), "cuMemcpyHtoDAsync (perf's exchange)");
    stagedOut_ = exchange_ + outOffset;
    return {exchange_, stagedOut_, stream_};
  }
  void unstage(void* out, size_t outBytes) override {
    gpu_.makeCurrent();
    check(d_.cuMemcpyDtoHAsync(out, device(stagedOut_), outBytes, stream_), "cuMemcpyDtoHAsync (perf's exchange)");
    synchronize();
  }

  void startTimer() override {
    gpu_.makeCurrent();
    check(d_.cuEventRecord(start_, stream_), "cuEventRecord");
  }
  double stopTimer() override {
    gpu_.makeCurrent();
    check(d_.cuEventRecord(stop_, stream_), "cuEventRecord");
    check(d_.cuEventSynchronize(stop_), "cuEventSynchronize");
    float milliseconds = 0;
    check(d_.cuEventElapsedTime(&milliseconds, start_, stop_), "cuEventElapsedTime");
    return milliseconds / 1e3;
  }

  // Relaxed capture: tutti may allocate and upload a launch's device state on its first run, inside the capture,
  // which the stricter modes forbid on the capturing thread.
  void beginCapture() override {
    gpu_.makeCurrent();
    check(d_.cuStreamBeginCapture(stream_, cuda::kCaptureModeRelaxed), "cuStreamBeginCapture");
  }
  // Graphs live as long as the rank: destroying one may wait for the device, where other ranks' kernels wait for us.
  void endCapture() override {
    gpu_.makeCurrent();
    cuda::Graph graph = nullptr;
    check(d_.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
    graphs_.push_back(graph);
    cuda::GraphExec exec = nullptr;
    check(d_.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
    graphExecs_.push_back(exec);
  }
  void launchGraph() override {
    if (graphExecs_.empty())
      throw Error(ErrorCode::System,
                  "rank " + std::to_string(gpu_.rank()) + ": a CUDA graph launched before any was captured");
    gpu_.makeCurrent();
    check(d_.cuGraphLaunch(graphExecs_.back(), stream_), "cuGraphLaunch");
  }

 private:
  void check(cuda::Result result, const std::string& call) const { cuda::check(d_, result, gpu_.rank(), call); }

  const RankGpu& gpu_;
  const cuda::Driver& d_;
  cudaStream_t stream_ = nullptr;
  cuda::Event start_ = nullptr, stop_ = nullptr;
  std::vector<cuda::DevicePtr> buffers_;
  char* exchange_ = nullptr;
  size_t exchangeBytes_ = 0;
  char* stagedOut_ = nullptr;
  std::vector<char> staging_;
  std::vector<cuda::Graph> graphs_;
  std::vector<cuda::GraphExec> graphExecs_;
};

}  // namespace

std::unique_ptr<RankMemory> makeCudaMemory(const RankGpu& gpu, size_t exchangeBytes) {
  auto memory = std::make_unique<CudaMemory>(gpu);
  memory->open(exchangeBytes);
  return memory;
}

}  // namespace tutti::perf
