// One communicator's share of a launch: its tasks chosen an algorithm, bound to compiled plans,
// channels, tiles, connections and queues, as one work arena (kernels/work.h) that the
// communicator's executor backend runs. bind() binds and lists the connections the launch needs;
// connect() finishes once the group's connections exist.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algorithms/flat_plan.h"
#include "kernels/backend.h"
#include "kernels/work_builder.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "runtime/launch/scratch_pool.h"
#include "runtime/launch/task.h"
#include "transports/transport.h"

namespace tutti {

// A rank's plan for one (algorithm, collective, root, ring, trees), compiled and where the
// executor reads it; built once per communicator (ncclComm::planCache).
struct CompiledPlan {
  plan::RankPlan plan;                       // as the algorithm built it
  std::vector<uint64_t> flat;                // plan::compilePlan(plan)
  const plan::FlatPlan* resident = nullptr;  // flat's bytes, or their copy in device memory
  std::shared_ptr<void> residentCopy;        // owns the device copy
};

class CommLaunch final : public kern::Launch {
 public:
  explicit CommLaunch(ncclComm* comm, cudaStream_t stream) : comm(comm), stream(stream) {}
  ~CommLaunch() override;

  ncclComm* const comm;
  const cudaStream_t stream;
  std::vector<Task> tasks;
  std::optional<Selection> selection;                      // a single operation's, chosen before binding
  std::vector<std::shared_ptr<const CompiledPlan>> plans;  // from the communicator's cache
  bool mailbox = false;  // a one-shot all-reduce through the mailboxes: no lanes, no connections

  // Binds the tasks to plans and lanes and lists the connections they need (keys()).
  void bind();
  const std::vector<ConnKey>& keys() const { return keys_; }
  // Points the lanes at their connections, forms the queues and builds the arena.
  void connect();
  // Points a bound launch of the same shape at a new call's buffers.
  void rebind(const Task& t);

  // kern::Launch
  kern::ExecutorBackend& backend() override { return *comm->executor.backend; }
  kern::LaunchWork& work() override { return kern::launchWorkOf(arena_); }
  size_t scratchBytes() const override { return scratchBytes_; }
  void beforeRun() override;
  void afterRun() override;
  void queued() override;
  void started() override;
  void ended() override;
  kern::ExecutionContext context(int worker) override;
  std::span<const Copy> prologue() const override { return prologue_; }
  bool alone() const override { return mailbox; }
  void runAlone() override;
  void failed(const Error& error) override;
  [[noreturn]] void raise(const Error& error) override;

 private:
  struct BoundLane {
    kern::LaneWork work;
    std::vector<ConnKey> sendKeys, recvKeys;
    size_t llMessageBytes;  // the most one message of its operation may carry; 0: never LL
  };
  kern::OpWork opFor(const Task& t, uint64_t seq);
  // Whether the launch's workers move the network FIFOs themselves while they wait.
  bool workersDriveNetwork() const;

  kern::WorkBuilder builder_;
  std::vector<std::vector<BoundLane>> lanes_;  // [worker], between bind and connect
  std::vector<ConnKey> keys_;
  std::vector<uint64_t> arena_;
  size_t scratchBytes_ = 0;
  ScratchPool::Lease scratch_;
  std::vector<Copy> prologue_;
  std::vector<void*> inputCopies_;  // backend memory: in-place all-to-all inputs
};

// The channels, of at most `nchannels`, that an operation of `bytes` takes where nothing else
// decides: one per 256 KiB.
int channelsForBytes(size_t bytes, int nchannels);

// The algorithm and channel count for a task: a test's forced algorithm, else the selector's
// choice (within NCCL_ALGO and TUTTI_DETERMINISTIC). Point-to-point calls are always direct.
Selection chooseAlgorithm(ncclComm* comm, const Task& t);

// Whether a launch of this one task runs through the mailboxes: a one-shot all-reduce that fits
// them, with every rank on this host and the host backend.
bool viaMailbox(const ncclComm* comm, const Task& t, const Selection& selection);

// The largest message of t when its messages may go as LL lines (NCCL_PROTO allows LL for the
// collective), else 0; and whether the connection to peer by a transport of traits `carrier`
// carries such a message as LL: both ends' executors take it (RankInfo::llBytes) and the transport
// carries LL lines (TransportTraits::carriesLL). The same answer at both ends of a FIFO.
size_t llMessageBytes(const ncclComm* comm, const Task& t);
bool llOnConnection(const ncclComm* comm, int peer, const transport::TransportTraits& carrier, size_t messageBytes);
// "LL", "Simple" or "LL+Simple": how t's messages would travel, over the connections to every peer.
std::string protocolFor(const ncclComm* comm, const Task& t);

// A worker that stopped because the communicator failed elsewhere reports Aborted; the caller
// should get the cause instead: throws the communicator's recorded error if it is another.
void throwRecordedCause(ncclComm* comm);

// The signature of the next call (kernels/work.h, callSignature), taking the collective's number:
// what the peers' calls must agree on. Send and receive are not numbered (each pair is between two
// ranks) and agree on bytes only; a collective ignores the reduction and root where it has none,
// as NCCL does.
// The blocks of ncclAllToAllv are sends and receives marked as such (kern::kPartOfAllToAllv) and numbered by
// the call, so that a block never meets one of another ncclAllToAllv.
uint64_t nextCallSignature(ncclComm* comm, const Task& t, kern::RedKind redKind);

// Which of the call's buffers its peers may read in place (kern::DirectBuffers): those wholly in
// a registered range (runtime/comm/registrations.h, "Zero-copy"), on a backend whose executor reads
// peers' buffers or where peer processes map some (runtime/comm/peer_buffers.h); 0 when nothing is
// registered.
uint8_t directBuffers(ncclComm* comm, const Task& t);

// The executor context of one of the communicator's workers. driveNetwork: whether the worker
// moves the net proxy's FIFOs itself while it waits (the communicator's drivingWaitHooks).
kern::ExecutionContext contextFor(ncclComm* comm, int worker, bool driveNetwork = false);

}  // namespace tutti
