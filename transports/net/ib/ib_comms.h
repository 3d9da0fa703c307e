// The IB backend's connection endpoints: the sending and receiving comms and the listener.
//
// Protocol, per connection (NCCL_IB_QPS_PER_CONNECTION RC QPs each side, plus the TCP socket the
// QPs were set up over): the receiver posts receive work requests and RDMA-writes a clear-to-send
// entry (address, rkey, capacity, sequence number) over its first QP into the sender's slot ring;
// the sender, seeing the entry for its next message, RDMA-writes the message there with the size
// as immediate data, which completes the receiver's work requests. Both sides go through the slots
// in order, kSlots at a time.
//
// Several QPs: with NCCL_IB_SPLIT_DATA_ON_QPS=1 every message is cut into one part per QP (parts
// of a multiple of kSplitAlign bytes, the last ones shorter or empty) and the receiver posts one
// receive per QP, done when all have completed; with 0, message n goes whole over QP n mod QPs.
// Verbs order completions only within a QP, so receives carry their message's sequence number as
// wr_id and each completion is matched through it, never by arrival order.
//
// Adaptive routing (NCCL_IB_ADAPTIVE_ROUTING): a message above NCCL_IB_AR_THRESHOLD goes as a plain
// RDMA write followed on the same QP by a zero-byte write with immediate. An RC QP completes a
// receive only after every earlier message of that QP is placed, so the completion still means
// the data is there.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "transports/net/ib/ib_queue_pair.h"
#include "transports/net/net.h"

namespace tutti::transport::net::ib {

constexpr int kSlots = 8;
constexpr int kMaxQps = 128;                                // NCCL_IB_QPS_PER_CONNECTION's upper bound
constexpr size_t kSplitAlign = 128;                         // split parts start on this boundary of the message
constexpr uint64_t kIbHandleMagic = 0x7475747469494248ull;  // "tuttiIBH"

struct CtsEntry {
  uint64_t address;
  uint32_t rkey;
  uint32_t capacity;
  uint64_t sequence;  // 1, 2, ...: the message this entry is for; written last by the same RDMA write
};

// What the connector sends first on the TCP socket, followed by `qps` QpInfo (the first one with
// the sender's slot ring); the acceptor answers with as many QpInfo. The connector's settings rule
// the connection: the acceptor posts its receives as they say.
struct IbHello {
  uint64_t magic;
  uint64_t nonce;
  uint32_t qps;
  uint32_t splitData;
};

// Whether messages go as data write plus completion write: NCCL_IB_ADAPTIVE_ROUTING, or unset, on
// for an InfiniBand link layer and off for Ethernet (RoCE), as in NCCL.
bool useAdaptiveRouting(uint8_t linkLayer);

// The connector's side: sends its hello (nonce and QP information) and returns at once; the
// acceptor's answer is taken when the comm is first used, so connect never waits for accept.
std::unique_ptr<NetSendComm> makeIbSendComm(std::shared_ptr<IbDevice> device, Socket socket, std::string peer,
                                            uint64_t nonce, SteadyTime deadline, const std::atomic<bool>* abortFlag);
std::unique_ptr<NetListenComm> makeIbListenComm(std::shared_ptr<IbDevice> device, Socket listener, uint64_t nonce);

}  // namespace tutti::transport::net::ib
