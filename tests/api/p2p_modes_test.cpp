// The p2p modes on the emulated device. P2P read mode (NCCL_P2P_READ_ENABLE, or NCCL's default over
// NVLink between compute capability 8.0 GPUs) on the emulated device with its memory counted as a GPU's: the Simple
// slots of each connection live in the sender's memory (exported to the receiver between processes, handed over in the
// process between threads) and the receiver's executor reads them there, while the receiver's FIFO holds only the
// header and the LL slots, so a receiver that still looked for the slots in its own FIFO would read its header instead.
// Every collective shape is checked against the float64 reference at an LL size, at a few slots, and across many slots
// of a small NCCL_BUFFSIZE; each connection says whether it is in read mode (Connection::simpleSlots), which the tests
// count, and NCCL_P2P_READ_ENABLE=0 must leave none in it. Copy mode (NCCL_P2P_USE_CUDA_MEMCPY=1, ranks as processes
// and threads): the sender's executor writes a staging FIFO and the transport's copy thread carries each message into
// the receiver's with the backend's copy (the copy engine on a GPU, a plain copy here); the sending ends count what it
// carried.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernels/fifo.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/connection_setup.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/p2p_topology_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::Coll;

namespace {

constexpr int kRanks = 4;  // on GPUs 0..3 of the p2p test node, NCCL_P2P_LEVEL=SYS: every pair p2p

// 524288 bytes over 8 slots: 64 KiB slots, so the largest count below spans many of them (and wraps
// the ring of 8 several times).
constexpr const char* kBuffsize = "524288";

// A node whose ranks connect peer to peer whatever their GPUs' distance (NCCL_P2P_LEVEL=SYS),
// on the emulated device, with FIFOs small enough for the tests' messages to lap them.
struct PeerToPeerNode {
  tutti_test::EmulatedNodeSetup setup;
  tutti_test::ScopedEnv level{"NCCL_P2P_LEVEL", "SYS"};
  tutti_test::ScopedEnv buffsize{"NCCL_BUFFSIZE", kBuffsize};
};

// Each pair says which mode it took, once per rank that asks about it: rank 0 and rank 1 at
// least, and every pair's line must name `mode`.
void requireEveryPairSays(const tutti_test::CapturedLog& log, const std::string& mode) {
  CHECK(!log.linesWith("rank 0 and rank 1 connect peer to peer").empty());
  for (const std::string& line : log.linesWith("connect peer to peer")) CHECK(line.find(mode) != std::string::npos);
}

std::vector<tutti_test::Case> cases(int nranks) {
  std::vector<tutti_test::Case> all;
  for (size_t count : {size_t(1023), size_t(40000) + 3, (size_t(1) << 18) + 5}) {
    all.push_back({Coll::AllReduce, ncclFloat32, ncclSum, count, false, 0});
    all.push_back({Coll::AllReduce, ncclFloat64, ncclMax, count, true, 0});
    all.push_back({Coll::AllReduce, ncclBfloat16, ncclSum, count, false, 0});
    all.push_back({Coll::AllGather, ncclInt32, ncclSum, count, false, 0});
    all.push_back({Coll::AllGather, ncclFloat16, ncclSum, count, true, 0});
    all.push_back({Coll::Broadcast, ncclInt64, ncclSum, count, false, nranks - 1});
    all.push_back({Coll::Broadcast, ncclUint8, ncclSum, count, true, 1});
    all.push_back({Coll::ReduceScatter, ncclFloat32, ncclSum, count, false, 0});
    all.push_back({Coll::ReduceScatter, ncclInt32, ncclMin, count, true, 0});
  }
  return all;
}

enum class Mode { Write, Read, Copy };
const char* modeName(Mode m) { return m == Mode::Read ? "read" : m == Mode::Copy ? "copy" : "write"; }

// The rank's connections to peers through `transport`: how many, how many in read mode, and the
// messages the copy engine carried from its sending ends. A connection in read mode must keep its
// Simple slots out of the receiver's FIFO (which has none).
struct Modes {
  int memory = 0;       // connections through `transport`
  int read = 0;         // of which in read mode
  uint64_t copied = 0;  // messages carried by the copy engine (copy mode, sending ends)
};
Modes modesOf(ncclComm_t comm, const std::string& transport) {
  Modes modes;
  for (const auto& [key, connection] : comm->links.connections) {
    if (connection->transport() != transport) continue;
    modes.memory++;
    const uint64_t copied = connection->copiedByEngine();
    check(copied == 0 || key.send,
          "rank " + std::to_string(comm->identity.rank) + ": a receiving end counts copies by the copy engine");
    modes.copied += copied;
    char* slots = connection->simpleSlots();
    if (slots == nullptr) continue;
    modes.read++;
    const char* fifo = reinterpret_cast<const char*>(connection->fifo());
    check(slots < fifo || slots >= fifo + tutti::kern::fifoHeaderBytes(),
          "rank " + std::to_string(comm->identity.rank) +
              ": a read-mode connection's Simple slots lie in its FIFO header");
  }
  return modes;
}

// Runs the cases on this rank, then checks its connections: all through `transport`, all in read
// mode or none, and messages carried by the copy engine exactly in copy mode.
void runAndCount(int rank, int nranks, ncclComm_t comm, const std::string& transport, Mode mode) {
  tutti_test::runAll(cases(nranks), rank, nranks, comm);
  const Modes modes = modesOf(comm, transport);
  const std::string who = "rank " + std::to_string(rank) + " (" + modeName(mode) + " mode): ";
  check(modes.memory > 0, who + "made no connection through " + transport);
  check(modes.memory == int(comm->links.connections.size()),
        who + "made connections through other transports than " + transport);
  if (mode == Mode::Read)
    check(modes.read == modes.memory, who + std::to_string(modes.read) + " of its " + std::to_string(modes.memory) +
                                          " " + transport + " connections are in read mode, not all");
  else
    check(modes.read == 0,
          who + std::to_string(modes.read) + " of its " + transport + " connections are in read mode, not none");
  if (mode == Mode::Copy)
    check(modes.copied > 0, who + "the copy engine carried no message");
  else
    check(modes.copied == 0, who + "the copy engine carried " + std::to_string(modes.copied) + " messages");
}

std::string runProcesses(int nranks, Mode mode) {
  return tutti_test::runProcesses(
      nranks, [&](int rank, int n, ncclComm_t comm) { runAndCount(rank, n, comm, "p2p", mode); }, 480, 1,
      [](int process) { setenv("TUTTI_EMULATED_DEVICE", std::to_string(process).c_str(), 1); });
}

// kRanks rank threads on emulated devices 0..kRanks-1. Beyond the counts, each receiving end in read
// mode must reach the very slots its sender writes (one address space here).
std::string runThreads(Mode mode) {
  const bool read = mode == Mode::Read;
  ncclComm_t comms[kRanks];
  int devices[kRanks] = {0, 1, 2, 3};
  const ncclResult_t made = ncclCommInitAll(comms, kRanks, devices);
  if (made != ncclSuccess)
    return std::string("ncclCommInitAll: ") + ncclGetErrorString(made) + ": " + ncclGetLastError(nullptr);
  std::string failures =
      tutti_test::runOnThreads(kRanks, [&](int i) { runAndCount(i, kRanks, comms[i], "local", mode); });
  if (failures.empty() && read) {
    for (int r = 0; r < kRanks; r++) {
      for (const auto& [key, connection] : comms[r]->links.connections) {
        if (key.send) continue;
        tutti::ConnKey senderKey = key;
        senderKey.peer = r;
        senderKey.send = true;
        const tutti::transport::Connection& sender = *comms[key.peer]->links.connections.at(senderKey);
        if (connection->simpleSlots() != sender.simpleSlots())
          failures += "rank " + std::to_string(r) + " reads its Simple slots from rank " + std::to_string(key.peer) +
                      " elsewhere than where that rank writes them\n";
      }
    }
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  return failures;
}

}  // namespace

TEST_CASE(
    "p2p read mode: rank processes, NCCL_P2P_READ_ENABLE=1: every connection's Simple slots in the sender's memory",
    "[device][emulated][processes][p2p]") {
  PeerToPeerNode node;
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "1");
  tutti_test::CapturedLog log("INFO", "P2P");
  CHECK(runProcesses(kRanks, Mode::Read) == "");
  requireEveryPairSays(
      log, "read mode (the receiver reads the Simple slots from the sender's memory), by NCCL_P2P_READ_ENABLE");
}

