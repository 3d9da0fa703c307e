// The p2p transport: connections between processes of one host whose FIFOs live in device memory
// that the peer maps (CUDA IPC). The receiver allocates its FIFO as exportable memory
// (kern::DeviceMemory::allocateExportable: CUDA virtual memory with a POSIX file-descriptor handle) and
// offers the descriptor; the sender takes it over a Unix-domain socket (SCM_RIGHTS, both pids
// checked: descriptor_channel.h), maps it for its own device and writes into it directly.
//
// Read mode (NCCL_P2P_READ_ENABLE, or NCCL's default: NVLink between compute capability 8.0 GPUs;
// p2p_choice.h): the receiver's FIFO holds the header and the LL slots only; the sender allocates
// the Simple slots in its own exportable memory when it attaches, writes how to map them into the
// FIFO header's setup words (FifoHeader::fromSender: a descriptor at its own server, or a legacy
// handle) before it confirms, and the receiver maps them as it completes. Each end's executor then
// reaches the slots through Connection::simpleSlots (ConnEnd::slots): the sender writes its own
// memory and the receiver reads the sender's, as NCCL's read mode does for the Simple protocol.
// Copy mode (NCCL_P2P_USE_CUDA_MEMCPY=1; p2p_copy_proxy.h): the receiver's FIFO is as in write mode,
// the sender's executor writes a staging FIFO in its own memory, and the transport's copy thread
// carries each message across by the copy engine. It leaves read mode out.
// The offer says which mode the receiver chose, and the sender follows it, so both ends agree.
// Host memory FIFOs are left to shm; ranks in one process to local.
#pragma once

#include <memory>

#include "transports/transport.h"

namespace tutti::transport::p2p {

std::unique_ptr<Transport> makeP2pTransport(TransportContext& context);

}  // namespace tutti::transport::p2p
