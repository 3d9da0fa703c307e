// One RC queue pair with its completion queue, brought up from what the peer sent over the TCP
// socket of the connection (QP number, LID, GID, PSN, MTU), and completions checked for errors.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/socket.h"
#include "transports/net/ib/ib_completion_queue.h"
#include "transports/net/ib/ib_device.h"

namespace tutti::transport::net::ib {

// What each side sends the other before the QPs move to RTR. Fixed layout, both sides little-endian.
struct QpInfo {
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;  // the sender's port active MTU (ibv_mtu)
  uint8_t linkLayer;
  uint32_t gidIndex;
  uint8_t gid[16];
  uint64_t fifoAddress;  // the sender's clear-to-send slots (0 on the receiving side)
  uint32_t fifoRkey;
  uint32_t reserved;
};

class IbQueuePair {
 public:
  // Creates the CQ and the QP and moves the QP to INIT. `peer` names the other side in errors.
  IbQueuePair(std::shared_ptr<IbDevice> device, std::string peer, int depth);
  ~IbQueuePair();
  IbQueuePair(const IbQueuePair&) = delete;
  IbQueuePair& operator=(const IbQueuePair&) = delete;

  QpInfo localInfo() const;
  // INIT -> RTR -> RTS towards `remote`; throws naming the step, the device and the peer.
  void connectTo(const QpInfo& remote);

  // Polls at most `max` completions into `wc`; throws Remote on an error completion, naming the
  // operation, the peer, device:port and the status. Successes polled before an error are returned
  // first and the error is thrown by the next call, so none is lost.
  int poll(ibv_wc* wc, int max, const char* operation);
  void postSend(ibv_send_wr* wr, const char* operation);
  void postRecv(ibv_recv_wr* wr, const char* operation);
  // Sleeping on the completion queue (ib_completion_queue.h).
  int descriptor() const { return cq_->descriptor(); }
  bool armForSleep() { return cq_->armForSleep(); }

  IbDevice& device() const { return *device_; }
  const std::string& peer() const { return peer_; }

 private:
  std::shared_ptr<IbDevice> device_;
  std::string peer_;
  std::unique_ptr<IbCompletionQueue> cq_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_;
  std::optional<Error> error_;  // an error completion polled after successes, thrown by the next poll
};

}  // namespace tutti::transport::net::ib
