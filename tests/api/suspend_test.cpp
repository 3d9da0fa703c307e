// ncclCommSuspend, ncclCommResume and ncclCommMemStats: the figures against the sizes the
// communicator's configuration implies, their change across a suspend and a resume, the calls
// refused while suspended (and a suspend refused while operations are outstanding), and every
// collective correct after the resume.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fifo.h"
#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/control_block.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::runThreads;
using tutti_test::ScopedEnv;

namespace {

std::string lastError() { return ncclGetLastError(nullptr); }

uint64_t stat(ncclComm_t comm, ncclCommMemStat_t kind) {
  uint64_t value = 12345;
  TUTTI_NCCL_CHECK(ncclCommMemStats(comm, kind, &value));
  return value;
}

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The bytes of the FIFOs a rank receives on, from the configuration: one per channel from its
// ring predecessor (init's connections), each a header, then per step a Simple slot and an LL slot
// of 16-byte lines (two of header, then 8 data bytes each).
uint64_t expectedFifoBytes(const ncclComm* comm) {
  const int me = comm->identity.rank, prev = (me + comm->identity.nranks - 1) % comm->identity.nranks;
  const uint64_t llData =
      std::min(comm->identity.peers[size_t(me)].llBytes, comm->identity.peers[size_t(prev)].llBytes);
  const uint64_t llSlot = llData == 0 ? 0 : 16 * (2 + (llData + 7) / 8);
  const uint64_t header = roundUp(sizeof(tutti::kern::FifoHeader), tutti::kern::kFifoSlotAlign);
  const uint64_t fifo = header + uint64_t(comm->settings.nsteps) * (comm->settings.slotBytes + llSlot);
  return uint64_t(comm->settings.nchannels) * fifo;
}

// This rank's control block, which its host's peers map: between threads of one process, a segment
// of exactly its size.
uint64_t expectedPersistentBytes() { return sizeof(tutti::ControlBlock); }

// Every collective, and a send/recv ring, against independently computed results.
void checkEveryCollective(ncclComm_t comm, const std::string& who, size_t seed) {
  int n = 0, rank = -1;
  TUTTI_NCCL_CHECK(ncclCommCount(comm, &n));
  TUTTI_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  const size_t count = 40001;
  for (ncclDataType_t type : {ncclFloat32, ncclFloat64}) {
    const size_t eb = tutti_test::elementBytes(type);
    const std::string what = who + (type == ncclFloat32 ? " float32" : " float64");
    std::vector<unsigned char> in(count * eb), out(count * eb * size_t(n));
    tutti_test::fillInput(type, ncclSum, n, rank, in.data(), count, seed);
    TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, type, ncclSum, comm, nullptr));
    std::string wrong = tutti_test::checkReduced(type, ncclSum, n, out.data(), count, seed);
    check(wrong.empty(), what + ": all-reduce: " + wrong);
    TUTTI_NCCL_CHECK(ncclReduce(in.data(), out.data(), count, type, ncclSum, n - 1, comm, nullptr));
    if (rank == n - 1) {
      wrong = tutti_test::checkReduced(type, ncclSum, n, out.data(), count, seed);
      check(wrong.empty(), what + ": reduce: " + wrong);
    }
    // Reduce-scatter: this rank's block is elements [rank * count, ...) of the reduction.
    std::vector<unsigned char> big(count * eb * size_t(n));
    tutti_test::fillInput(type, ncclSum, n, rank, big.data(), count * size_t(n), seed);
    TUTTI_NCCL_CHECK(ncclReduceScatter(big.data(), out.data(), count, type, ncclSum, comm, nullptr));
    wrong = tutti_test::checkReduced(type, ncclSum, n, out.data(), count, seed + size_t(rank) * count);
    check(wrong.empty(), what + ": reduce-scatter: " + wrong);
    // Broadcast from the last rank and all-gather: exact copies of each rank's inputs.
    std::vector<unsigned char> mine(count * eb);
    tutti_test::fillInput(type, ncclSum, n, n - 1, mine.data(), count, seed);
    std::vector<unsigned char> got(count * eb);
    TUTTI_NCCL_CHECK(
        ncclBroadcast(rank == n - 1 ? mine.data() : got.data(), got.data(), count, type, n - 1, comm, nullptr));
    check(got == mine, what + ": broadcast differs from the root's input");
    TUTTI_NCCL_CHECK(ncclAllGather(in.data(), out.data(), count, type, comm, nullptr));
    for (int r = 0; r < n; r++) {
      std::vector<unsigned char> theirs(count * eb);
      tutti_test::fillInput(type, ncclSum, n, r, theirs.data(), count, seed);
      check(std::equal(theirs.begin(), theirs.end(), out.begin() + std::ptrdiff_t(size_t(r) * count * eb)),
            what + ": all-gather block of rank " + std::to_string(r) + " differs");
    }
  }
  std::vector<double> send(count), recv(count, -1);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (size_t k = 0; k < count; k++) send[k] = rank * 1e6 + double(k);
  TUTTI_NCCL_CHECK(ncclGroupStart());
  TUTTI_NCCL_CHECK(ncclSend(send.data(), count, ncclFloat64, next, comm, nullptr));
  TUTTI_NCCL_CHECK(ncclRecv(recv.data(), count, ncclFloat64, prev, comm, nullptr));
  TUTTI_NCCL_CHECK(ncclGroupEnd());
  for (size_t k = 0; k < count; k += 997)
    check(recv[k] == prev * 1e6 + double(k),
          who + ": send/recv element " + std::to_string(k) + " is " + std::to_string(recv[k]));
}

}  // namespace

