// Whether a pair of ranks may connect peer to peer, as the p2p transport (processes of a host) and
// the local transport (rank threads of a process) both ask it: the topology's decision
// (topology/p2p_level.h) on the pair's GPUs and the variables, with the INFO line that says why and
// in which mode (write; read: the Simple slots in the sender's memory; copy: NCCL_P2P_USE_CUDA_MEMCPY,
// the copy engine moves the messages), once per pair.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "topology/p2p_level.h"
#include "transports/transport.h"

namespace tutti::transport::p2p {

class P2pChoice {
 public:
  // `transport`: the asking transport's name, for the log lines.
  P2pChoice(TransportContext& context, const char* transport) : context_(context), transport_(transport) {}

  // The decision for the pair. The first time a pair is asked about, an INFO line (subsystem P2P)
  // says whether it connects peer to peer, why, and in which mode: read mode (NCCL_P2P_READ_ENABLE,
  // or NCCL's default, NVLink between compute capability 8.0 GPUs), where the receiver reads the
  // Simple slots from the sender's memory, or write mode. NCCL_P2P_USE_CUDA_MEMCPY=1 asks
  // for copy mode, which leaves read mode out. Throws InvalidUsage for a malformed NCCL_P2P_LEVEL.
  topo::P2pDecision decide(const PeerPair& pair) const;
  // Whether a pair the transport connects takes read mode: the decision above, without its log
  // lines (a connection's offer asks again for the pair that canConnect explained).
  bool readMode(const PeerPair& pair) const;
  // Whether its messages cross by the copy engine (NCCL_P2P_USE_CUDA_MEMCPY).
  bool copyMode(const PeerPair& pair) const;

 private:
  TransportContext& context_;
  const char* transport_;
  mutable std::mutex mutex_;
  mutable std::set<std::pair<int, int>> explained_;
};

}  // namespace tutti::transport::p2p
