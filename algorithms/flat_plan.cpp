// Compiling a rank's plan into its flat form (flat_plan.h).
#include "algorithms/flat_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/lane.h"
#include "base/error.h"

namespace tutti::plan {

namespace {

constexpr size_t align8(size_t n) { return (n + 7) / 8 * 8; }

[[noreturn]] void tooLarge(const RankPlan& plan, const std::string& what) {
  throw Error(ErrorCode::InvalidUsage,
              "algorithm \"" + plan.algorithm + "\": " + what + " (a compiled plan's fixed limit)");
}

}  // namespace

std::vector<uint64_t> compilePlan(const RankPlan& plan) {
  size_t nsteps = 0, npeers = 0;
  if (plan.lanes.size() > kMaxPlanLanes)
    tooLarge(plan, std::to_string(plan.lanes.size()) + " lanes, more than " + std::to_string(kMaxPlanLanes));
  for (size_t l = 0; l < plan.lanes.size(); l++) {
    const LaneSpec& lane = plan.lanes[l];
    if (lane.sendPeers.size() > kMaxLanePeers || lane.recvPeers.size() > kMaxLanePeers)
      tooLarge(plan, "lane " + std::to_string(l) + " has " +
                         std::to_string(std::max(lane.sendPeers.size(), lane.recvPeers.size())) +
                         " peers in one direction, more than " + std::to_string(kMaxLanePeers));
    nsteps += lane.steps.size();
    npeers += lane.sendPeers.size() + lane.recvPeers.size();
  }
  if (nsteps > kMaxPlanSteps)
    tooLarge(plan, std::to_string(nsteps) + " steps, more than " + std::to_string(kMaxPlanSteps));

  const size_t lanesOffset = align8(sizeof(FlatPlan));
  const size_t stepsOffset = align8(lanesOffset + plan.lanes.size() * sizeof(FlatLane));
  const size_t peersOffset = align8(stepsOffset + nsteps * sizeof(Step));
  const size_t bytes = align8(peersOffset + npeers * sizeof(int32_t));
  if (bytes > UINT32_MAX) tooLarge(plan, std::to_string(bytes) + " bytes");

  std::vector<uint64_t> arena(bytes / 8, 0);
  char* base = reinterpret_cast<char*>(arena.data());
  FlatPlan header{};
  header.magic = kFlatPlanMagic;
  header.bytes = uint32_t(bytes);
  header.nlanes = uint32_t(plan.lanes.size());
  header.nsteps = uint32_t(nsteps);
  header.npeers = uint32_t(npeers);
  header.lanesOffset = uint32_t(lanesOffset);
  header.stepsOffset = uint32_t(stepsOffset);
  header.peersOffset = uint32_t(peersOffset);
  header.joinWidth = uint32_t(joinWidth(plan));
  std::strncpy(header.algorithm, plan.algorithm.c_str(), kAlgorithmNameBytes - 1);
  std::memcpy(base, &header, sizeof header);

  uint32_t step = 0, peer = 0;
  for (size_t l = 0; l < plan.lanes.size(); l++) {
    const LaneSpec& spec = plan.lanes[l];
    FlatLane lane{};
    lane.kind = spec.kind;
    lane.layout = spec.layout;
    lane.tag = spec.tag;
    lane.tileChunks = spec.tileChunks;
    lane.scratchChunks = spec.scratchChunks;
    lane.spread = spec.spread;
    lane.firstStep = step;
    lane.nsteps = uint32_t(spec.steps.size());
    if (!spec.steps.empty())
      std::memcpy(base + stepsOffset + step * sizeof(Step), spec.steps.data(), spec.steps.size() * sizeof(Step));
    step += lane.nsteps;
    lane.firstSendPeer = peer;
    lane.nsendPeers = uint32_t(spec.sendPeers.size());
    for (int p : spec.sendPeers) std::memcpy(base + peersOffset + sizeof(int32_t) * peer++, &p, sizeof(int32_t));
    lane.firstRecvPeer = peer;
    lane.nrecvPeers = uint32_t(spec.recvPeers.size());
    for (int p : spec.recvPeers) std::memcpy(base + peersOffset + sizeof(int32_t) * peer++, &p, sizeof(int32_t));
    std::memcpy(base + lanesOffset + l * sizeof(FlatLane), &lane, sizeof lane);
  }
  return arena;
}

}  // namespace tutti::plan
