// The communicator: identity, peers, settings agreed at init, the host executor's resources
// (bells, worker threads, connections), user reduction ops, and the error state.
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

#include "algorithms/lane.h"
#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "base/error.h"
#include "kernels/bell.h"
#include "kernels/host_executor.h"
#include "kernels/host_reduce.h"
#include "kernels/mailbox.h"
#include "kernels/wait_slot.h"
#include "nccl.h"
#include "runtime/bootstrap.h"
#include "runtime/config.h"
#include "runtime/connection_setup.h"
#include "runtime/control_block.h"
#include "runtime/scratch_pool.h"
#include "runtime/select.h"
#include "runtime/topo_init.h"
#include "transports/fifo_memory.h"
#include "transports/segment.h"
#include "transports/transport.h"

namespace tutti {

struct LaunchCache;  // runtime/launch.cpp

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
  uint64_t slotBytes;
};

// A reduction op made by ncclRedOpCreatePreMulSum.
struct UserRedOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  uint64_t hostValue = 0;        // the scalar's bytes, for host-immediate residence
  const void* pointer = nullptr; // device residence: read when the operation runs
};

}  // namespace tutti

// The C handle (nccl.h's `struct ncclComm`).
struct ncclComm {
  ncclComm() = default;
  ncclComm(const ncclComm&) = delete;
  ncclComm& operator=(const ncclComm&) = delete;
  ~ncclComm();

  int rank = 0;
  int nranks = 1;
  int device = 0;
  tutti::CommConfig config;
  std::vector<tutti::RankInfo> peers;
  // Set once peers holds every rank's identity: a failure notice can arrive (on the bootstrap's
  // listener thread) while init is still filling it in.
  std::atomic<bool> peersKnown{false};
  std::unique_ptr<tutti::Bootstrap> bootstrap;

  // Settings agreed at init.
  int nchannels = 1;
  int minChannels = 1;
  int nsteps = 8;
  int nworkers = 1;
  size_t slotBytes = 512 * 1024;
  double timeoutSeconds = 300;
  int spin = 200;
  int yields = 50;
  // Executors move the network FIFOs themselves while they wait in launches of at most this many
  // workers (see comm.cpp).
  int drivingWorkers = 1 << 30;

  // Executor resources.
  std::unique_ptr<tutti::Segment> controlSegment;
  tutti::ControlBlock* control = nullptr;
  std::vector<std::unique_ptr<tutti::Segment>> peerControlSegments;  // by rank; empty for self
  std::vector<tutti::ControlBlock*> peerControl;                     // by rank; null: other host
  std::unique_ptr<tutti::kern::HostWorkerPool> workers;
  // By worker: what it waits for while a wait sleeps (kern::ExecutionContext::waitSlot), read by
  // describeWaits from any thread.
  std::array<tutti::kern::WaitSlot, tutti::kMaxWorkers> waits;
  // Where the FIFOs live: host memory for now. The hook a device executor backend points at its
  // own memory, before init makes the first connections.
  std::shared_ptr<tutti::FifoMemory> fifoMemory = tutti::hostFifoMemory();
  // The communicator as its transports see it, and its transports in the registry's order
  // (transports/registry.h), made at init.
  std::unique_ptr<tutti::TransportContext> transportContext;
  std::vector<std::unique_ptr<tutti::Transport>> transports;
  std::map<tutti::ConnKey, std::unique_ptr<tutti::Connection>> connections;
  // The proxy that moves the network connections, once the net transport has opened; else null.
  tutti::TransportProxy* proxy() const;
  // One-shot all-reduces through the control blocks' mailboxes, when every rank is on this host.
  bool mailboxesMapped = false;
  std::vector<tutti::kern::Mailbox*> mailboxes[2];  // [operation % 2][rank]
  std::vector<tutti::kern::Bell*> mailboxBells;     // [rank]: its worker 0's bell
  uint64_t mailboxSeq = 0;                          // mailbox operations run so far
  // The selector's last answer for an all-reduce of mailboxChoiceBytes: mailboxes or not.
  size_t mailboxChoiceBytes = SIZE_MAX;
  bool mailboxChoice = false;

