// The executors' wait hooks of a communicator (comm_wait_hooks.h).
#include "runtime/launch/comm_wait_hooks.h"

#include "kernels/exec_fault.h"
#include "kernels/work.h"
#include "runtime/comm/comm.h"
#include "transports/transport.h"

namespace tutti {

std::string CommWaitHooks::describePeer(int peer) const { return comm_.describePeer(peer); }

std::string CommWaitHooks::probeCall(int peer, uint64_t signature, uint64_t count) const {
  if (kern::signatureColl(signature) == uint32_t(plan::Coll::Send)) return "";  // send and receive are not numbered
  const ControlBlock* block = size_t(peer) < comm_.control.ofRank.size() ? comm_.control.ofRank[size_t(peer)] : nullptr;
  uint64_t theirs = 0, theirCount = 0;
  if (block == nullptr || !block->calls.find(kern::signatureSeq(signature), &theirs, &theirCount)) return "";
  if (theirs == signature && theirCount == count) return "";
  return kern::describeCallMismatch(comm_.describePeer(peer), theirs, theirCount, comm_.identity.rank, signature,
                                    count);
}

bool CommWaitHooks::drivesNetwork() const {
  if (!drives_) return false;
  if (proxy_.load(std::memory_order_acquire) != nullptr) return true;
  transport::TransportProxy* proxy = comm_.links.proxy();
  if (proxy == nullptr) return false;
  proxy_.store(proxy, std::memory_order_release);
  return true;
}

bool CommWaitHooks::pollNetwork() const { return proxy_.load(std::memory_order_relaxed)->tryProgress(); }

bool CommWaitHooks::networkSendsWaiting() const { return proxy_.load(std::memory_order_relaxed)->sendsWaiting(); }

void CommWaitHooks::driveNetwork(Drive change) const {
  transport::TransportProxy* proxy = proxy_.load(std::memory_order_relaxed);
  switch (change) {
    case Drive::Start: proxy->startDriving(); break;
    case Drive::Stop: proxy->stopDriving(); break;
    case Drive::Release: proxy->releaseDriving(); break;
  }
}

}  // namespace tutti
