// The communicator's teardown, and the small questions about it every layer above asks.
#include "runtime/comm/comm.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/counted_memory.h"
#include "runtime/comm/peer_buffers.h"
#include "runtime/comm/select.h"
#include "runtime/comm/topo_init.h"
#include "runtime/diagnostics/flight_recorder.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/launch_cache.h"
#include "runtime/launch/scratch_pool.h"
#include "transports/fifo_memory.h"
#include "transports/transport.h"

namespace tutti {

// The state's special members live here, where the types it holds by pointer are complete.
CommIdentity::CommIdentity() = default;
CommIdentity::~CommIdentity() = default;
ExecutorResources::ExecutorResources(const ncclComm& comm)
    : waitHooks(comm, false), drivingWaitHooks(comm, true), scratch(std::make_shared<ScratchPool>()) {}
ExecutorResources::~ExecutorResources() = default;
CommLinks::CommLinks() : fifoMemory(transport::hostFifoMemory()) {}
CommLinks::~CommLinks() = default;
CommPlanning::CommPlanning() = default;
CommPlanning::~CommPlanning() = default;

int workerOfChannel(const ncclComm* comm, int channel) { return channel % comm->settings.nworkers; }

int nodeCount(const ncclComm* comm) {
  std::set<uint64_t> hosts;
  for (const RankInfo& p : comm->identity.peers) hosts.insert(p.hostHash);
  return int(hosts.size());
}

}  // namespace tutti

ncclComm::ncclComm() = default;

ncclComm::~ncclComm() {
  // A healthy communicator may still have our last sends with a transport's thread (the net
  // proxy, a copy thread): let them leave before the abort flag stops those threads.
  // One deadline for all of them, not TUTTI_TIMEOUT each.
  if (!error.abortFlag.load() && error.asyncError.load() == ncclSuccess) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(settings.timeoutSeconds);
    for (const auto& transport : links.transports)
      transport->drainSends(
          std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count()));
  }
  error.abortFlag.store(true);
  if (lifecycle.initThread.joinable()) lifecycle.initThread.join();
  if (identity.bootstrap) {
    // Our failure notice leaves before our connections close, so peers learn the cause rather
    // than just "connection closed"; then no notice may reach a comm being torn down.
    identity.bootstrap->flushNotices();
    identity.bootstrap->setNoticeHandler(nullptr);
    identity.bootstrap->setPeerLostHandler(nullptr);
    identity.bootstrap->setAnswerer(nullptr);
  }
  executor.flight.reset();  // first: a dump on a signal reads the communicator until then
  // Launches and plans hold the backend's memory, as connections do: they go before it.
  executor.launchCache.reset();
  planning.planCache.clear();
  links.answering.store(nullptr);
  links.peerBuffers.reset();  // the peers' mappings and the tables, in the backend's memory
  links.transports.clear();   // the net proxy stops before the bells it rings go
  links.connections.clear();
  executor.abortable.store(nullptr);
  links.fifoMemory.reset();  // the backend goes here, unless a FIFO a peer still holds keeps it
  links.fifoCounter.reset();
  executor.backend.reset();
  control.peerSegments.clear();
  control.ownSegment.reset();
  identity.bootstrap.reset();
  links.transportContext.reset();
}

namespace tutti {

transport::TransportProxy* CommLinks::proxy() const {
  for (const auto& transport : transports)
    if (transport::TransportProxy* p = transport->proxy()) return p;
  return nullptr;
}

}  // namespace tutti
