// The emulated CUDA driver's streams and events (emulated_entries.h). A stream is a host stream
// (kernels/host_stream.h): an ordered queue run by a thread of its own. The legacy and per-thread
// default streams run their work on the calling thread before the call returns, a schedule a
// GPU may also take, and the one that makes a NULL stream mean "done on return" in host mode.
// An event is a pair of counters: records asked for and records the stream has reached. A stream
// being captured keeps what is queued on it, in order, instead of running it; the graph it ends
// in replays that list, in the launching stream's order, as often as it is launched.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernels/emulated/emulated_entries.h"
#include "kernels/emulated/emulated_gpu.h"
#include "kernels/host_stream.h"

namespace tutti::kern::emulated {

namespace {

struct Event {
  Context* context = nullptr;         // where it was last recorded
  std::atomic<uint64_t> recorded{0};  // records asked for
  std::atomic<uint64_t> reached{0};   // the newest record its stream has reached
  std::atomic<int64_t> timeNs{0};     // when it was reached
};

// What a capture kept, and a graph's (and its instantiation's) work.
using Work = std::vector<std::function<void()>>;

struct Streams {
  std::mutex mutex;
  std::set<HostStream*> own;  // made by cuStreamCreate
  std::map<CUevent, std::shared_ptr<Event>> events;
  std::map<CUstream, std::shared_ptr<Work>> capturing;
};
Streams& streams() {
  static Streams s;
  return s;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<Event> eventOf(CUevent event) {
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.events.find(event);
  return found == s.events.end() ? nullptr : found->second;
}

CUresult streamCreate(CUstream* stream, unsigned int) {
  if (stream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (currentContext() == nullptr) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuStreamCreate without a current context");
  auto* made = new HostStream();
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.own.insert(made);
  *stream = reinterpret_cast<CUstream>(made->handle());
  return CUDA_SUCCESS;
}

CUresult streamDestroy(CUstream stream) {
  HostStream* hs = HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream));
  Streams& s = streams();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (hs == nullptr || s.own.erase(hs) == 0)
      return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy of a stream the driver did not make");
  }
  delete hs;  // runs what is queued first
  return CUDA_SUCCESS;
}

CUresult streamSynchronize(CUstream stream) {
  if (runsInline(stream)) return CUDA_SUCCESS;
  HostStream* hs = HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream));
  if (hs == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamSynchronize of an unknown stream");
  try {
    hs->synchronize();
  } catch (...) {
    // A host stream's jobs from tutti's host backend may record errors; the driver's own never do.
  }
  return currentContext() != nullptr ? currentContext()->health() : CUDA_SUCCESS;
}

CUresult streamQuery(CUstream stream) {
  if (runsInline(stream)) return CUDA_SUCCESS;
  HostStream* hs = HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream));
  if (hs == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamQuery of an unknown stream");
  return hs->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult streamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!runsInline(stream) && HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream)) == nullptr)
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamIsCapturing of an unknown stream");
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  *status = s.capturing.count(stream) != 0 ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult streamBeginCapture(CUstream stream, CUstreamCaptureMode) {
  if (runsInline(stream)) return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the default streams cannot be captured");
  if (HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream)) == nullptr)
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamBeginCapture of an unknown stream");
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.capturing.emplace(stream, std::make_shared<Work>()).second)
    return fail(CUDA_ERROR_ILLEGAL_STATE, "the stream is being captured already");
  return CUDA_SUCCESS;
}

CUresult streamEndCapture(CUstream stream, CUgraph* graph) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.capturing.find(stream);
  if (found == s.capturing.end()) return fail(CUDA_ERROR_ILLEGAL_STATE, "the stream is not being captured");
  *graph = reinterpret_cast<CUgraph>(new Work(*found->second));
  s.capturing.erase(found);
  return CUDA_SUCCESS;
}

// An instantiated graph: its work, shared with the launches still queued when it is destroyed.
using Exec = std::shared_ptr<const Work>;

CUresult graphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *exec = reinterpret_cast<CUgraphExec>(new Exec(std::make_shared<const Work>(*reinterpret_cast<Work*>(graph))));
  return CUDA_SUCCESS;
}

CUresult graphLaunch(CUgraphExec exec, CUstream stream) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Exec work = *reinterpret_cast<const Exec*>(exec);
  return onStream(stream, [work] {
    for (const std::function<void()>& job : *work) job();
  });
}

CUresult graphExecDestroy(CUgraphExec exec) {
  delete reinterpret_cast<Exec*>(exec);
  return CUDA_SUCCESS;
}

CUresult graphDestroy(CUgraph graph) {
  delete reinterpret_cast<Work*>(graph);
  return CUDA_SUCCESS;
}

CUresult eventCreate(CUevent* event, unsigned int) {
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto made = std::make_shared<Event>();
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  *event = reinterpret_cast<CUevent>(made.get());
  s.events[*event] = std::move(made);
  return CUDA_SUCCESS;
}

