// The communicator, its state grouped by concern: identity and peers, settings agreed at init,
// control blocks, executor resources, connections, planning, user reduction ops, error state.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/registry.h"
#include "base/error.h"
#include "kernels/wait_slot.h"
#include "nccl.h"
#include "runtime/api/config.h"
#include "runtime/comm/conn_key.h"
#include "runtime/comm/control_block.h"
#include "runtime/comm/registrations.h"
#include "runtime/comm/windows.h"
#include "runtime/launch/comm_wait_hooks.h"

// What the communicator holds only by pointer is declared here, so that a file that reads its
// state pulls in no more than the state's own types; it includes the headers of what it uses.
namespace tutti {
namespace bootstrap {
class Bootstrap;
}
namespace kern {
class ExecutorBackend;
class DeviceMemory;
struct BackendTraits;
}  // namespace kern
namespace transport {
class Transport;
class TransportContext;
class TransportProxy;
class Connection;
}  // namespace transport
class PeerBuffers;
class FlightRecorder;
class CommSelector;
struct CommTopology;
class ScratchPool;
class CountedMemory;
struct RankWait;
}  // namespace tutti

namespace tutti {

struct LaunchCache;   // runtime/launch/launch_cache.h
struct CompiledPlan;  // runtime/launch/comm_launch.h

constexpr int kMaxChannels = 32;

// What every rank tells every other at init.
struct RankInfo {
  uint64_t hostHash;
  uint64_t processToken;
  int32_t pid;
  int32_t device;
  char hostname[64];
  // Settings rank 0 proposes and everyone adopts, so that all ranks tile buffers alike.
  int32_t nchannels;
  int32_t minChannels;  // the fewest the selector may choose (NCCL_MIN_NCHANNELS), <= nchannels
  int32_t nsteps;
  int32_t nworkers;
  int32_t buffersSet;  // NCCL_BUFFSIZE or TUTTI_NSTEPS was set: the slot stands as they make it
  // Its executor serves the one-shot mailboxes (kern::ExecutorBackend::runsMailboxes): only when
  // every rank's does may any use them, or the ranks' selectors would choose differently.
  int32_t mailboxes;
  uint64_t slotBytes;
  // The largest message this rank's executor sends and receives as LL lines (kernels/fifo.h);
  // a connection uses LL only for messages both its ends take so.
  uint64_t llBytes;
};

// A reduction op made by ncclRedOpCreatePreMulSum.
struct UserRedOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  uint64_t hostValue = 0;         // the scalar's bytes, for host-immediate residence
  const void* pointer = nullptr;  // device residence: read when the operation runs
};

// Who this rank is among its peers, and how it reaches them before any transport exists.
struct CommIdentity {
  CommIdentity();  // comm.cpp
  ~CommIdentity();
  int rank = 0;
  int nranks = 1;
  int device = 0;
  std::string backendName;  // the executor backend (kernels/backend.h, chooseBackend)
  CommConfig config;
  std::vector<RankInfo> peers;  // by rank
  // Set once peers holds every rank's identity: a failure notice can arrive (on the bootstrap's
  // listener thread) while init is still filling it in.
  std::atomic<bool> peersKnown{false};
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;
};

// Settings agreed at init (runtime/comm/comm_settings.cpp): the same on every rank, so that all ranks
// cut buffers alike, apart from the waits' own, which fit this host's cores.
struct CommSettings {
  int nchannels = 1;
  int minChannels = 1;
  int nsteps = 8;
  int nworkers = 1;
  size_t slotBytes = 512 * 1024;
  double timeoutSeconds = 300;
  int spin = 200;
  int yields = 50;
  // Executors move the network FIFOs themselves while they wait in launches of at most this many
  // workers (see fitWaitsToHost).
  int drivingWorkers = 1 << 30;
  // Unregistered user buffers read in place by peers that reach any address of this rank, from
  // messages of this size (TUTTI_READ_IN_PLACE, _MIN; this rank's own, as a receiver takes either).
  bool readInPlace = true;
  uint32_t readInPlaceMinBytes = 0;
};