TEST_CASE("p2p read mode: rank processes with legacy IPC handles, the slots' handle left in the FIFO header",
          "[device][emulated][processes][p2p]") {
  PeerToPeerNode node;
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "1");
  tutti_test::ScopedEnv ipc("TUTTI_EMULATED_IPC", "handle");
  CHECK(runProcesses(kRanks, Mode::Read) == "");
}

TEST_CASE("p2p read mode: rank processes, NCCL_P2P_READ_ENABLE=0: the sender writes, no connection in read mode",
          "[device][emulated][processes][p2p]") {
  PeerToPeerNode node;
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "0");
  tutti_test::CapturedLog log("INFO", "P2P");
  CHECK(runProcesses(kRanks, Mode::Write) == "");
  requireEveryPairSays(log, "write mode (the sender writes into the receiver's FIFO)");
}

TEST_CASE("p2p read mode: NCCL's default, read over NVLink between compute capability 8.0 GPUs and write otherwise",
          "[device][emulated][processes][p2p]") {
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", nullptr);
  tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", nullptr);
  tutti_test::ScopedEnv buffsize("NCCL_BUFFSIZE", kBuffsize);
  SECTION("sm 80: read") {
    tutti_test::EmulatedNodeSetup setup(tutti_test::nvlinkTestNode(80), tutti_test::nvlinkTestBusIds());
    tutti_test::CapturedLog log("INFO", "P2P");
    CHECK(runProcesses(2, Mode::Read) == "");
    CHECK(!log.linesWith("read mode (the receiver reads the Simple slots from the sender's memory), by NCCL's default")
               .empty());
  }
  SECTION("sm 90: write") {
    tutti_test::EmulatedNodeSetup setup(tutti_test::nvlinkTestNode(90), tutti_test::nvlinkTestBusIds());
    CHECK(runProcesses(2, Mode::Write) == "");
  }
}

