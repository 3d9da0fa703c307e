// A completion queue with its completion channel, so that a thread with nothing to do can sleep on
// the channel's descriptor instead of polling the queue.
//
// Arming: a CQ raises one event per ibv_req_notify_cq, for a completion that arrives after it. So
// before sleeping the owner arms (armForSleep) and then polls once more: a completion that came
// between the last poll and the arming is seen by that poll, any later one wakes the descriptor.
// Events are taken (and acknowledged in batches) only when re-arming and only for armings that
// were used, so a busy queue costs no system call; the descriptor is nonblocking, so taking them
// never waits.
#pragma once

#include <memory>
#include <string>

#include "transports/net/ib/ib_device.h"

namespace tutti::transport::net::ib {

class IbCompletionQueue {
 public:
  // Throws System naming device and peer when the channel or the CQ cannot be created.
  IbCompletionQueue(std::shared_ptr<IbDevice> device, const std::string& peer, int entries);
  ~IbCompletionQueue();
  IbCompletionQueue(const IbCompletionQueue&) = delete;
  IbCompletionQueue& operator=(const IbCompletionQueue&) = delete;

  ibv_cq* cq() const { return cq_; }
  int descriptor() const { return channel_->fd; }  // readable once an armed CQ got a completion

  // ibv_poll_cq; -1 on overrun. A completion seen while armed means the arming was used.
  int poll(ibv_wc* wc, int max);
  // Called after a poll found nothing: takes the events that arrived, acknowledges them, and arms
  // the CQ unless it still is. True when it armed: the caller must poll again before sleeping.
  // Throws System naming the device when the notification request fails.
  bool armForSleep();

 private:
  std::shared_ptr<IbDevice> device_;
  std::string peer_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  bool armed_ = false;       // a notification is requested and has not been used
  unsigned eventsOwed_ = 0;  // armings used: their events are (or will be) on the channel
  unsigned unacked_ = 0;     // events taken but not yet acknowledged
};

}  // namespace tutti::transport::net::ib