// What the executor runs operations with, and the operations in flight.
struct ExecutorResources {
  explicit ExecutorResources(const ncclComm& comm);  // comm.cpp
  ~ExecutorResources();
  // Where launches run, and where FIFOs and scratch live (kernels/backend.h): made at init.
  // Shared with the device memory it hands out: a FIFO between two ranks of one process lives in
  // the receiver's memory until the sender's end is gone too, which may be after this comm.
  std::shared_ptr<kern::ExecutorBackend> backend;
  // The backend once made, until the communicator's teardown: what fail() aborts, from any thread
  // (a failure notice can arrive while init is still making the backend).
  std::atomic<kern::ExecutorBackend*> abortable{nullptr};
  // By worker: what it waits for while a wait sleeps (kern::ExecutionContext::waitSlot), read by
  // describeWaits from any thread.
  std::array<kern::WaitSlot, kMaxWorkers> waits;
  // What the workers' waits ask of the communicator (kern::ExecutionContext::hooks): for workers
  // that leave the network to the proxy thread, and for those that drive it themselves.
  CommWaitHooks waitHooks, drivingWaitHooks;
  // Scratch memory of the plans' lanes, taken by each launch while it runs.
  std::shared_ptr<ScratchPool> scratch;
  // Bound launches of single operations, kept for the next call of the same shape, which then
  // only points them at its buffers (runtime/launch/launch.cpp).
  std::shared_ptr<LaunchCache> launchCache;
  uint64_t opSeq = 0;                     // operations started so far
  uint32_t collSeq = 0;                   // collectives started so far (the call signatures' number)
  uint32_t allToAllvSeq = 0;              // ncclAllToAllv calls so far (their blocks' signatures' number)
  uint64_t mailboxSeq = 0;                // mailbox operations run so far
  std::atomic<int> pendingStreamJobs{0};  // launches queued on host streams, not yet finished
  std::atomic<int> activeLaunches{0};     // launches running on a caller's thread right now
  // Direct messages (zero-copy) the host executor read in a peer's buffer (tuttiCommZeroCopyReads).
  std::atomic<uint64_t> directReads{0};
  // The last operations, for dumps (runtime/diagnostics/flight_recorder_dump.h); null when none are recorded.
  std::unique_ptr<FlightRecorder> flight;
};

// How this rank reaches its peers (runtime/comm/connection_setup.h).
struct CommLinks {
  CommLinks();  // comm.cpp
  ~CommLinks();
  // Where the FIFOs live: host memory (transports/fifo_memory.h) until init points it at the
  // executor backend's own memory (comm_init.cpp, the backend's memory()), before it makes the
  // first connections.
  std::shared_ptr<kern::DeviceMemory> fifoMemory;
  // The same memory once init has wrapped it to count what this communicator holds there
  // (runtime/comm/counted_memory.h); null before.
  std::shared_ptr<CountedMemory> fifoCounter;
  // The communicator as its transports see it, and its transports in the registry's order
  // (transports/registry.h), made at init.
  std::unique_ptr<transport::TransportContext> transportContext;
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::map<ConnKey, std::unique_ptr<transport::Connection>> connections;
  // The proxy that moves the network connections, once the net transport has opened; else null.
  transport::TransportProxy* proxy() const;
  // User buffers registered with ncclCommRegister (runtime/comm/registrations.h).
  Registrations registrations;
  // Those registered as windows, by rank, and the signal counters of one-sided operations
  // (runtime/comm/windows.h).
  Windows windows;
  // Those mapped by the host's rank processes (runtime/comm/peer_buffers.h): made at init, before the
  // last barrier; `answering` is the same, for the bootstrap's thread that answers peers' questions.
  std::unique_ptr<PeerBuffers> peerBuffers;
  std::atomic<PeerBuffers*> answering{nullptr};
};

