// The executor backend: where a communicator's launches run and where its buffers live. Launch
// (runtime/launch_*.cpp) talks only to this interface; each backend is its own files and one line
// of the registry (kernels/backend_registry.cpp):
//   host      host buffers, host streams, the host executor on worker threads;
//   cuda      device buffers, the user's CUDA streams, the device executor as a kernel;
//   emulated  the cuda backend over the emulated CUDA driver of this library (kernels/emulated/):
//             every host-side line of the cuda backend, and the device executor's source on host
//             threads, on machines without a GPU.
// A backend has three faces: the executor (Executor, below: submit, synchronise, abort, fault),
// its memory (DeviceMemory, kernels/device_memory.h: allocate, copy, map, export and import), and
// its traits (BackendTraits, below: one plain value from the registry). ExecutorBackend is all
// three; code that only allocates or copies takes its memory() and never sees the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/device_memory.h"
#include "kernels/execution_context.h"
#include "kernels/export_handle.h"
#include "kernels/work.h"
#include "nccl.h"

namespace tutti::kern {

// One communicator's share of a launch, bound and ready to run: its work arena (host memory), the
// scratch it needs, and what the host executor asks of the communicator while it runs.
class ExecutorBackend;

class Launch {
 public:
  virtual ~Launch() = default;
  // The backend of the launch's communicator (a group's launches all have backends of one kind).
  virtual ExecutorBackend& backend() = 0;
  // The arena (WorkBuilder); its ops are the current call's.
  virtual LaunchWork& work() = 0;
  virtual size_t scratchBytes() const = 0;
  // The host backend, around a run on host threads: takes the communicator's scratch for the arena
  // and marks it running (before); gives the scratch back and marks it ended (after).
  virtual void beforeRun() {}
  virtual void afterRun() {}
  // Device backends, as the device runs it: queued() when submitted (the network proxy polls from
  // then on, since a kernel rings no bell), started() once the device began it, ended() once it is
  // over (after failed(), where it failed).
  virtual void queued() {}
  virtual void started() {}
  virtual void ended() {}
  // Host executors: the context of worker `worker` (bells, waits, network driving, timeout).
  virtual ExecutionContext context(int worker) = 0;
  // Copies the launch needs before its workers, in stream order (an in-place all-to-all's input),
  // in the backend's memory.
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual std::span<const Copy> prologue() const = 0;
  // A launch that runs without workers (a one-shot all-reduce through the mailboxes, on host
  // backends): alone() is true and runAlone() runs it on the thread of worker 0.
  virtual bool alone() const { return false; }
  virtual void runAlone() {}
  // A run of the launch failed: records it on the communicator (called once per error).
  virtual void failed(const Error& error) = 0;
  // Throws the error a failed run reports to its caller: the communicator's recorded cause where
  // the run only saw an abort.
  [[noreturn]] virtual void raise(const Error& error) { throw error; }

  // What the backend keeps for this launch between calls (a device copy of its arena), owned here
  // so that it lives and dies with the launch.
  std::shared_ptr<void> backendState;
  // Where a backend keeps the submission's `done` while the launch waits on a stream.
  std::function<void()> whenDone;
};

// The largest LL message of the device executors (kernels/fifo.h): 16 KiB of data, 32 KiB of
// lines per FIFO slot. NCCL's LL serves small messages alike; a larger one pipelines better
// through Simple's slots.
constexpr size_t kDeviceLLBytes = 16 * 1024;
// What a backend answers for itself, fixed by its kind: the registry's entry for its name, known
// before one is made (backendTraits), so that the ranks agree on it at init.
struct BackendTraits {
  // The largest message its executor sends as LL lines (kernels/fifo.h) on FIFOs of memory
  // transports; 0: Simple only (the host executor: a host thread gains nothing from LL).
  size_t llBytes = 0;
  // The one-shot all-reduce through the control blocks' mailboxes (kernels/mailbox.h), run by a
  // host thread, can serve this backend's operations.
  bool mailboxes = false;
  // Channels a communicator uses where NCCL_MAX_NCHANNELS does not say: a host thread per channel
  // gains nothing past the host's cores (host, and the emulated device's blocks, which are host
  // threads); a GPU's single node wants tens, as NCCL runs over NVLink.
  int maxChannels = 2;
  // Its waits sleep on bells (kern::Bell) that whoever fills or drains a FIFO must ring; the
  // others poll (a kernel cannot sleep on a futex).
  bool bells = false;
  // Its executor may read a peer process's user buffer at an address the peer sent, with a
  // cross-memory read (base/cross_memory.h; kern::kDirectAcrossProcesses): the host executor.
  bool readsOtherProcesses = false;
  // Its executor reads a PreMulSum scalar that lives in device memory itself, in stream order;
  // otherwise the caller reads it at enqueue.
  bool readsDeviceScalars = true;
  // Its executor reads a launch's arena (LaunchWork) where the launch keeps it, in host memory,
  // when the run starts: a host job queued before the launch on its stream may still change the
  // arena's counts and buffers (the device-count all-to-alls, runtime/launch/alltoallv_device.h).
  // A device backend copies the arena to the device at submit.
  bool readsArenaAtRun = false;
};

// The executor: runs a group's launches on a stream and answers for them. Defaults: none where the
// answer depends on the backend (each states it: the host backend's answers are not the device
// backends' and neither is a safe guess for the other).
class Executor {
 public:
  virtual ~Executor() = default;
  // The backend's name, for messages.
  virtual const char* name() const = 0;
  // Threads (workers) a launch's worker runs on: the host executor's pool size.
  virtual int workers() const = 0;
  // Workers (thread blocks) of its executor that its device holds resident at once, all ranks
  // sharing it together: a group's blocks wait on each other, so they must all fit; 0: no limit
  // (the host backend).
  virtual uint32_t residentWorkers() const = 0;
  // Direct messages its device executor read in place (tuttiCommZeroCopyReads); 0 for the host
  // executor, which counts in ExecutionContext::directReads instead.
  virtual uint64_t directReads() const = 0;
  // Its executor may read a peer's user buffer at an address the peer sent (direct messages,
  // kernels/lane_engine.h) over connections whose ends share an address space: the host memory
  // backends, whose ranks in one process see each other's buffers. The cuda backend answers no
  // unless its device is integrated with the host: its executor reads other ranks' registered
  // buffers only where they are mapped into its process (exportsUserBuffers; kern::kDirectMapped).
  virtual bool readsPeerBuffers() const = 0;

