// The cuda backend's launches (cuda_executor_backend.h): a group's launches on one stream become
// one kernel, however many there are (their blocks wait on each other, so they must all be
// resident together), each launch with its own communicator's control words. Each launch's work
// arena lives in device memory from the backend's pool, uploaded in stream order on its first run
// and reused by every later call of the same launch; the operations of a call travel with the
// kernel's parameters where they fit, so such a call uploads nothing. Two events bracket the
// kernel: the launch tracker tells the launches when it began and ended, and only then are they
// done (their arenas go back to the pool, their faults are recorded, the network proxy stops
// polling for them).
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/cuda_executor_backend.h"
#include "kernels/exec_fault.h"

namespace tutti::kern::cuda {

struct CudaBackend::Submission {
  std::vector<Launch*> launches;
  std::function<void()> done;
  LaunchTracker::Events events;
  DevicePool::Buffer table;  // the launch table of a group larger than the parameters hold
};

namespace {

// A launch's device arena and scratch, from its backend's pool, given back with the launch.
struct DeviceArena {
  DevicePool* pool = nullptr;
  DevicePool::Buffer buffer;
  ~DeviceArena() {
    if (pool != nullptr) pool->giveBack(buffer);
  }
};

CudaBackend& ownerOf(Launch& launch) { return static_cast<CudaBackend&>(launch.backend()); }

}  // namespace

dev::ExecControl CudaBackend::controlFor() const {
  auto* words = reinterpret_cast<ControlWords*>(controlDevice_);
  return dev::ExecControl{&words->abortWord, &words->fault, uint64_t(options_.timeoutSeconds * 1e9),
                          &words->directReads};
}

CUdeviceptr CudaBackend::arenaFor(Launch& launch, CUstream stream) {
  if (launch.backendState) return static_cast<DeviceArena*>(launch.backendState.get())->buffer.ptr;
  LaunchWork& w = launch.work();
  const size_t arenaBytes = (size_t(w.bytes) + 255) / 256 * 256;
  auto arena = std::make_shared<DeviceArena>();
  arena->buffer = pool_->take(arenaBytes + launch.scratchBytes(), "a launch's work arena and scratch");
  arena->pool = pool_.get();
  // The arena's fixed part, pointing at its scratch in device memory; the driver takes the bytes
  // at the call (pageable memory), so the copy may go now.
  std::vector<char> bytes(reinterpret_cast<const char*>(&w), reinterpret_cast<const char*>(&w) + w.stateOffset);
  reinterpret_cast<LaunchWork*>(bytes.data())->scratch =
      launch.scratchBytes() > 0 ? reinterpret_cast<char*>(arena->buffer.ptr + arenaBytes) : nullptr;
  check(*d_, d_->cuMemcpyHtoDAsync(arena->buffer.ptr, bytes.data(), bytes.size(), stream), "cuMemcpyHtoDAsync",
        "uploading a launch's work arena");
  launch.backendState = arena;
  return arena->buffer.ptr;
}

void CudaBackend::queue(Submission& submission, CUstream stream) {
  dev::ExecutorParams params{};
  std::vector<dev::ParamLaunch> launches;
  uint32_t blocks = 0, opsUsed = 0;
  for (Launch* L : submission.launches) {
    CudaBackend& owner = ownerOf(*L);
    LaunchWork& w = L->work();
    const CUdeviceptr arena = owner.arenaFor(*L, stream);
    for (const Launch::Copy& c : L->prologue())
      if (c.bytes > 0)
        check(*d_,
              d_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(c.dst), reinterpret_cast<CUdeviceptr>(c.src), c.bytes,
                                stream),
              "cuMemcpyAsync", "copying an operation's input");
    // Its workers up to the last that has work: a small operation of a many-channel communicator
    // runs on its first blocks, and the rest are not launched.
    uint32_t used = w.nworkers;
    while (used > 0 && w.workers()[used - 1].nqueues == 0) used--;
    if (used == 0) continue;
    dev::ParamLaunch p{};
    p.work = reinterpret_cast<LaunchWork*>(arena);
    p.control = owner.controlFor();
    p.firstBlock = blocks;
    if (opsUsed + w.nops <= dev::kParamOps) {
      p.opsFirst = opsUsed;
      std::memcpy(params.ops + opsUsed, w.ops(), w.nops * sizeof(OpWork));
      opsUsed += w.nops;
    } else {
      // Too many operations to pass by value: they go to the arena's own copy, in stream order.
      check(*d_, d_->cuMemcpyHtoDAsync(arena + w.opsOffset, w.ops(), w.nops * sizeof(OpWork), stream),
            "cuMemcpyHtoDAsync", "uploading a group's operations");
      p.ops = reinterpret_cast<const OpWork*>(arena + w.opsOffset);
    }
    launches.push_back(p);
    blocks += used;
  }
  if (blocks > residentBlocks_)
    throw Error(
        ErrorCode::InvalidUsage,
        "launching " + std::to_string(launches.size()) + " communicator(s) on one stream: their " +
            std::to_string(blocks) +
            " thread blocks wait on each other, so all must be resident at once, "
            "and the GPU holds " +
            std::to_string(residentBlocks_) +
            " of the executor's (lower NCCL_MAX_NCHANNELS, or put fewer communicators in one group on one stream)");
  params.nlaunches = uint32_t(launches.size());
  if (launches.size() <= dev::kParamLaunches) {
    std::copy(launches.begin(), launches.end(), params.launches);
  } else {
    const size_t bytes = launches.size() * sizeof(dev::ParamLaunch);
    submission.table = pool_->take(bytes, "a group's launch table");
    check(*d_, d_->cuMemcpyHtoDAsync(submission.table.ptr, launches.data(), bytes, stream), "cuMemcpyHtoDAsync",
          "uploading a group's launch table");
    params.table = reinterpret_cast<const dev::ParamLaunch*>(submission.table.ptr);
  }
  submission.events = tracker_->takeEvents();
  check(*d_, d_->cuEventRecord(submission.events.start, stream), "cuEventRecord", "tracking a launch");
  if (blocks > 0) {
    size_t size = sizeof params;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    check(*d_, d_->cuLaunchKernel(function_, blocks, 1, 1, dev::kExecutorThreads, 1, 1, 0, stream, nullptr, extra),
          "cuLaunchKernel (the executor)", "launching a collective");
  }
  check(*d_, d_->cuEventRecord(submission.events.end, stream), "cuEventRecord", "tracking a launch");
}