// What chooses and builds the plans an operation runs.
struct CommPlanning {
  CommPlanning();  // comm.cpp
  ~CommPlanning();
  // The algorithms this communicator can run (built-ins, then custom plan files).
  plan::AlgorithmRegistry algorithms = plan::builtinAlgorithms();
  // When set (tests), the algorithm used for every collective it serves; the selector's choice
  // for the others. Users steer the selector with NCCL_ALGO instead.
  std::string forcedAlgorithm;
  // Chooses algorithm and channels per operation (runtime/comm/select.h).
  std::unique_ptr<CommSelector> selector;
  // Every node's graph and the channels' rings and trees (runtime/comm/topo_init.h).
  std::unique_ptr<CommTopology> topology;
  // Ranks per node when every node holds a contiguous block of ranks of one size, else 0
  // (hierarchical plans need it).
  int ranksPerNode = 0;
  // Plans by (algorithm, collective, root or peer, ring and tree index of runtime/comm/topo_init.h):
  // built once, then reused; shared with launches still queued on host streams.
  std::map<std::tuple<std::string, int, int, int, int>, std::shared_ptr<const CompiledPlan>> planCache;
  // The selector's last answer for an all-reduce of mailboxChoiceBytes: mailboxes or not.
  size_t mailboxChoiceBytes = SIZE_MAX;
  bool mailboxChoice = false;
};

// The reduction ops made by ncclRedOpCreatePreMulSum.
struct UserRedOps {
  std::mutex mutex;
  std::vector<UserRedOp> ops;  // ncclRedOp_t(ncclNumOps + i)
};

// The notices a rank sends its peers when its user stops a communicator whose init it has
// finished (each is sent only while the communicator is healthy, so never from within init).
// Every rank had entered init's final barrier before that one could leave it, so a peer that
// hears one while still receiving the barrier's last messages finishes init first.
inline constexpr char kRevokeNotice[] = "it revoked the communicator (ncclCommRevoke)";
inline constexpr char kAbortNotice[] = "it called ncclCommAbort";
inline constexpr char kShrinkAbortNotice[] = "it called ncclCommShrink with NCCL_SHRINK_ABORT";
// The constant above that `text` is, or null for any other notice (a failure, which may come
// from within init and must stop it at once).
inline const char* noticeSentAfterInit(const std::string& text) {
  for (const char* notice : {kRevokeNotice, kAbortNotice, kShrinkAbortNotice})
    if (text == notice) return notice;
  return nullptr;
}

// The communicator's error: once set it is unusable (only destroy or abort), and every wait ends.
struct CommErrorState {
  std::atomic<bool> abortFlag{false};
  std::atomic<int> asyncError{ncclSuccess};  // ncclResult_t: what ncclCommGetAsyncError returns
  std::mutex mutex;                          // the recorded error's details:
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  int peer = -1;              // the peer whose connection failed, if that is the cause
  std::mutex diagnosisMutex;  // one diagnosis of a timed-out wait at a time (noticeExecutorFault)
  // ncclCommRevoke ran: the recorded error says so, and once the operations it stopped have ended
  // ncclCommGetAsyncError answers ncclSuccess (NCCL's rule), while every call but shrink, destroy
  // and abort is refused (runtime/comm/comm_shrink.h).
  std::atomic<bool> revoked{false};
  // Set under `mutex` when init has finished. A peer that stopped the communicator after its own
  // init (noticeSentAfterInit) may be heard while this rank still receives the final barrier's
  // last message: the first such notice waits here until then, and lands on a finished
  // communicator.
  bool initFinished = false;
  int deferredNoticeFrom = -1;
  const char* deferredNotice = nullptr;
  // A peer's failure notice heard during a nonblocking init, which reports ncclInProgress until it
  // ends: the notice stops init's waits at once, and init's failure reports it (failInit).
  std::string noticeDuringInit;
};

