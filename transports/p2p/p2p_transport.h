// The p2p transport: connections between processes of one host whose FIFOs live in device memory
// that the peer maps (CUDA IPC). The receiver allocates its FIFO as exportable memory
// (FifoMemory::allocateExportable: CUDA virtual memory with a POSIX file-descriptor handle) and
// offers the descriptor; the sender takes it over a Unix-domain socket (SCM_RIGHTS, both pids
// checked: descriptor_channel.h), maps it for its own device and writes into it directly.
// Host memory FIFOs are left to shm; ranks in one process to local.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace tutti {

std::unique_ptr<Transport> makeP2pTransport(TransportContext& context);

}  // namespace tutti