CUresult eventDestroy(CUevent event) {
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.erase(event) != 0 ? CUDA_SUCCESS
                                    : fail(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy of an unknown event");
}

CUresult eventRecord(CUevent event, CUstream stream) {
  std::shared_ptr<Event> e = eventOf(event);
  if (e == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord of an unknown event");
  e->context = currentContext();
  const uint64_t record = e->recorded.fetch_add(1) + 1;
  return onStream(stream, [e, record] {
    e->timeNs.store(nowNs());
    uint64_t seen = e->reached.load();
    while (seen < record && !e->reached.compare_exchange_weak(seen, record)) {
    }
  });
}

bool complete(const Event& e) {
  return e.reached.load(std::memory_order_acquire) >= e.recorded.load(std::memory_order_acquire);
}

CUresult eventQuery(CUevent event) {
  std::shared_ptr<Event> e = eventOf(event);
  if (e == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventQuery of an unknown event");
  if (e->context != nullptr && e->context->health() != CUDA_SUCCESS) return e->context->health();
  return complete(*e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult eventSynchronize(CUevent event) {
  std::shared_ptr<Event> e = eventOf(event);
  if (e == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventSynchronize of an unknown event");
  for (int polls = 0; !complete(*e); polls++) {
    if (polls < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return e->context != nullptr ? e->context->health() : CUDA_SUCCESS;
}

CUresult eventElapsedTime(float* ms, CUevent start, CUevent end) {
  std::shared_ptr<Event> a = eventOf(start), b = eventOf(end);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (a == nullptr || b == nullptr) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime of an unknown event");
  if (a->recorded.load() == 0 || b->recorded.load() == 0)
    return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime of an event never recorded");
  if (!complete(*a) || !complete(*b)) return CUDA_ERROR_NOT_READY;
  *ms = float(double(b->timeNs.load() - a->timeNs.load()) / 1e6);
  return CUDA_SUCCESS;
}

// A host function in stream order (cuLaunchHostFunc), as the driver runs one: after the work
// queued before it, on the stream's own thread.
CUresult launchHostFunc(CUstream stream, CUhostFn fn, void* userData) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return onStream(stream, [fn, userData] { fn(userData); });
}

const Entry kEntries[] = {
    TUTTI_EMULATED_ENTRY(cuStreamCreate, streamCreate),
    TUTTI_EMULATED_ENTRY(cuLaunchHostFunc, launchHostFunc),
    TUTTI_EMULATED_ENTRY(cuStreamDestroy, streamDestroy),
    TUTTI_EMULATED_ENTRY(cuStreamSynchronize, streamSynchronize),
    TUTTI_EMULATED_ENTRY(cuStreamQuery, streamQuery),
    TUTTI_EMULATED_ENTRY(cuStreamIsCapturing, streamIsCapturing),
    TUTTI_EMULATED_ENTRY(cuEventCreate, eventCreate),
    TUTTI_EMULATED_ENTRY(cuEventDestroy, eventDestroy),
    TUTTI_EMULATED_ENTRY(cuEventRecord, eventRecord),
    TUTTI_EMULATED_ENTRY(cuEventQuery, eventQuery),
    TUTTI_EMULATED_ENTRY(cuEventSynchronize, eventSynchronize),
    TUTTI_EMULATED_ENTRY(cuEventElapsedTime, eventElapsedTime),
    TUTTI_EMULATED_ENTRY(cuStreamBeginCapture, streamBeginCapture),
    TUTTI_EMULATED_ENTRY(cuStreamEndCapture, streamEndCapture),
    TUTTI_EMULATED_ENTRY(cuGraphInstantiateWithFlags, graphInstantiateWithFlags),
    TUTTI_EMULATED_ENTRY(cuGraphLaunch, graphLaunch),
    TUTTI_EMULATED_ENTRY(cuGraphExecDestroy, graphExecDestroy),
    TUTTI_EMULATED_ENTRY(cuGraphDestroy, graphDestroy),
};

}  // namespace

bool runsInline(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

CUresult onStream(CUstream stream, std::function<void()> job) {
  if (currentContext() == nullptr)
    return fail(CUDA_ERROR_INVALID_CONTEXT, "work queued on a stream without a current context");
  if (runsInline(stream)) {
    job();
    return CUDA_SUCCESS;
  }
  HostStream* hs = HostStream::fromHandle(reinterpret_cast<cudaStream_t>(stream));
  if (hs == nullptr)
    return fail(CUDA_ERROR_INVALID_HANDLE, "work queued on a handle that is no stream of the emulated driver");
  {
    Streams& s = streams();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto capture = s.capturing.find(stream);
    if (capture != s.capturing.end()) {
      capture->second->push_back(std::move(job));
      return CUDA_SUCCESS;
    }
  }
  hs->enqueue(std::move(job));
  return CUDA_SUCCESS;
}

std::span<const Entry> streamEntries() { return kEntries; }

}  // namespace tutti::kern::emulated