  // Scratch memory of the plans' lanes, taken by each launch while it runs.
  std::shared_ptr<tutti::ScratchPool> scratch = std::make_shared<tutti::ScratchPool>();

  // The algorithms this communicator can run (built-ins, then custom plan files).
  tutti::plan::AlgorithmRegistry algorithms = tutti::plan::builtinAlgorithms();
  // When set (tests), the algorithm used for every collective it serves; the selector's choice
  // for the others. Users steer the selector with NCCL_ALGO instead.
  std::string forcedAlgorithm;
  // Chooses algorithm and channels per operation (runtime/select.h).
  std::unique_ptr<tutti::CommSelector> selector;
  // Every node's graph and the channels' rings and trees (runtime/topo_init.h).
  std::unique_ptr<tutti::CommTopology> topology;
  // Ranks per node when every node holds a contiguous block of ranks of one size, else 0
  // (hierarchical plans need it).
  int ranksPerNode = 0;
  // Plans by (algorithm, collective, root or peer, ring and tree index of runtime/topo_init.h):
  // built once, then reused; shared with launches still queued on host streams.
  std::map<std::tuple<std::string, int, int, int, int>, std::shared_ptr<const tutti::plan::RankPlan>> planCache;
  // Bound launches of single operations, kept for the next call of the same shape, which then
  // only points them at its buffers (runtime/launch.cpp).
  std::shared_ptr<tutti::LaunchCache> launchCache;

  std::mutex redopMutex;
  std::vector<tutti::UserRedOp> redops;  // ncclRedOp_t(ncclNumOps + i)

  uint64_t opSeq = 0;
  std::atomic<int> pendingStreamJobs{0};  // launches queued on host streams, not yet finished
  std::atomic<int> activeLaunches{0};     // launches running on a caller's thread right now
  std::atomic<bool> abortFlag{false};
  std::atomic<int> asyncError{ncclSuccess};
  tutti::ErrorCode asyncErrorCode = tutti::ErrorCode::Internal;  // of the recorded error, under errorMutex
  std::mutex errorMutex;
  std::string asyncErrorMessage;
  int asyncErrorPeer = -1;          // under errorMutex: the peer whose connection failed, if any
  bool destroyed = false;
  bool finalized = false;
  std::thread initThread;  // nonblocking init
  double initSeconds = 0;

  // Records a fatal error: the communicator is unusable from now on (only destroy/abort). The
  // first error is also sent to the other ranks (a failure notice) unless tellPeers is false.
  // peer: the rank whose connection failed, when that is the cause.
  void fail(const tutti::Error& error, bool tellPeers = true, int peer = -1);
  // A failure notice from another rank. When our own error was that rank's connection closing
  // (it tore its connections down after failing), its notice says why, and replaces it.
  void failFromNotice(int sender, const std::string& text);
  // The bootstrap saw peer's process end (its connection closed without a goodbye): fails the
  // communicator with a Remote error naming it, and tells the other ranks.
  void failFromPeerLost(int peer, const std::string& reason);
  std::string describePeer(int peer) const;
  // One line per worker that sleeps in a wait, joined by '\n' ("" when none does): the operation,
  // step, how long, and the peer it waits for. Safe on any thread while the communicator runs.
  std::string describeWaits() const;
  std::string where() const;  // "rank 3 of 8 (host:pid)"
};

namespace tutti {

// Joins the job and builds the communicator's resources. Throws on failure.
void initCommunicator(ncclComm* comm, const ncclUniqueId* ids, int nIds, int rank, int nranks, int device);

int workerOfChannel(const ncclComm* comm, int channel);

// Settings at init (runtime/comm_settings.cpp): this rank's proposal, the adoption of rank 0's
// by every rank, and the waits fitted to the host's cores once the selector knows them.
void proposeSettings(const ncclComm* comm, RankInfo* me);
void adoptSettings(ncclComm* comm);
void fitWaitsToHost(ncclComm* comm);

// The communicator's nodes: hosts as their host hashes tell them apart (NCCL_HOSTID).
int nodeCount(const ncclComm* comm);

// Live communicators, so a destroyed handle is recognised instead of dereferenced.
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);
bool isLiveComm(const ncclComm* comm);

}  // namespace tutti