  // The device it runs on (the host backend: none).
  // Each rank needs a device of its own: ranks sharing one are refused unless allowed
  // (TUTTI_ALLOW_SHARED_GPU).
  virtual bool ownsDevice() const = 0;
  // The PCI bus id of its device as NCCL writes it ("0000:17:00.0"), by which the ranks place each
  // other's GPUs in the topology (NCCL_P2P_LEVEL, rings); "" for none (the host backend).
  virtual std::string deviceBusId() const = 0;
  // Whether device `device`'s executor can reach device `peer`'s memory (CUDA peer access), for
  // rank threads of one process on devices of their own; true where memory is the host's.
  virtual bool canAccessPeer(int device, int peer) const = 0;

  // Whether a stream can carry this backend's work, and whether a user buffer can be used: ""
  // when they can, else why not (the caller names the operation and rank). The host backend takes
  // any buffer.
  virtual std::string streamProblem(cudaStream_t stream) const = 0;
  virtual std::string bufferProblem(const void* buffer, size_t bytes) const = 0;
  // Why an operation may not be enqueued on `stream` as it is now ("" when it may): a stream
  // being captured into a CUDA graph, where this backend cannot replay what it records. The host
  // backend's streams are never captured: "".
  virtual std::string captureProblem(cudaStream_t stream) const = 0;

  // Runs the launches (one per communicator of a group, every launch's backend of this one's
  // kind, each with its own communicator's control words) in order on `stream`: a null stream on
  // a host backend means before returning; otherwise they are queued and the call returns. `done`
  // runs once the launches have run and the backend no longer needs them (on whichever thread saw
  // them end). The error of a run that ends before the call returns is thrown (Launch::raise);
  // that of a queued run is recorded (Launch::failed) when it ends.
  virtual void submit(std::span<Launch* const> launches, cudaStream_t stream, std::function<void()> done) = 0;
  // Waits until everything queued on the stream has run (host streams; device backends leave
  // this to the user's CUDA calls).
  virtual void synchronize(cudaStream_t stream) = 0;
  // Stream-ordered work that runs no plan (one-sided operations, runtime/launch/rma.h): a copy
  // between two ranges the executor reaches, and a job on a host thread, each after everything
  // queued on `stream` before it and before anything queued after it. A null stream on a host
  // backend means before returning, and then a job's Error reaches the caller; queued, a job
  // records its own errors (a CUDA host function cannot report one). The cuda backend copies with
  // the copy engine (cuMemcpyAsync) and runs jobs as host functions (cuLaunchHostFunc). Default:
  // cannot (throws Error (InvalidUsage) naming the backend).
  virtual void enqueueCopy(cudaStream_t stream, void* dst, const void* src, size_t bytes) {
    throw Error(ErrorCode::InvalidUsage,
                std::string("the ") + name() + " backend does not queue copies without a plan (one-sided operations)");
  }
  virtual void enqueueHostJob(cudaStream_t stream, std::function<void()> job) {
    throw Error(ErrorCode::InvalidUsage,
                std::string("the ") + name() + " backend does not queue host jobs (one-sided operations)");
  }
  // Why the backend stopped a launch, if it did (device backends: read from the fault record the
  // kernel writes; None while nothing failed). The host executor throws its faults instead: None.
  virtual ExecFault fault() const = 0;
  // Makes every running or queued launch stop soon (ncclCommAbort): sets the abort word.
  virtual void abort() = 0;
};

// A backend: its executor, its memory, and its traits.
class ExecutorBackend : public Executor, public DeviceMemory {
 public:
  // One name for both faces.
  const char* name() const override = 0;

