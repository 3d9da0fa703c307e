// The local transport: connections between rank threads of one process. The receiver allocates
// the FIFO from the communicator's FIFO memory and hands its address over through a process-wide
// table; the sender's bells are the peer's control block, in this process too.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace tutti::transport::local {

std::unique_ptr<Transport> makeLocalTransport(TransportContext& context);

}  // namespace tutti::transport::local
