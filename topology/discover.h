// Discovery of this node's topology: hwloc for CPUs, NUMA and the PCI tree; sysfs for network
// interfaces; the CUDA driver and NVML, loaded at run time when present, for GPUs and NVLink.
#pragma once

#include <string>

#include "topology/graph.h"

namespace tutti::topo {

struct DiscoveryOptions {
  // Where sysfs and procfs are mounted; tests point these at a fake tree.
  std::string sysRoot = "/sys";
  std::string procRoot = "/proc";
  bool useHwloc = true;
  bool useCuda = true;  // dlopen libcuda.so.1 and libnvidia-ml.so.1
};

// Never fails for a missing or odd source: each becomes a fallback (one CPU, a default NIC speed,
// the NIC under CPU 0, no GPUs) and a line on the result, a warning where the user should act
// (hwloc, CUDA or NVML unusable) and a note where nothing needs doing (a VM's virtual NIC).
NodeSystem discoverNode(const DiscoveryOptions& options = {});

// A PCI function's NCCL attributes (busid, class, vendor, device, subsystem ids, link speed and
// width) from its sysfs directory; what the directory lacks is left out.
Attributes pciAttributes(const std::string& busId, const std::string& directory);

// The first line of a (sysfs) file, without its newline; "" when it cannot be read.
std::string readFirstLine(const std::string& file);

// This node as communicator init sees it: the file `topoFile` names (NCCL_TOPO_FILE) in place
// of discovery when not empty, with this host's identity; written to `dumpFile`
// (NCCL_TOPO_DUMP_FILE) when not empty. Unlike NCCL, a topology file replaces discovery rather
// than being merged with it. The caller passes the parameters' values. Throws tutti::Error when
// the file cannot be read or written, or is malformed.
NodeSystem localSystem(const std::string& topoFile, const std::string& dumpFile, const DiscoveryOptions& options = {});

}  // namespace tutti::topo
