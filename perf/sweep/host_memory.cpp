// A rank's memory on the host and emulated backends (rank_memory.h): ncclMemAlloc'd buffers, a host stream, the host
// clock.
#include <cstring>
#include <vector>

#include "perf/sweep/rank_memory.h"
#include "perf/sweep/sweep_context.h"
#include "tutti/tutti.h"

namespace tutti::perf {
namespace {

class HostMemory final : public RankMemory {
 public:
  HostMemory(bool nullStream, int rank) : rank_(rank) {
    if (!nullStream) check(tuttiStreamCreate(&stream_), rank_, "tuttiStreamCreate");
  }
  ~HostMemory() override {
    if (stream_) tuttiStreamDestroy(stream_);
    for (void* p : buffers_) ncclMemFree(p);
  }

  cudaStream_t stream() const override { return stream_; }
  void synchronize() override {
    if (stream_) check(tuttiStreamSynchronize(stream_), rank_, "tuttiStreamSynchronize");
  }

  char* allocate(size_t bytes) override {
    void* p = nullptr;
    check(ncclMemAlloc(&p, bytes), rank_, "ncclMemAlloc(" + std::to_string(bytes) + " bytes)");
    buffers_.push_back(p);
    return static_cast<char*>(p);
  }
  void fill(char* buffer, unsigned char value, size_t bytes) override { std::memset(buffer, value, bytes); }
  char* hostInput(char* buffer, size_t) override { return buffer; }
  void upload(char*, size_t) override {}
  char* hostOutput(char* buffer, size_t) override { return buffer; }

  Staged stage(const void* in, size_t, void* out, size_t) override { return {in, out, nullptr}; }
  void unstage(void*, size_t) override {}

  // Host streams have no events: the time runs until the stream is done.
  void startTimer() override { start_ = Clock::now(); }
  double stopTimer() override {
    synchronize();
    return secondsSince(start_);
  }

  void beginCapture() override { noGraphs(); }
  void endCapture() override { noGraphs(); }
  void launchGraph() override { noGraphs(); }

 private:
  // runSweep refuses -G on a backend without graphs before any rank starts.
  [[noreturn]] void noGraphs() const {
    throw Error(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": -G needs the cuda device backend");
  }

  int rank_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> buffers_;
  Clock::time_point start_;
};

}  // namespace

std::unique_ptr<RankMemory> makeHostMemory(bool nullStream, int rank) {
  return std::make_unique<HostMemory>(nullStream, rank);
}

}  // namespace tutti::perf