  // Its memory alone, for code that allocates or copies and runs nothing.
  DeviceMemory& memory() { return *this; }
  const DeviceMemory& memory() const { return *this; }

  // What the layers above must do for this backend's executors, asked instead of its name. The
  // fixed answers are its traits (BackendTraits, above), the registry's entry for its name, which
  // the registry gives every backend it makes: the one place they are stated.
  const BackendTraits& traits() const { return traits_; }
  void adoptTraits(const BackendTraits& traits) { traits_ = traits; }  // by the registry, once made
  bool sleepsOnBells() const { return traits_.bells; }
  bool runsMailboxes() const { return traits_.mailboxes; }
  bool readsOtherProcesses() const { return traits_.readsOtherProcesses; }
  bool readsDeviceScalars() const { return traits_.readsDeviceScalars; }
  bool readsArenaAtRun() const { return traits_.readsArenaAtRun; }
  size_t llBytes() const { return traits_.llBytes; }

 private:
  BackendTraits traits_;
};

struct BackendOptions {
  int device = 0;               // the CUDA device (cuda, emulated)
  int workers = 1;              // workers (host threads, thread blocks) a launch may use
  double timeoutSeconds = 300;  // a device wait without progress fails after this long
};

// Makes the backend a communicator runs on: "host", "emulated" or "cuda". Throws Error
// (InvalidUsage) naming `operation` when it cannot be served (no driver, no device).
std::unique_ptr<ExecutorBackend> makeExecutorBackend(const std::string& name, const BackendOptions& options,
                                                     const std::string& operation);

// The backend a communicator made now takes, by TUTTI_DEVICE (auto|host|emulated|cuda): auto is
// the first backend that finds a device here (cuda, where the driver reports one), else host.
// Throws InvalidUsage naming `operation` for another value.
std::string chooseBackend(const std::string& operation);
// Devices the backend `name` finds here, probed once (cuda: 0 without a driver, or in a build
// without CUDA); 0 for a backend that has none of its own, or an unknown name.
int backendDevices(const std::string& name);
// The device a communicator made now on this thread uses with backend `name`: for cuda, the device
// of the thread's current context (cudaSetDevice), as NCCL takes it; for emulated,
// TUTTI_EMULATED_DEVICE; 0 for host.
int currentDevice(const std::string& name);

// Memory for a user's buffers where communicators of backend `name` run, reachable without a
// communicator (ncclMemAlloc): page-aligned host memory for host; for cuda and emulated, device
// memory that peers in other processes can map. Throws Error naming ncclMemAlloc and the size.
void* allocateUserMemory(const std::string& name, size_t bytes);
// Frees what allocateUserMemory returned, whichever backend it was for (ncclMemFree).
void freeUserMemory(void* p);

// The traits of backend `name`; an unknown name: the defaults.
BackendTraits backendTraits(const std::string& name);

// A backend by name, as the registry keeps it: the built-in ones (cuda, emulated, host, in the
// order TUTTI_DEVICE=auto tries them) and any registered after them.
struct BackendRegistration {
  std::string name;
  // Makes one for a communicator; throws Error naming `operation` when it cannot.
  std::function<std::unique_ptr<ExecutorBackend>(const BackendOptions&, const std::string& operation)> make;
  // ncclMemAlloc's memory where communicators of this backend run; empty: page-aligned host memory.
  std::function<void*(size_t bytes)> allocateUser;
  int (*devices)() = nullptr;        // devices it finds here (auto takes the first that finds one); null: none
  int (*currentDevice)() = nullptr;  // the calling thread's device, for a communicator made now; null: 0
  BackendTraits traits;
};
// Adds a backend that TUTTI_DEVICE may then name (a backend built outside this library: tests, an
// out-of-tree executor). Throws Error (InvalidUsage) when the name is taken.
void registerBackend(BackendRegistration backend);
// The names the registry knows, in its order ("cuda, emulated, host").
std::string backendNames();
// The registry's own copy of a known name, valid for the life of the process (the C API hands it
// out); "" for an unknown one.
const char* registeredName(const std::string& name);

}  // namespace tutti::kern
