// The host executor: runs the lanes of one or more operations on host threads, moving bytes
// through FIFOs with the Simple protocol and reducing with the shared functors.
//
// How a step is sized: by the chunk of the user buffer it names (its source if that is the
// input or output, else its destination). A step between scratch and FIFOs only moves what its
// scratch source holds, or, with no source, what arrived; a scratch chunk holds what was last
// written to it in the tile (at most one chunk, chunkElems elements). So scratch follows the
// chunks it stages, including the shorter chunks at the end of a range. A joined run of steps
// (plan.h) is one message: the executor runs it whole once both FIFOs allow, each step sized as
// above, what arrived being its part's size from the message's table; the lane's chunk must be
// cut so that the run fits one slot (runtime/launch.cpp uses plan::joinedChunkBytes).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/lane.h"
#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "kernels/host_reduce.h"
#include "kernels/wait_slot.h"
#include "nccl.h"

namespace tutti::kern {

// One end of one connection, as the executor sees it.
struct FifoEnd {
  FifoHeader* fifo = nullptr;  // the FIFO (owned by the receiving rank)
  Bell* peerBell = nullptr;    // rung after publishing (send side) or freeing (receive side); null: the peer polls
  int peer = -1;
};

// An operation's arguments, bound at launch.
struct OpBinding {
  const char* name = "";     // "AllReduce", ...
  uint64_t seq = 0;          // the operation's number on its communicator
  const void* in = nullptr;
  void* out = nullptr;
  size_t count = 0;          // elements of the whole range (Split, Whole) or of one block (Blocks)
  ncclDataType_t type = ncclFloat32;
  size_t eltSize = 4;
  RedOp redop;
  int nranks = 1;
};

// One lane of one operation on one channel: a plan lane bound to a range, connections and
// scratch memory.
struct Lane {
  const plan::LaneSpec* spec = nullptr;
  const OpBinding* op = nullptr;
  int channel = 0;
  size_t begin = 0, end = 0;  // element range (within each block for Blocks)
  size_t chunkElems = 0;      // elements per chunk (a joined run of them fits one FIFO slot); each scratch chunk holds this many
  std::vector<FifoEnd> sends, recvs;  // by Step::sendConn / Step::recvConn (the spec's peers, in order)
  char* scratch = nullptr;            // spec->scratchChunks chunks of chunkElems elements
  std::vector<size_t> scratchElems;   // elements last written to each scratch chunk
  // Set by prepareLane.
  size_t tileChunks = 1;  // chunks per tile (Split: the spec's, 0 meaning nranks; else 1)
  size_t tileChunk = 0;   // Split: elements per chunk in the current tile
  // Progress.
  uint64_t tile = 0, ntiles = 0;
  uint32_t step = 0;
};

// Lanes that share connections run one after another; queues run concurrently.
struct LaneQueue {
  std::vector<Lane> lanes;
  size_t current = 0;
};

struct ExecutionContext {
  Bell* bell = nullptr;                        // this worker's bell
  const std::atomic<bool>* abortFlag = nullptr;
  double timeoutSeconds = 300;                 // with no progress at all
  int spin = 200;                              // busy polls before yielding
  int yields = 50;                             // polls that yield the CPU before sleeping
  int rank = 0;
  // Names a peer in errors, "rank 3 (host:pid)": peerNamer(peerNamerArg, peer). A plain function
  // pointer, so that making a context per operation costs nothing. Unset: "rank 3".
  std::string (*peerNamer)(const void* arg, int peer) = nullptr;
  const void* peerNamerArg = nullptr;
  std::string describePeer(int peer) const { return peerNamer ? peerNamer(peerNamerArg, peer) : "rank " + std::to_string(peer); }
  // Where the worker publishes what it waits for while a wait sleeps (and clears it when it moves
  // on or the operation ends), for readers on other threads. Unset: nothing is published.
  WaitSlot* waitSlot = nullptr;
  // Set where the worker moves network FIFOs itself while it waits: pollNetwork makes one
  // progress pass of the communicator's net proxy, true if a slot moved (NetProxy::tryProgress);
  // it runs on each busy poll of a wait, never once the wait sleeps. driveNetwork brackets the
  // stretch in which the worker does so: Start, then Stop (before a wait sleeps, or on an error:
  // the proxy thread takes the sockets at once) or Release (the operation is done and nothing is
  // left to send: NetProxy::releaseDriving).
  enum class Drive { Start, Stop, Release };
  bool (*pollNetwork)(void* arg) = nullptr;
  // Whether slots the executor published to network FIFOs are still to be sent (no system call:
  // NetProxy::sendsWaiting). An operation that ends with some makes one more pass for them;
  // unset, it makes none.
  bool (*networkSendsWaiting)(void* arg) = nullptr;
  void (*driveNetwork)(void* arg, Drive change) = nullptr;
  void* networkArg = nullptr;
};

// The idle poll number `idle` (from 0) of a wait: the first ctx.spin polls pause, the next
// ctx.yields yield the core (ranks often outnumber cores: the peer waited for may need this one,
// and a yield costs far less than a futex sleep and wake-up). Returns false once both are spent:
// the wait should sleep.
bool idlePoll(int idle, const ExecutionContext& ctx);

// Whether a step of this kind takes a slot from the receive FIFO / fills one of the send FIFO.
bool stepReceives(plan::Op op);
bool stepSends(plan::Op op);

// Checks that every index a plan's steps use is in range (connections, chunks, blocks, scratch
// chunks) and that each step names the buffers it needs, so the executor can trust them.
// Throws tutti::Error (InvalidUsage) naming the algorithm, lane and step.
void checkPlanBounds(const plan::RankPlan& plan, int rank, int nranks);

// Sets ntiles (and resets progress) from the lane's range, layout and chunk size.
void prepareLane(Lane& lane);

// Runs every queue to completion. Throws tutti::Error on a timeout (naming the peer waited
// for), an abort, or a size mismatch between the ranks' calls.
void runQueues(std::vector<LaneQueue>& queues, const ExecutionContext& context);

// Persistent worker threads of one communicator: worker i > 0 runs on its own thread; worker 0
// is run by whoever launches (the caller, or a host stream's thread).
class HostWorkerPool {
 public:
  explicit HostWorkerPool(int threads);
  ~HostWorkerPool();
  HostWorkerPool(const HostWorkerPool&) = delete;
  HostWorkerPool& operator=(const HostWorkerPool&) = delete;

  int size() const { return int(threads_.size()); }
  // Starts job on thread i (0-based, i < size()); does not wait.
  void start(int i, std::function<void()> job);
  // Waits until every started job has finished; rethrows the first failure.
  void wait();

 private:
  struct Slot {
    std::function<void()> job;
    bool busy = false;
    std::exception_ptr error;
  };
  void loop(int i);

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace tutti::kern
