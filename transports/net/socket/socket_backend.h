// The "Socket" net backend: TCP over base/socket.h, nonblocking, a message striped over
// several sockets per connection.
#pragma once

#include <memory>

#include "base/socket_address.h"
#include "transports/net/net.h"

namespace tutti::transport::net {

// What a connector presents on each of its sockets before anything else; a listener drops any
// connection whose hello does not match its handle.
constexpr uint64_t kSocketHelloMagic = 0x7475747469484c4full;  // "tuttiHLO"
struct SocketHello {
  uint64_t magic;
  uint64_t nonce;  // the listener's secret, from its handle
  uint32_t index;  // which of the connection's sockets this is
  uint32_t nsocks;
};

// What a Socket listener's handle holds (tests and logs read it; connect() uses it).
struct SocketHandleContents {
  SocketAddress address;
  uint64_t nonce = 0;
  uint32_t nsocks = 0;
};
// Throws Remote when the handle is not a Socket backend's.
SocketHandleContents readSocketHandle(const NetHandle& handle);

// Sockets per connection: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (clamped to 1..64).
int socketsPerConnection();

// Throws when no interface is usable (with NCCL_SOCKET_IFNAME's error listing those that exist).
std::unique_ptr<NetBackend> makeSocketBackend();

}  // namespace tutti::transport::net
