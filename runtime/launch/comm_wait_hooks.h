// CommWaitHooks: what an executor's waits ask of the runtime (kernels/wait_hooks.h), answered from
// one communicator: peers named with their hosts, peers' calls looked up in their control blocks,
// and the communicator's net proxy, moved by the workers that may drive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/wait_hooks.h"
#include "nccl.h"

namespace tutti {

namespace transport {
class TransportProxy;
}

// Owned by the communicator (ExecutorResources), two of them: one for workers that leave the
// network to the proxy thread, one for workers that drive it themselves. A context per operation
// then only points at one, and nothing is allocated per operation.
class CommWaitHooks final : public kern::WaitHooks {
 public:
  // drives: whether the workers given these hooks move the net proxy's FIFOs themselves, once the
  // communicator has a net proxy.
  CommWaitHooks(const ncclComm& comm, bool drives) : comm_(comm), drives_(drives) {}

  std::string describePeer(int peer) const override;
  // The peer's call of the same collective number, from its control block, if it is on this host
  // and has reached it.
  std::string probeCall(int peer, uint64_t signature, uint64_t count) const override;
  // Looks the proxy up (CommLinks::proxy) until the net transport has opened: a communicator
  // opens it at the first connection that needs it, which may come after init.
  bool drivesNetwork() const override;
  // Called only after drivesNetwork said true on the same thread, so the proxy is known.
  bool pollNetwork() const override;
  bool networkSendsWaiting() const override;
  void driveNetwork(Drive change) const override;

 private:
  const ncclComm& comm_;
  const bool drives_;
  // The communicator's net proxy once found: it never changes while the communicator runs
  // operations, so every thread that finds it stores the same pointer.
  mutable std::atomic<transport::TransportProxy*> proxy_{nullptr};
};

}  // namespace tutti
