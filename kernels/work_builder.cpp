// Building a launch's work arena (work_builder.h).
#include "kernels/work_builder.h"

#include <algorithm>
#include <cstring>

namespace tutti::kern {

namespace {
constexpr size_t align8(size_t n) { return (n + 7) / 8 * 8; }
}  // namespace

uint32_t WorkBuilder::addOp(const OpWork& op) {
  ops_.push_back(op);
  return uint32_t(ops_.size() - 1);
}

void WorkBuilder::beginWorker() { workers_.push_back(WorkerWork{uint32_t(queues_.size()), 0}); }

void WorkBuilder::beginQueue() {
  queues_.push_back(QueueWork{uint32_t(lanes_.size()), 0});
  workers_.back().nqueues++;
}

void WorkBuilder::addLane(const LaneWork& lane, const std::vector<ConnEnd>& sends, const std::vector<ConnEnd>& recvs) {
  LaneWork l = lane;
  l.sends = uint32_t(conns_.size());
  conns_.insert(conns_.end(), sends.begin(), sends.end());
  l.recvs = uint32_t(conns_.size());
  conns_.insert(conns_.end(), recvs.begin(), recvs.end());
  l.extents = extents_;
  extents_ += uint32_t(std::max(0, l.plan->lane(l.lane).scratchChunks));
  l.scratch = 0;
  lanes_.push_back(l);
  queues_.back().nlanes++;
}

size_t WorkBuilder::layOutScratch() {
  constexpr size_t kAlign = 64;
  size_t total = 0;
  for (const QueueWork& q : queues_) {
    size_t need = 0;
    for (uint32_t i = q.firstLane; i < q.firstLane + q.nlanes; i++) {
      LaneWork& l = lanes_[i];
      const size_t bytes = size_t(std::max(0, l.plan->lane(l.lane).scratchChunks)) * l.chunkElems * ops_[l.op].eltSize;
      l.scratch = total;
      need = std::max(need, (bytes + kAlign - 1) / kAlign * kAlign);
    }
    total += need;
  }
  return total;
}

std::vector<uint64_t> WorkBuilder::build() const {
  LaunchWork h{};
  h.magic = kLaunchWorkMagic;
  h.nworkers = uint32_t(workers_.size());
  h.nqueues = uint32_t(queues_.size());
  h.nlanes = uint32_t(lanes_.size());
  h.nops = uint32_t(ops_.size());
  h.nconns = uint32_t(conns_.size());
  h.nextents = extents_;
  size_t at = align8(sizeof(LaunchWork));
  auto place = [&at](uint32_t& offset, size_t bytes) {
    offset = uint32_t(at);
    at = align8(at + bytes);
  };
  place(h.workersOffset, workers_.size() * sizeof(WorkerWork));
  place(h.queuesOffset, queues_.size() * sizeof(QueueWork));
  place(h.lanesOffset, lanes_.size() * sizeof(LaneWork));
  place(h.opsOffset, ops_.size() * sizeof(OpWork));
  place(h.connsOffset, conns_.size() * sizeof(ConnEnd));
  h.stateOffset = uint32_t(at);
  place(h.laneStatesOffset, lanes_.size() * sizeof(LaneState));
  place(h.queueStatesOffset, queues_.size() * sizeof(QueueState));
  place(h.extentsOffset, size_t(extents_) * sizeof(uint64_t));
  h.bytes = uint32_t(at);

  std::vector<uint64_t> arena(at / 8, 0);
  char* base = reinterpret_cast<char*>(arena.data());
  std::memcpy(base, &h, sizeof h);
  auto copy = [base](uint32_t offset, const auto& v) {
    if (!v.empty()) std::memcpy(base + offset, v.data(), v.size() * sizeof(v[0]));
  };
  copy(h.workersOffset, workers_);
  copy(h.queuesOffset, queues_);
  copy(h.lanesOffset, lanes_);
  copy(h.opsOffset, ops_);
  copy(h.connsOffset, conns_);
  return arena;
}

}  // namespace tutti::kern
