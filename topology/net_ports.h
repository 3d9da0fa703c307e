// A node's NICs as its net backend offers them: the devices of the backend a communicator uses
// (IB ports, a plugin's devices) take the place of the interfaces discovery found in sysfs, as
// NCCL's topology lists its network plugin's devices. The runtime, which knows the backend, hands
// them over; the topology knows nothing of transports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/graph.h"

namespace tutti::topo {

// One port, as the backend's properties describe it (NCCL's ncclNetProperties_t, the fields the
// topology keeps).
struct NetPort {
  std::string name;     // "mlx5_0:1" for an IB port, the interface name for a socket device
  std::string pciPath;  // a sysfs path that resolves into the device's PCI function; "" when unknown
  uint64_t guid = 0;
  int speedMbps = 0;  // 0 (or below): unknown
  int port = 1;
  int maxComms = 65536;
  bool gdr = false;  // the backend takes GPU memory (GPUDirect RDMA)
};

// Replaces every <nic> and <net> of the graph with `ports`: port i becomes <net dev="i">, with its
// name, speed, port, guid, maxconn and gdr, and the links are rebuilt. A port whose pciPath leads
// to a PCI function hangs under that function's <nic> (ports of one function share it), which
// hangs under the deepest PCI switch of the graph on the function's sysfs path, else under the CPU
// of its numa_node. A port without one is a virtual NIC under the first CPU, where discovery puts
// a virtual interface. Fallbacks (speed unknown, no PCI device) are notes on `system`.
void adoptNetPorts(NodeSystem& system, const std::vector<NetPort>& ports);

}  // namespace tutti::topo
