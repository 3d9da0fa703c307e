// The GPUDirect RDMA choice of the network proxy's FIFOs (see gdr_policy.h).
#include "transports/net/gdr_policy.h"

#include <cctype>

#include "base/error.h"
#include "base/tunables.h"

namespace tutti::transport::net {

topo::PathType parseGdrLevel(const std::string& text) {
  std::string upper;
  for (char c : text) upper += char(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "LOC") return topo::PathType::LOC;
  if (upper == "PIX") return topo::PathType::PIX;
  if (upper == "PXB") return topo::PathType::PXB;
  if (upper == "PHB") return topo::PathType::PHB;
  if (upper == "SYS") return topo::PathType::SYS;
  if (!upper.empty() && upper.size() < 4 && upper.find_first_not_of("0123456789") == std::string::npos) {
    const topo::PathType byNumber[] = {topo::PathType::LOC, topo::PathType::PIX, topo::PathType::PXB,
                                       topo::PathType::PHB};
    int n = std::stoi(upper);
    return n < 4 ? byNumber[n] : topo::PathType::SYS;
  }
  throw Error(ErrorCode::InvalidUsage,
              "NCCL_NET_GDR_LEVEL=" + text + " is none of LOC, PIX, PXB, PHB, SYS or a number from 0");
}

GdrChoice chooseGdr(bool send, const NetProperties& nic, bool executorMemoryIsDevice, bool exportsDmaBuf,
                    std::optional<topo::PathType> path) {
  if (!executorMemoryIsDevice) return {};  // host executors: their memory is what the NIC registers anyway
  if (send && !tunables::kNetGdrRead.get()) return {false, "NCCL_NET_GDR_READ=0 keeps the sending side in host memory"};
  if (!exportsDmaBuf) return {false, "the executor's memory cannot be exported as a dmabuf"};
  if (!nic.dmaBuf) return {false, "the network device " + nic.name + " cannot register memory by dmabuf"};
  const topo::PathType level = parseGdrLevel(tunables::kNetGdrLevel.get());
  const topo::PathType between = path.value_or(topo::PathType::SYS);
  const std::string pathText =
      path ? std::string("the GPU-NIC path is ") + topo::pathTypeName(between)
           : "the GPU-NIC path is unknown (no PCI location for the GPU or the NIC), counted as SYS";
  const bool allowed = between <= level;
  return {allowed, pathText + (allowed ? ", within" : ", beyond") + " NCCL_NET_GDR_LEVEL=" + topo::pathTypeName(level)};
}

}  // namespace tutti::transport::net
