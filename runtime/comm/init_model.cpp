// Init as a model (see init_model.h).
#include "runtime/comm/init_model.h"

#include <algorithm>

#include "bootstrap/wire.h"
#include "runtime/comm/comm.h"
#include "transports/segment.h"
#include "transports/transport.h"

namespace tutti {
namespace {

int64_t log2Ceil(int64_t n) {
  int64_t rounds = 0;
  for (int64_t d = 1; d < n; d *= 2) rounds++;
  return rounds;
}

// Bruck over n ranks with b bytes from each: ceil(log2 n) rounds; a rank receives the n - 1
// other blocks and, over the rounds, sends as many.
InitExchange allGather(const std::string& name, int64_t n, double bytesPerRank) {
  InitExchange e{name, "allGather", log2Ceil(n), 0, 0, 0};
  e.bytesIn = e.bytesOut = double(n - 1) * bytesPerRank;
  return e;
}

InitExchange barrier(const std::string& name, int64_t n) { return InitExchange{name, "barrier", log2Ceil(n), 0, 0, 0}; }

}  // namespace

std::vector<InitExchange> modelInit(const InitShape& s) {
  const int64_t n = std::max<int64_t>(1, s.nranks);
  const int64_t nodes = std::clamp<int64_t>(s.nodes, 1, n);
  const int64_t perRoot = (n + std::max(1, s.rootsCount) - 1) / std::max(1, s.rootsCount);
  std::vector<InitExchange> out;

  // Each rank registers with its root, which answers with its neighbours' listeners; with several
  // roots, root 0 sends each other root the whole table. Then the ranks exchange every address.
  const int nClamped = int(std::min<int64_t>(n, INT32_MAX));
  InitExchange join{"join", "join", 1, 0, 0, 0};
  join.bytesOut = double(sizeof(bootstrap::wire::RegistrationPayload));
  join.bytesIn = double(bootstrap::wire::neighbourTablePayloadMaxBytes(nClamped));
  join.rootBytes = double(perRoot) * (join.bytesOut + join.bytesIn) +
                   double(std::max(0, s.rootsCount - 1)) * double(bootstrap::wire::tablePayloadBytes(nClamped));
  out.push_back(join);
  out.push_back(allGather("listener addresses", n, double(SocketAddress::kWireBytes)));

  out.push_back(allGather("rank information", n, double(sizeof(RankInfo))));
  InitExchange control = allGather("control blocks", n, double(sizeof(transport::SegmentDescriptor)));
  control.rounds += log2Ceil(n);  // the barrier after every peer mapped ours
  out.push_back(control);
  if (nodes > 1) out.push_back(allGather("layout (network identities)", n, double(kNetIdentityBytes)));

  // Sizes from every rank, then each node's graph from its lowest rank only.
  InitExchange topology = allGather("topology", n, 8.0);
  topology.kind = "allGather + allGatherV";
  topology.rounds *= 2;
  topology.bytesIn += double(nodes - 1) * double(s.topologyBytes);
  topology.bytesOut += double(nodes - 1) * double(s.topologyBytes);
  out.push_back(topology);

  InitExchange calibration = allGather("calibration", n, double(calibrationSampleBytes()));
  calibration.rounds += log2Ceil(n);  // the barrier that starts the host's ranks together
  out.push_back(calibration);
  if (nodes > 1) {
    InitExchange network = allGather("calibration (network)", n, 8.0);
    network.kind = "round trips + allGather";
    network.rounds += 2 * 40;  // the pairs' round trips (calibrate.cpp: 8 warm-up, 32 timed)
    out.push_back(network);
  }

  // One offer per ring connection this rank receives, over the bootstrap to its ring neighbours.
  InitExchange connect{"ring connections", "handshakes", 1, 0, 0, 0};
  connect.bytesIn = connect.bytesOut = double(s.channels) * double(transport::kConnectionOfferBytes);
  if (n > 1) out.push_back(connect);
  out.push_back(barrier("final barrier", n));
  return out;
}

}  // namespace tutti
