// The IB backend's connection endpoints: the sending and receiving comms and the listener.
//
// Protocol, per connection (one RC QP each side, plus the TCP socket the QPs were set up over):
// the receiver posts a receive work request and RDMA-writes a clear-to-send entry (address, rkey,
// capacity, sequence number) into the sender's slot ring; the sender, seeing the entry for its next
// message, RDMA-writes the message there with the size as immediate data, which completes the
// receiver's work request. Both sides go through the slots in order, kSlots at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/socket.h"
#include "transports/net/ib/ib_queue_pair.h"
#include "transports/net/net.h"

namespace tutti::net::ib {

constexpr int kSlots = 8;
constexpr uint64_t kIbHandleMagic = 0x7475747469494248ull;  // "tuttiIBH"

struct CtsEntry {
  uint64_t address;
  uint32_t rkey;
  uint32_t capacity;
  uint64_t sequence;  // 1, 2, ...: the message this entry is for; written last by the same RDMA write
};

// What the connector sends first on the TCP socket.
struct IbHello {
  uint64_t magic;
  uint64_t nonce;
  QpInfo info;
};

// The connector's side: sends its hello (nonce and QP information) and returns at once; the
// acceptor's answer is taken when the comm is first used, so connect never waits for accept.
std::unique_ptr<NetSendComm> makeIbSendComm(std::shared_ptr<IbDevice> device, Socket socket, std::string peer, uint64_t nonce,
                                            SteadyTime deadline, const std::atomic<bool>* abortFlag);
std::unique_ptr<NetListenComm> makeIbListenComm(std::shared_ptr<IbDevice> device, Socket listener, uint64_t nonce);

}  // namespace tutti::net::ib
