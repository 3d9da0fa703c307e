// The "IB" net backend: RC queue pairs over libibverbs (loaded at run time), data moved by RDMA
// write with immediate into receive buffers that the receiver advertises.
#pragma once

#include <memory>

#include "transports/net/net.h"

namespace tutti::transport::net {

// Throws when IB is off (NCCL_IB_DISABLE), libibverbs is absent, or no active port passes
// NCCL_IB_HCA; the message says which.
std::unique_ptr<NetBackend> makeIbBackend();

}  // namespace tutti::transport::net
