// Whether a network connection's FIFO slots are device memory that the NIC registers by dmabuf
// (GPUDirect RDMA) or host memory as without a GPU: NCCL_NET_GDR_LEVEL against the GPU-NIC path,
// NCCL_NET_GDR_READ for the sending side, and what the executor's memory and the backend can do.
#pragma once

#include <optional>
#include <string>

#include "topology/graph.h"
#include "transports/net/net.h"

namespace tutti::transport::net {

// NCCL_NET_GDR_LEVEL's value: LOC, PIX, PXB, PHB or SYS (any case), or NCCL's numbers (0 LOC,
// 1 PIX, 2 PXB, 3 PHB, 4 and above SYS). Throws InvalidUsage naming the value otherwise.
topo::PathType parseGdrLevel(const std::string& text);

struct GdrChoice {
  bool deviceMemory = false;
  std::string why;  // for the INFO line; "" when there is nothing to say (host memory executors)
};

// `send`: the sending side. `exportsDmaBuf`: the executor's memory can be handed to a NIC as a
// dmabuf; `executorMemoryIsDevice`: it is not the host's. `path`: the GPU-NIC path type of the
// topology graph, nullopt where either has no PCI location (then counted as SYS, the farthest:
// a guess must not put traffic on a path the user did not allow).
GdrChoice chooseGdr(bool send, const NetProperties& nic, bool executorMemoryIsDevice, bool exportsDmaBuf,
                    std::optional<topo::PathType> path);

}  // namespace tutti::transport::net
