// The communicator's teardown, and the small questions about it every layer above asks.
#include "runtime/comm.h"

#include <set>

namespace tutti {

int workerOfChannel(const ncclComm* comm, int channel) { return channel % comm->nworkers; }

int nodeCount(const ncclComm* comm) {
  std::set<uint64_t> hosts;
  for (const RankInfo& p : comm->peers) hosts.insert(p.hostHash);
  return int(hosts.size());
}

}  // namespace tutti

ncclComm::~ncclComm() {
  // A healthy communicator may still have our last sends queued in the proxy: let them leave.
  if (tutti::TransportProxy* p = proxy(); p != nullptr && !abortFlag.load() && asyncError.load() == ncclSuccess) p->drain(timeoutSeconds);
  abortFlag.store(true);
  if (initThread.joinable()) initThread.join();
  if (bootstrap) {
    // Our failure notice leaves before our connections close, so peers learn the cause rather
    // than just "connection closed"; then no notice may reach a comm being torn down.
    bootstrap->flushNotices();
    bootstrap->setNoticeHandler(nullptr);
    bootstrap->setPeerLostHandler(nullptr);
  }
  workers.reset();
  transports.clear();  // the net proxy stops before the bells it rings go
  connections.clear();
  peerControlSegments.clear();
  controlSegment.reset();
  bootstrap.reset();
  transportContext.reset();
}

tutti::TransportProxy* ncclComm::proxy() const {
  for (const auto& transport : transports)
    if (tutti::TransportProxy* p = transport->proxy()) return p;
  return nullptr;
}
