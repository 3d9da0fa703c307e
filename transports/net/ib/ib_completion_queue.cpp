// A completion queue with its completion channel: creation, polling, and arming before a sleep.
#include "transports/net/ib/ib_completion_queue.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace tutti::transport::net::ib {
namespace {
constexpr unsigned kAckBatch = 64;  // ibv_ack_cq_events takes a lock: acknowledge in batches
}  // namespace

IbCompletionQueue::IbCompletionQueue(std::shared_ptr<IbDevice> device, const std::string& peer, int entries)
    : device_(std::move(device)), peer_(peer) {
  IbVerbs& v = device_->verbs();
  channel_ = v.createCompChannel(device_->context());
  if (!channel_)
    throw Error(ErrorCode::System,
                "NET/IB: ibv_create_comp_channel on " + device_->name() + " for " + peer_ + ": " + strerror(errno));
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    int e = errno;
    v.destroyCompChannel(channel_);
    throw Error(ErrorCode::System, "NET/IB: making the completion channel of " + device_->name() + " for " + peer_ +
                                       " nonblocking: " + strerror(e));
  }
  cq_ = v.createCq(device_->context(), entries, this, channel_, 0);
  if (!cq_) {
    int e = errno;
    v.destroyCompChannel(channel_);
    throw Error(ErrorCode::System,
                "NET/IB: ibv_create_cq on " + device_->name() + " for " + peer_ + ": " + strerror(e));
  }
}

IbCompletionQueue::~IbCompletionQueue() {
  IbVerbs& v = device_->verbs();
  // Every event taken must be acknowledged before the CQ goes (rdma-core waits for it).
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (v.getCqEvent(channel_, &cq, &context) == 0) ++unacked_;
  if (unacked_) v.ackCqEvents(cq_, unacked_);
  v.destroyCq(cq_);
  v.destroyCompChannel(channel_);
}

int IbCompletionQueue::poll(ibv_wc* wc, int max) {
  int n = IbVerbs::pollCq(cq_, max, wc);
  if (n > 0 && armed_) {
    armed_ = false;
    ++eventsOwed_;
  }
  return n;
}

bool IbCompletionQueue::armForSleep() {
  IbVerbs& v = device_->verbs();
  // Take the events of armings that were used; none other is expected, so a queue that was never
  // woken costs no system call here.
  bool took = false;
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (eventsOwed_ > 0 && v.getCqEvent(channel_, &cq, &context) == 0) {
    --eventsOwed_;
    ++unacked_;
    took = true;
  }
  if (unacked_ >= kAckBatch) {
    v.ackCqEvents(cq_, unacked_);
    unacked_ = 0;
  }
  // An event taken while armed may have been the current arming's (a completion after the last
  // poll): arm again, and the caller polls again.
  if (took) armed_ = false;
  if (armed_) return false;
  if (int rc = IbVerbs::reqNotifyCq(cq_, 0))
    throw Error(ErrorCode::System,
                "NET/IB: ibv_req_notify_cq on " + device_->name() + " for " + peer_ + ": " + strerror(rc));
  armed_ = true;
  return true;
}

}  // namespace tutti::transport::net::ib
