// The host backend: host memory, host streams and the host executor (host_backend.h).
#include "kernels/host/host_backend.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "base/error.h"
#include "kernels/host/host_executor.h"
#include "kernels/host_stream.h"
#include "kernels/word_copy.h"

namespace tutti::kern::host {

void* HostMemoryBackend::allocate(size_t bytes, const std::string& what) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0)
    throw Error(ErrorCode::System, what + ": out of host memory");
  std::memset(p, 0, bytes);
  return p;
}

void HostMemoryBackend::release(void* p) { std::free(p); }
void HostMemoryBackend::copyIn(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}
void HostMemoryBackend::copyOut(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// The copy proxy's copies into a FIFO the receiving executor polls at the same time.
void HostMemoryBackend::copyAcross(void* dst, const void* src, size_t bytes) { copyWholeWords(dst, src, bytes); }

std::string HostMemoryBackend::streamProblem(cudaStream_t stream) const {
  if (stream == nullptr || HostStream::fromHandle(stream) != nullptr) return "";
  return std::string("the stream is neither NULL nor a host stream from tuttiStreamCreate (the ") + name() +
         " device backend cannot run on CUDA streams)";
}

HostMemoryBackend::RunScope::RunScope(std::span<Launch* const> launches) : launches_(launches) {
  try {
    for (Launch* L : launches_) L->beforeRun();
  } catch (...) {
    for (Launch* L : launches_) L->afterRun();  // what the others took goes back
    throw;
  }
  for (Launch* L : launches_)
    for (const Launch::Copy& c : L->prologue())
      if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);  // a count of 0 may come with null buffers
}

HostMemoryBackend::RunScope::~RunScope() {
  for (Launch* L : launches_) L->afterRun();
}

void HostMemoryBackend::submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) {
  struct Done {
    std::function<void()> done;
    ~Done() {
      if (done) done();
    }
  };
  if (stream == nullptr) {
    Done d{std::move(done)};
    run(launches);
    return;
  }
  if (launches.size() == 1) {
    // The common case allocates nothing: `done` waits in the launch, and the job captures two
    // pointers, which std::function keeps inline.
    Launch* L = launches[0];
    L->whenDone = std::move(done);
    HostStream::fromHandle(stream)->enqueue([this, L] {
      Done d{std::move(L->whenDone)};
      Launch* one[] = {L};
      run(one);
    });
    return;
  }
  // The job holds the launches' pointers; their owners keep them alive until `done`.
  std::vector<Launch*> queued(launches.begin(), launches.end());
  HostStream::fromHandle(stream)->enqueue([this, queued = std::move(queued), done = std::move(done)]() mutable {
    Done d{std::move(done)};
    run(queued);
  });
}

void HostMemoryBackend::synchronize(cudaStream_t stream) {
  if (HostStream* hs = HostStream::fromHandle(stream)) hs->synchronize();
}

void HostMemoryBackend::enqueueCopy(cudaStream_t stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  enqueueHostJob(stream, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void HostMemoryBackend::enqueueHostJob(cudaStream_t stream, std::function<void()> job) {
  if (stream == nullptr) {
    job();
    return;
  }
  HostStream::fromHandle(stream)->enqueue(std::move(job));
}

namespace {

class HostBackend final : public HostMemoryBackend {
 public:
  explicit HostBackend(const BackendOptions& options) : HostMemoryBackend(options), pool_(options.workers) {}
  const char* name() const override { return "host"; }
  void abort() override {}  // the host executor watches the communicator's abort flag itself

 protected:
  // Worker 0 of a lone launch runs on this thread; every other worker on its launch's pool.
  void run(std::span<Launch* const> launches) override {
    const bool inlineFirst = launches.size() == 1;
    RunScope scope(launches);
    for (Launch* L : launches) {
      HostWorkerPool& pool = static_cast<HostBackend&>(L->backend()).pool_;
      LaunchWork& w = L->work();
      if (L->alone()) {
        if (!inlineFirst) pool.start(0, [L] { L->runAlone(); });
        continue;
      }
      for (uint32_t worker = inlineFirst ? 1 : 0; worker < w.nworkers; worker++)
        if (w.workers()[worker].nqueues > 0)
          pool.start(int(worker),
                     [L, worker] { runWorker(L->work(), L->work().ops(), worker, L->context(int(worker))); });
    }
    std::exception_ptr first;
    Launch* firstLaunch = nullptr;
    auto record = [&](Launch* L, const Error& e) {
      L->failed(e);
      if (!first) {
        first = std::current_exception();
        firstLaunch = L;
      }
    };
    if (inlineFirst) {
      Launch* L = launches[0];
      try {
        if (L->alone())
          L->runAlone();
        else if (L->work().workers()[0].nqueues > 0)
          runWorker(L->work(), L->work().ops(), 0, L->context(0));
      } catch (const Error& e) {
        record(L, e);
      }
    }
    for (Launch* L : launches) {
      try {
        static_cast<HostBackend&>(L->backend()).pool_.wait();
      } catch (const Error& e) {
        record(L, e);
      }
    }
    if (first) {
      try {
        std::rethrow_exception(first);
      } catch (const Error& e) {
        firstLaunch->raise(e);
      }
    }
  }

 private:
  HostWorkerPool pool_;
};

}  // namespace

std::unique_ptr<ExecutorBackend> makeHostBackend(const BackendOptions& options) {
  return std::make_unique<HostBackend>(options);
}

}  // namespace tutti::kern::host
