// The net transport: connections across the network, through the net backend that NCCL_NET (or
// ncclConfig_t.netName) picks, with the communicator's proxy thread (net_proxy.h) moving the
// executor's FIFOs to and from it.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace tutti::transport::net {

std::unique_ptr<Transport> makeNetTransport(TransportContext& context);

}  // namespace tutti::transport::net