// Init and end of the handle's life.
struct CommLifecycle {
  std::thread initThread;  // nonblocking init
  double initSeconds = 0;
  bool finalized = false;
  // ncclCommGetUniqueId made an id for ncclCommGrow, which has not consumed it: NCCL allows one
  // such id at a time.
  std::atomic<bool> growIdIssued{false};
  // The ids that ncclCommGrow took from this communicator: each serves one grow. growId: the one
  // ncclCommGetUniqueId made last (unconsumed while growIdIssued).
  std::mutex growMutex;
  ncclUniqueId growId{};
  std::vector<ncclUniqueId> consumedGrowIds;
  // ncclCommSuspend ran and ncclCommResume has not: every call that uses the communicator is
  // refused (runtime/comm/comm_suspend.h). memoryReleased: the suspend released its memory.
  std::atomic<bool> suspended{false};
  std::atomic<bool> memoryReleased{false};
};

}  // namespace tutti

// The C handle (nccl.h's `struct ncclComm`): its state by concern.
struct ncclComm {
  ncclComm();  // comm.cpp: where every member's type is complete
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;
  ~ncclComm();

  tutti::CommIdentity identity;
  tutti::CommSettings settings;
  tutti::ControlBlocks control;  // this rank's and its host's peers' (runtime/comm/control_block.h)
  tutti::ExecutorResources executor{*this};
  tutti::CommLinks links;
  tutti::CommPlanning planning;
  tutti::UserRedOps redops;
  tutti::CommErrorState error;
  tutti::CommLifecycle lifecycle;

  // Records a fatal error: the communicator is unusable from now on (only destroy/abort). The
  // first error is also sent to the other ranks (a failure notice) unless tellPeers is false.
  // peer: the rank whose connection failed, when that is the cause.
  void fail(const tutti::Error& cause, bool tellPeers = true, int peer = -1);
  // Init failed with `error`: records it and tells the other ranks (before this rank's goodbye,
  // which the destructor says after the notice has left), unless a failure came first. Returns
  // what init reports: the first failure (a peer's notice that stopped this rank's wait names the
  // rank and what failed), else `error`.
  tutti::Error failInit(const tutti::Error& error);
  // Init's last step: from now on a peer's revoke notice lands at once, and one that came early
  // lands now.
  void finishInit();
  // A failure notice from another rank. When our own error was that rank's connection closing
  // (it tore its connections down after failing), its notice says why, and replaces it.
  void failFromNotice(int sender, const std::string& text);
  // The bootstrap saw peer's process end (its connection closed without a goodbye): fails the
  // communicator with a Remote error naming it, and tells the other ranks.
  void failFromPeerLost(int peer, const std::string& reason);
  // An executor that runs apart from the caller's threads (a kernel) records why it stopped an
  // operation in its fault record: fails the communicator with those words, the same as a host
  // worker's. Called wherever the communicator's state is read (ncclCommGetAsyncError, every call).
  void noticeExecutorFault();
  std::string describePeer(int peer) const;
  // One line per worker that sleeps in a wait, joined by '\n' ("" when none does): the operation,
  // step, how long, and the peer it waits for. Safe on any thread while the communicator runs.
  std::string describeWaits() const;
  // This rank's answer to a peer's "what do you wait for" (runtime/diagnostics/wait_diagnosis.h), on a thread
  // of the bootstrap.
  std::string answerWaitQuestion() const;
  tutti::RankWait currentWait() const;
  // At a wait's timeout: the root cause found by asking the peers along the chain of waits, or "".
  std::string diagnoseTimeout() const;
  // How long a timed-out wait asks along the chain of waits before its error is final.
  static constexpr double kWaitDiagnosisSeconds = 2.0;
  std::string where() const;  // "rank 3 of 8 (host:pid)"
};

namespace tutti {

int workerOfChannel(const ncclComm* comm, int channel);

// The communicator's nodes: hosts as their host hashes tell them apart (NCCL_HOSTID).
int nodeCount(const ncclComm* comm);

}  // namespace tutti