TEST_CASE("p2p read mode: rank threads on GPUs of their own (local), NCCL_P2P_READ_ENABLE=1 and 0, and copy mode",
          "[device][emulated][p2p]") {
  PeerToPeerNode node;
  SECTION("read") {
    tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "1");
    CHECK(runThreads(Mode::Read) == "");
  }
  SECTION("write") {
    tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "0");
    CHECK(runThreads(Mode::Write) == "");
  }
  SECTION("copy") {
    tutti_test::ScopedEnv memcpy("NCCL_P2P_USE_CUDA_MEMCPY", "1");
    CHECK(runThreads(Mode::Copy) == "");
  }
}

TEST_CASE("p2p copy mode: rank processes, NCCL_P2P_USE_CUDA_MEMCPY=1: every message carried by the copy proxy",
          "[device][emulated][processes][p2p]") {
  PeerToPeerNode node;
  tutti_test::ScopedEnv memcpy("NCCL_P2P_USE_CUDA_MEMCPY", "1");
  // Copy mode fills the receiver's own slots: read mode asked for as well gives way.
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", GENERATE(as<const char*>(), "0", "1"));
  tutti_test::ScopedEnv ipc("TUTTI_EMULATED_IPC", GENERATE(as<const char*>(), "descriptor", "handle"));
  tutti_test::CapturedLog log("INFO", "P2P");
  CHECK(runProcesses(kRanks, Mode::Copy) == "");
  requireEveryPairSays(log, "copy mode (NCCL_P2P_USE_CUDA_MEMCPY");
}
