// ConnKey: the name both ends give one direction of one connection between two ranks.
#pragma once

#include <tuple>

#include "algorithms/plan.h"

namespace tutti {

// Identifies one direction of one connection to a peer. Both ends name it alike (with `send`
// flipped), and both agree on it through the bootstrap tag of its handshake.
struct ConnKey {
  int peer;
  int channel;
  plan::ConnKind kind;
  int tag;    // the lane's tag: separate FIFOs for separate uses of one peer
  bool send;  // true: we send to peer; false: we receive from peer
  auto tie() const { return std::tuple(peer, channel, int(kind), tag, send); }
  bool operator<(const ConnKey& o) const { return tie() < o.tie(); }
  bool operator==(const ConnKey& o) const { return tie() == o.tie(); }
};

}  // namespace tutti
