// Building a launch's work arena (kernels/work.h) on the host: the runtime binds operations,
// lanes, connections and queues here, then hands the arena to the executor backend, which runs it
// in host memory or copies it to a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/work.h"

namespace tutti::kern {

class WorkBuilder {
 public:
  // Adds an operation; returns its index.
  uint32_t addOp(const OpWork& op);
  // Starts the next worker (a host thread or a thread block); queues added from now on are its.
  void beginWorker();
  // Starts a queue of the current worker; lanes added from now on run in it, in order.
  void beginQueue();
  // Adds a lane to the current queue. sends/recvs: its connections in the plan lane's peer order.
  // Its scratch offset is set by layOutScratch.
  void addLane(const LaneWork& lane, const std::vector<ConnEnd>& sends, const std::vector<ConnEnd>& recvs);

  // Gives each queue its own part of the launch's scratch (lanes of one queue run one after
  // another and share it), each lane its scratchChunks * chunkElems elements; returns the bytes.
  size_t layOutScratch();

  // The arena, 8-byte aligned; its scratch pointer is left null (the executor sets it).
  std::vector<uint64_t> build() const;

  size_t workers() const { return workers_.size(); }
  size_t lanes() const { return lanes_.size(); }

 private:
  std::vector<OpWork> ops_;
  std::vector<WorkerWork> workers_;
  std::vector<QueueWork> queues_;
  std::vector<LaneWork> lanes_;
  std::vector<ConnEnd> conns_;
  uint32_t extents_ = 0;
};

// The launch in an arena built by WorkBuilder.
inline LaunchWork& launchWorkOf(std::vector<uint64_t>& arena) { return *reinterpret_cast<LaunchWork*>(arena.data()); }

}  // namespace tutti::kern
