// The p2p decision as the transports take it (see p2p_choice.h).
#include "transports/p2p/p2p_choice.h"

#include <algorithm>

#include "base/log.h"

namespace tutti::transport::p2p {

topo::P2pDecision P2pChoice::decide(const PeerPair& pair) const {
  const topo::P2pSettings settings = topo::p2pSettingsFromEnvironment();
  topo::P2pDecision decision = topo::decideP2p(pair.gpus, settings);
  const std::pair<int, int> key(std::min(pair.ranks[0], pair.ranks[1]), std::max(pair.ranks[0], pair.ranks[1]));
  bool explain = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    explain = explained_.insert(key).second;
  }
  if (explain) {
    std::string mode;
    if (decision.allowed && settings.useCudaMemcpy)
      mode =
          "; copy mode (NCCL_P2P_USE_CUDA_MEMCPY: the sender's executor writes a staging FIFO in its own memory, and a "
          "proxy "
          "thread copies each message into the receiver's by the copy engine)";
    else if (decision.allowed && decision.read)
      mode = std::string("; read mode (the receiver reads the Simple slots from the sender's memory), by ") +
             (settings.readEnable != -2 ? "NCCL_P2P_READ_ENABLE"
                                        : "NCCL's default for NVLink between compute capability 8.0 GPUs");
    else if (decision.allowed)
      mode = "; write mode (the sender writes into the receiver's FIFO)";
    TUTTI_INFO(log::P2p, "%s: %s: rank %d and rank %d %s: %s%s", context_.where().c_str(), transport_, pair.ranks[0],
               pair.ranks[1], decision.allowed ? "connect peer to peer" : "do not connect peer to peer",
               decision.reason.c_str(), mode.c_str());
  }
  return decision;
}

bool P2pChoice::copyMode(const PeerPair& pair) const {
  const topo::P2pSettings settings = topo::p2pSettingsFromEnvironment();
  return settings.useCudaMemcpy && topo::decideP2p(pair.gpus, settings).allowed;
}

bool P2pChoice::readMode(const PeerPair& pair) const {
  const topo::P2pDecision decision = topo::decideP2p(pair.gpus, topo::p2pSettingsFromEnvironment());
  return decision.allowed && decision.read;
}

}  // namespace tutti::transport::p2p
