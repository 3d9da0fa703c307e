// WaitHooks: what an executor's waits ask of the layer that launched it — a peer's name for an
// error, whether a peer's call differs, and moving network FIFOs while the worker would otherwise
// spin — as one interface the runtime implements (runtime/launch/comm_wait_hooks.h), since kernels/ may
// not know the communicator or the network proxy. The defaults are a launch with none of these:
// bare rank numbers, no peers' calls to compare, no network to drive.
#pragma once

#include <cstdint>
#include <string>

namespace tutti::kern {

class WaitHooks {
 public:
  constexpr WaitHooks() = default;
  virtual ~WaitHooks() = default;
  WaitHooks(const WaitHooks&) = delete;
  WaitHooks& operator=(const WaitHooks&) = delete;

  // The hooks of a launch that has none: every method's default. What an ExecutionContext points
  // at until it is given others.
  static const WaitHooks& none();

  // Names a peer in errors, "rank 3 (host:pid)". Default: "rank 3".
  virtual std::string describePeer(int peer) const;

  // Answered where peers' calls can be looked up (ranks of this host): once a wait has stalled
  // ExecutionContext::kProbeAfterSeconds, and each second after, the waiting worker asks whether
  // `peer`'s call with the same collective number as `signature` differs; a non-empty answer is
  // the mismatch, in describeCallMismatch's words, and the operation fails with it at once instead
  // of at the timeout. Catches mismatches that leave the ranks waiting on different connections.
  // Default: no answer (""), as where the peer has not reached the call yet.
  virtual std::string probeCall(int peer, uint64_t signature, uint64_t count) const { return {}; }

  // The network, where the worker moves network FIFOs itself while it waits. drivesNetwork says
  // whether it does (asked once per operation; false: the other three are never called).
  // pollNetwork makes one progress pass of the communicator's net proxy, true if a slot moved
  // (NetProxy::tryProgress); it runs on each busy poll of a wait, never once the wait sleeps.
  // driveNetwork brackets the stretch in which the worker does so: Start, then Stop (before a
  // wait sleeps, or on an error: the proxy thread takes the sockets at once) or Release (the
  // operation is done and nothing is left to send: NetProxy::releaseDriving).
  // networkSendsWaiting: whether slots the executor published to network FIFOs are still to be
  // sent (no system call: NetProxy::sendsWaiting); an operation that ends with some makes one
  // more pass for them. Defaults: no network.
  enum class Drive { Start, Stop, Release };
  virtual bool drivesNetwork() const { return false; }
  virtual bool pollNetwork() const { return false; }
  virtual bool networkSendsWaiting() const { return false; }
  virtual void driveNetwork(Drive change) const {}
};

}  // namespace tutti::kern
