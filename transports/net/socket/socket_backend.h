// The "Socket" net backend: TCP over runtime/socket.h, nonblocking, a message striped over
// several sockets per connection.
#pragma once

#include <memory>

#include "transports/net/net.h"

namespace tutti::net {

// Sockets per connection: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (clamped to 1..64).
int socketsPerConnection();

// Throws when no interface is usable (with NCCL_SOCKET_IFNAME's error listing those that exist).
std::unique_ptr<NetBackend> makeSocketBackend();

}  // namespace tutti::net
