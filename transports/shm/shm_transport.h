// The shm transport: connections between processes of one node, through POSIX shared memory
// segments (transports/segment.h) that the receiver creates and the sender maps.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace tutti::transport::shm {

std::unique_ptr<Transport> makeShmTransport(TransportContext& context);

}  // namespace tutti::transport::shm