Launch* CudaBackend::finish(Submission& submission, CUresult end, Error* first) {
  Launch* failedFirst = nullptr;
  for (Launch* L : submission.launches) {
    const ExecFault f = ownerOf(*L).fault();
    if (end == CUDA_SUCCESS && f.fault == uint32_t(Fault::None)) {
      L->ended();
      continue;
    }
    const ExecutionContext ctx = L->context(0);
    const Error e =
        end != CUDA_SUCCESS
            ? Error(ErrorCode::System, "rank " + std::to_string(ctx.rank) +
                                           ": the executor's kernel failed: " + describe(*d_, end, "the kernel's end"))
            : Error(faultCode(f),
                    describeFault(
                        f, ctx.rank, [&](int peer) { return ctx.describePeer(peer); }, options_.timeoutSeconds));
    L->failed(e);
    L->ended();
    if (failedFirst == nullptr) {
      failedFirst = L;
      *first = e;
    }
  }
  pool_->giveBack(submission.table);
  submission.table = DevicePool::Buffer{};
  return failedFirst;
}

void CudaBackend::submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) {
  auto submission = std::make_shared<Submission>();
  submission->launches.assign(launches.begin(), launches.end());
  submission->done = std::move(done);
  // `done` runs when this scope is left, unless the tracker took the submission: after a raise,
  // so that the launch that raises still lives.
  struct DoneOnExit {
    std::shared_ptr<Submission> submission;
    ~DoneOnExit() {
      if (submission && submission->done) submission->done();
    }
  } doneOnExit{submission};
  ContextScope scope(*d_, ctx_);
  const CUstream s = reinterpret_cast<CUstream>(stream);
  for (Launch* L : submission->launches) L->queued();
  try {
    queue(*submission, s);
  } catch (const Error& e) {
    // Nothing of it will run: every launch fails with the reason, and the first raises it.
    for (Launch* L : submission->launches) {
      L->failed(e);
      L->ended();
    }
    pool_->giveBack(submission->table);
    if (submission->events.start != nullptr) tracker_->giveBackEvents(submission->events);
    submission->launches.front()->raise(e);
  }
  const CUresult end = d_->cuEventQuery(submission->events.end);
  if (end == CUDA_ERROR_NOT_READY) {
    LaunchTracker::InFlight flight;
    flight.events = submission->events;
    flight.began = [submission] {
      for (Launch* L : submission->launches) L->started();
    };
    flight.finished = [this, submission](CUresult result) {
      Error first(ErrorCode::Internal, "");
      finish(*submission, result, &first);
      std::function<void()> done = std::move(submission->done);
      if (done) done();
    };
    doneOnExit.submission = nullptr;
    tracker_->track(std::move(flight));
    return;
  }
  // The stream ran it on this thread (the emulated driver's default streams): it is over, and a
  // failure is the call's.
  for (Launch* L : submission->launches) L->started();
  Error first(ErrorCode::Internal, "");
  Launch* failed = finish(*submission, end, &first);
  tracker_->giveBackEvents(submission->events);
  if (failed != nullptr) failed->raise(first);
}

}  // namespace tutti::kern::cuda