TEST_CASE(
    "ncclCommMemStats: the FIFOs and control block a communicator's configuration implies, a suspend "
    "releases the FIFOs and scratch, a resume makes them again, and every collective works after it",
    "[suspend][device-path]") {
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  std::string failures = runThreads(2, [](int rank, int, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank);
    const uint64_t fifo = expectedFifoBytes(comm), persistent = expectedPersistentBytes();
    check(comm->settings.nchannels == 2, who + ": " + std::to_string(comm->settings.nchannels) + " channels");
    check(stat(comm, ncclStatGpuMemSuspended) == 0, who + ": suspended before any suspend");
    check(stat(comm, ncclStatGpuMemSuspend) == fifo, who + ": ncclStatGpuMemSuspend " +
                                                         std::to_string(stat(comm, ncclStatGpuMemSuspend)) +
                                                         " after init, expected the FIFOs' " + std::to_string(fifo));
    check(stat(comm, ncclStatGpuMemPersist) == persistent, who + ": ncclStatGpuMemPersist " +
                                                               std::to_string(stat(comm, ncclStatGpuMemPersist)) +
                                                               ", expected " + std::to_string(persistent));
    check(stat(comm, ncclStatGpuMemTotal) == fifo + persistent, who + ": total is not the sum");

    checkEveryCollective(comm, who + " before the suspend", 1);
    // The operations may have made more connections (other algorithms) and scratch: all of it goes.
    check(stat(comm, ncclStatGpuMemSuspend) >= fifo, who + ": fewer bytes after the collectives");
    TUTTI_NCCL_CHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    check(stat(comm, ncclStatGpuMemSuspended) == 1, who + ": not suspended after ncclCommSuspend");
    check(stat(comm, ncclStatGpuMemSuspend) == 0,
          who + ": " + std::to_string(stat(comm, ncclStatGpuMemSuspend)) + " bytes held while suspended");
    check(stat(comm, ncclStatGpuMemPersist) == persistent, who + ": the persistent bytes changed");
    check(stat(comm, ncclStatGpuMemTotal) == persistent, who + ": total while suspended");

    // Calls between suspend and resume are refused naming the suspension.
    double in = rank + 1, out = 0;
    check(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, nullptr) == ncclInvalidUsage,
          who + ": an all-reduce on a suspended communicator was not refused");
    check(lastError().find("suspended (ncclCommSuspend)") != std::string::npos &&
              lastError().find("ncclAllReduce") != std::string::npos,
          who + ": " + lastError());
    check(ncclSend(&in, 1, ncclFloat64, 1 - rank, comm, nullptr) == ncclInvalidUsage, who + ": a send passed");
    check(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage &&
              lastError().find("suspended") != std::string::npos,
          who + ": a second suspend: " + lastError());
    ncclComm_t child = nullptr;
    check(ncclCommSplit(comm, 0, rank, &child, nullptr) == ncclInvalidUsage && child == nullptr,
          who + ": a split of a suspended communicator passed");

    TUTTI_NCCL_CHECK(ncclCommResume(comm));
    check(stat(comm, ncclStatGpuMemSuspended) == 0, who + ": still suspended after the resume");
    check(stat(comm, ncclStatGpuMemSuspend) == fifo, who + ": " + std::to_string(stat(comm, ncclStatGpuMemSuspend)) +
                                                         " bytes after the resume, expected " + std::to_string(fifo));
    check(ncclCommResume(comm) == ncclInvalidUsage && lastError().find("not suspended") != std::string::npos,
          who + ": a resume of a running communicator: " + lastError());
    checkEveryCollective(comm, who + " after the resume", 2);

    // Suspended without NCCL_SUSPEND_MEM: refused calls, memory kept.
    const uint64_t before = stat(comm, ncclStatGpuMemSuspend);
    TUTTI_NCCL_CHECK(ncclCommSuspend(comm, 0));
    check(stat(comm, ncclStatGpuMemSuspended) == 0 && stat(comm, ncclStatGpuMemSuspend) == before,
          who + ": a suspend without NCCL_SUSPEND_MEM released memory");
    check(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, nullptr) == ncclInvalidUsage,
          who + ": an all-reduce while suspended (flags 0) passed");
    TUTTI_NCCL_CHECK(ncclCommResume(comm));
    checkEveryCollective(comm, who + " after the second resume", 3);
  });
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE(
    "ncclCommSuspend is refused while an operation is outstanding or inside a group, and the "
    "communicator carries on",
    "[suspend]") {
  std::atomic<int> queued{0}, refused{0};
  std::string failures = runThreads(2, [&](int rank, int, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank);
    double in = rank + 1, out = 0;
    if (rank == 0) {
      // An all-reduce on a host stream waits for rank 1, which joins only after the refusal.
      cudaStream_t stream = nullptr;
      TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
      TUTTI_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, stream));
      queued.store(1);
      check(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage, who + ": suspend with an operation queued");
      check(lastError().find("still queued or running") != std::string::npos, who + ": " + lastError());
      refused.store(1);
      TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
      TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (refused.load() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      TUTTI_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, nullptr));
    }
    check(out == 3, who + ": the outstanding all-reduce gave " + std::to_string(out));
    TUTTI_NCCL_CHECK(ncclGroupStart());
    const ncclResult_t r = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
    const std::string why = lastError();
    const ncclResult_t end = ncclGroupEnd();  // returns the error recorded inside the group, as NCCL's
    check(r == ncclInvalidUsage && why.find("ncclGroupStart") != std::string::npos,
          who + ": a suspend inside a group: " + why);
    check(end == ncclSuccess || end == ncclInvalidUsage, who + ": ncclGroupEnd returned " + std::to_string(int(end)));
    check(stat(comm, ncclStatGpuMemSuspended) == 0, who + ": suspended after the refusals");
    TUTTI_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, nullptr));
    check(out == 3, who + ": all-reduce after the refusals gave " + std::to_string(out));
  });
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE(
    "ncclCommSuspend and ncclCommResume between rank processes: the shared-memory FIFOs each rank maps go "
    "and come back, and every collective works after the resume",
    "[suspend][device-path]") {
  std::string failures = tutti_test::runProcesses(2, [](int rank, int, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank);
    checkEveryCollective(comm, who + " before the suspend", 4);
    const uint64_t held = stat(comm, ncclStatGpuMemSuspend), persistent = stat(comm, ncclStatGpuMemPersist);
    check(held > 0, who + ": no FIFO bytes counted before the suspend");
    TUTTI_NCCL_CHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
    check(stat(comm, ncclStatGpuMemSuspended) == 1, who + ": not suspended");
    check(stat(comm, ncclStatGpuMemSuspend) == 0,
          who + ": " + std::to_string(stat(comm, ncclStatGpuMemSuspend)) + " bytes held while suspended");
    check(stat(comm, ncclStatGpuMemTotal) == persistent, who + ": total while suspended");
    TUTTI_NCCL_CHECK(ncclCommResume(comm));
    check(stat(comm, ncclStatGpuMemSuspend) > 0, who + ": no FIFO bytes after the resume");
    checkEveryCollective(comm, who + " after the resume", 5);
  });
  INFO(failures);
  CHECK(failures.empty());
}
