// The emulated device with its memory counted as a GPU's (TUTTI_EMULATED_MEMORY=device): the
// transports then take the paths a GPU needs between processes and hosts. FIFOs of ranks in one
// process are device memory set up through copies; between processes of a host the receiver's
// FIFO is exported memory the sender maps from a descriptor passed over a Unix socket (p2p: CUDA
// IPC on a GPU, a memfd here); with NCCL_P2P_DISABLE, shared segments, and between hosts the
// network proxy's FIFOs, stay host memory mapped for the executor (kern::DeviceMemory::mapHostMemory:
// cuMemHostRegister on a GPU). Every collective, type and op is checked against the float64
// reference through each.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "kernels/device_memory.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/hosts_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::HostLayout;
using tutti_test::runOnHosts;

namespace {

std::vector<tutti_test::Case> cases(int nranks) {
  std::vector<tutti_test::Case> all = tutti_test::allCases({0, 1, 7, 1023}, nranks);
  // Beyond the LL size: Simple slots, several of them per connection.
  for (tutti_test::Coll coll : {tutti_test::Coll::AllReduce, tutti_test::Coll::AllGather, tutti_test::Coll::SendRecv})
    all.push_back(tutti_test::Case{coll, ncclFloat32, ncclSum, (size_t(1) << 18) + 3, false, 0});
  return all;
}

// Runs every case on the layout's ranks, each on the emulated device with device memory, and
// checks that the communicator saw its FIFO memory as the device's and reached its peers through
// `transports` (tuttiCommTransports' words).
void runWithDeviceMemory(HostLayout layout, const std::string& transports) {
  layout.environment.push_back({"NCCL_SOCKET_IFNAME", "lo"});
  layout.environment.push_back({"TUTTI_DEVICE", "emulated"});
  layout.environment.push_back({"TUTTI_EMULATED_MEMORY", "device"});
  const int nranks = layout.hosts * layout.ranksPerHost;
  const std::vector<tutti_test::Case> all = cases(nranks);
  auto outcomes = runOnHosts(layout, [&](int rank, int n, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank) + ": ";
    check(comm->links.fifoMemory->memorySpace() != tutti::kern::MemorySpace::Host,
          who + "the FIFO memory is " + comm->links.fifoMemory->name() + ", which the host reaches");
    char names[64];
    int nodes = 0;
    TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
    check(names == transports, who + "reached its peers through " + names + ", not " + transports);
    tutti_test::runAll(all, rank, n, comm);
  });
  REQUIRE(tutti_test::failuresOf(outcomes) == "");
}

// Four rank processes on one host, with `environment` set in each.
HostLayout oneHostOfFour(std::vector<std::pair<std::string, std::string>> environment = {}) {
  HostLayout layout;
  layout.hosts = 1;
  layout.ranksPerHost = 4;
  layout.environment = std::move(environment);
  return layout;
}

}  // namespace

TEST_CASE("emulated device memory: 4 rank processes of one host through p2p, each FIFO exported by its receiver",
          "[device][emulated][processes]") {
  runWithDeviceMemory(oneHostOfFour(), "p2p");
}

TEST_CASE(
    "emulated device memory: 4 rank processes of one host through p2p, each FIFO's handle in the offer (legacy CUDA "
    "IPC)",
    "[device][emulated][processes]") {
  runWithDeviceMemory(oneHostOfFour({{"TUTTI_EMULATED_IPC", "handle"}}), "p2p");
}

// What a GPU lacks is asked, never assumed (kernels/cuda/cuda_backend.cpp): without virtual memory
// management (as without descriptor export, TUTTI_EMULATED_IPC=handle above) the p2p FIFOs are
// cuMemAlloc's memory whose legacy IPC handle travels in the offer.
TEST_CASE("emulated device memory: 4 rank processes of one host on GPUs without virtual memory management",
          "[device][emulated][processes][capabilities]") {
  runWithDeviceMemory(oneHostOfFour({{"TUTTI_EMULATED_LACKS", "vmm,dmabuf,gdr"}}), "p2p");
}

TEST_CASE(
    "emulated device memory: 4 rank processes of one host with NCCL_P2P_DISABLE, through shared segments mapped for "
    "the executor",
    "[device][emulated][processes]") {
  runWithDeviceMemory(oneHostOfFour({{"NCCL_P2P_DISABLE", "1"}}), "shm");
}

TEST_CASE("emulated device memory: 2 hosts x 2 rank processes through p2p and mapped network FIFOs",
          "[device][emulated][processes][net]") {
  HostLayout layout;
  runWithDeviceMemory(layout, "net/Socket+p2p");
}

TEST_CASE(
    "emulated device memory: 2 hosts x 2 rank threads: device FIFOs set up by copies inside a process, mapped network "
    "FIFOs between",
    "[device][emulated][processes][threads][net]") {
  HostLayout layout;
  layout.threadsPerProcess = 2;
  runWithDeviceMemory(layout, "local+net/Socket");
}
