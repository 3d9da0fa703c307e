// One rank of a multi-host run: joins through NCCL_COMM_ID (the root is rank 0's process), runs
// every collective's cases and checks them, and exits 0 only when all passed. Started by
// run.sh inside a network namespace; NCCL_HOSTID tells the namespaces apart.
//
// Usage: multihost_rank <rank> <nranks> [quick]
//        multihost_rank <rank> <nranks> algorithms   every registered algorithm, forced in turn,
//            on every collective it serves (sum, float32 and int32, small and 1M+3 elements)
//        multihost_rank <rank> <nranks> faults   all-reduces in a loop until one fails: exits 0
//            when it failed with ncclRemoteError (the fault was reported), 1 otherwise.
//        multihost_rank <rank> <nranks> shrink   as faults, then ncclCommShrink without the last
//            rank (the one run.sh kills), with NCCL_SHRINK_ABORT, and checked all-reduces on the
//            new communicator: exits 0 when they all gave the survivors' sum.
//        multihost_rank <rank> <nranks> smoke   every collective and send/recv once each, float32
//            sums of 1, 1023 and 1M+3 elements: the short run per knob of the strict plugin stand-in.
//        multihost_rank <rank> <nranks> lastsend   rank 0 sends 3 MiB to rank 1 and destroys its
//            communicator at once; rank 1 receives after a pause, when rank 0 may have closed every
//            connection (a peer's end after its last operation is no fault), and checks each element.
//        multihost_rank <rank> <nranks> setup-fails   init and a first all-reduce, one of which must
//            fail (run.sh misconfigures a rank): prints "rank R/N: failed after S s: <error>" and exits
//            0 when a call failed within 10 s, 1 otherwise.
//        multihost_rank <rank> <nranks> alltoallv   ncclAllToAllv over skewed count matrices with zeros,
//            out-of-order and overlapping send blocks and receive blocks with gaps, in several types,
//            on the null stream and on a host stream inside a group (tests/common/alltoallv_support.h).
//        multihost_rank <rank> <nranks> registered   all-gather, broadcast and all-reduce on
//            ncclMemAlloc buffers registered with the communicator, each against the float64
//            reference and bitwise against the same call on unregistered ones; prints how many
//            messages this rank read in place from its peers' buffers (tuttiCommZeroCopyReads).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "tests/common/alltoallv_support.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/mem_alloc_buffers_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace {

// The survivors of a killed last rank shrink and go on: all-reduces of rank + 1 over the rest.
int shrinkAndGoOn(int rank, int nranks, ncclComm_t comm) {
  int exclude[] = {nranks - 1};
  ncclComm_t smaller = nullptr;
  if (ncclCommShrink(comm, exclude, 1, &smaller, nullptr, NCCL_SHRINK_ABORT) != ncclSuccess) {
    std::fprintf(stderr, "rank %d/%d: ncclCommShrink failed: %s\n", rank, nranks, ncclGetLastError(comm));
    return 1;
  }
  const int n = nranks - 1;
  const float expected = float(n * (n + 1) / 2);
  for (int i = 0; i < 20; i++) {
    std::vector<float> buf(size_t(1 << 16) + size_t(i), float(rank + 1));
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, smaller, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "rank %d/%d: all-reduce %d on the shrunk communicator: %s\n", rank, nranks, i,
                   ncclGetLastError(smaller));
      return 1;
    }
    for (float v : buf)
      if (v != expected) {
        std::fprintf(stderr, "rank %d/%d: all-reduce %d on the shrunk communicator gave %g, not %g\n", rank, nranks, i,
                     v, expected);
        return 1;
      }
  }
  std::printf("rank %d/%d: shrunk to %d ranks; 20 all-reduces correct\n", rank, nranks, n);
  std::fflush(stdout);
  return ncclCommDestroy(smaller) == ncclSuccess ? 0 : 1;
}

int faultLoop(int rank, int nranks, bool shrink) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d/%d: init failed: %s\n", rank, nranks, ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<float> buf(1 << 18, 1.0f);
  ncclResult_t result = ncclSuccess;
  long iterations = 0;
  // Bounded: the script kills a rank or cuts a link within seconds; a run that outlives this
  // loop without an error has missed the fault.
  for (; iterations < 2000000 && result == ncclSuccess; iterations++)
    result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  std::printf("rank %d/%d: after %ld all-reduces: %s: %s\n", rank, nranks, iterations, ncclGetErrorString(result),
              ncclGetLastError(comm));
  std::fflush(stdout);
  const int status = result != ncclRemoteError ? 1 : shrink ? shrinkAndGoOn(rank, nranks, comm) : 0;
  ncclCommDestroy(comm);  // after a failure this must return, not hang
  return status;
}

// Init and one all-reduce, where run.sh made connection setup fail: every rank must leave within
// 10 s (TUTTI_TIMEOUT is far longer), with the first failure in its error.
int setupFails(int rank, int nranks) {
  const auto start = std::chrono::steady_clock::now();
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result == ncclSuccess) result = ncclCommInitRank(&comm, nranks, id, rank);
  std::vector<float> buf(1 << 16, 1.0f);
  if (result == ncclSuccess)
    result = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d/%d: %s after %.1f s: %s\n", rank, nranks, result == ncclSuccess ? "passed" : "failed", seconds,
              result == ncclSuccess ? "" : ncclGetLastError(comm));
  std::fflush(stdout);
  if (comm != nullptr) ncclCommAbort(comm);
  return result != ncclSuccess && seconds < 10 ? 0 : 1;
}

// Every algorithm in the registry, forced in turn (every rank walks the registry in the same
// order), on every collective it serves.
std::vector<std::string> runEveryAlgorithm(int rank, int nranks, ncclComm_t comm) {
  std::vector<std::string> names;
  for (const tutti::plan::Algorithm& a : comm->planning.algorithms.all()) names.push_back(a.name);
  for (const std::string& name : names) {
    comm->planning.forcedAlgorithm = name;
    for (tutti::plan::Coll pc : comm->planning.algorithms.find(name)->colls) {
      tutti_test::Coll coll;
      if (!tutti_test::fromPlanColl(pc, &coll)) continue;
      for (size_t count : {size_t(7), size_t(1023), size_t((1u << 20) + 3)})
        for (ncclDataType_t type : {ncclFloat32, ncclInt32})
          for (bool inPlace : {false, true}) {
            tutti_test::Case c{coll, type, ncclSum, count, inPlace, nranks - 1};
            try {
              tutti_test::runCase(c, rank, nranks, comm);
            } catch (const std::exception& e) {
              throw tutti_test::RankFailure("algorithm " + name + ": " + e.what());
            }
          }
    }
  }
  comm->planning.forcedAlgorithm.clear();
  return names;
}

// What ran a rank's calls, for the scripts to check: "device <backend>, transports <names>, <n> nodes".
std::string ranOn(ncclComm_t comm) {
  const char* backend = "?";
  char transports[128] = "";
  int nodes = 0;
  tutti_test::checkNccl(tuttiCommDeviceBackend(comm, &backend), "tuttiCommDeviceBackend");
  tutti_test::checkNccl(tuttiCommTransports(comm, transports, sizeof transports, &nodes), "tuttiCommTransports");
  return std::string("device ") + backend + ", transports " + transports + ", " + std::to_string(nodes) + " nodes";
}

// Zero-copy between the rank processes of a host, with the network between hosts: every case on
// unregistered ncclMemAlloc buffers, then on registered ones, which must give the same bytes
// (runCase checks both against the float64 reference). Returns the messages read in place.
uint64_t runRegistered(int rank, int nranks, ncclComm_t comm, size_t* ncases) {
  using tutti_test::Coll;
  std::vector<tutti_test::Case> cases;
  for (size_t count : {size_t(7), size_t(1003), size_t(65537), size_t(300001)})
    for (ncclDataType_t type : {ncclFloat32, ncclBfloat16}) {
      if (type != ncclFloat32 && count > 70000) continue;
      for (bool inPlace : {false, true}) {
        cases.push_back({Coll::AllGather, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, nranks - 1});
        cases.push_back({Coll::AllReduce, type, ncclSum, count, inPlace, 0});
      }
    }
  uint64_t before = 0, after = 0;
  tutti_test::checkNccl(tuttiCommZeroCopyReads(comm, &before), "tuttiCommZeroCopyReads");
  for (const tutti_test::Case& c : cases) {
    std::vector<char> copied, direct;
    {
      tutti_test::MemAllocBuffers buffers(comm, false);
      tutti_test::runCase(c, rank, nranks, comm, &buffers, &copied);
    }
    {
      tutti_test::MemAllocBuffers buffers(comm, true);
      tutti_test::runCase(c, rank, nranks, comm, &buffers, &direct);
    }
    tutti_test::check(copied == direct, tutti_test::describe(c, rank, nranks) +
                                            ": the registered buffers' result differs from the copied one");
  }
  tutti_test::checkNccl(tuttiCommZeroCopyReads(comm, &after), "tuttiCommZeroCopyReads");
  *ncases = cases.size();
  return after - before;
}

// Every collective and send/recv, out of place, float32 sums of three sizes.
std::vector<tutti_test::Case> smokeCases(int nranks) {
  std::vector<tutti_test::Case> cases;
  for (const tutti_test::Case& c : tutti_test::allCases({1, 1023, (1u << 20) + 3}, nranks))
    if (c.type == ncclFloat32 && c.op == ncclSum && !c.inPlace) cases.push_back(c);
  return cases;
}

// Rank 0's last operation is a send that fits the receiver's FIFO, so it completes before rank 1
// has asked for it; rank 1 asks only after rank 0 has had time to destroy its communicator.
void sendThenLeave(int rank, ncclComm_t comm) {
  const size_t count = (size_t(3) << 20) / sizeof(float) + 5;
  std::vector<float> buf(count, 0.0f);
  if (rank == 0) {
    for (size_t i = 0; i < count; i++) buf[i] = float(i % 4099);
    tutti_test::checkNccl(ncclSend(buf.data(), count, ncclFloat32, 1, comm, nullptr), "ncclSend");
  } else if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    tutti_test::checkNccl(ncclRecv(buf.data(), count, ncclFloat32, 0, comm, nullptr), "ncclRecv");
    for (size_t i = 0; i < count; i++)
      tutti_test::check(buf[i] == float(i % 4099), "lastsend: element " + std::to_string(i) + " is " +
                                                       std::to_string(buf[i]) + ", not " +
                                                       std::to_string(float(i % 4099)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <rank> <nranks> [quick]\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]), nranks = std::atoi(argv[2]);
  const std::string mode = argc > 3 ? argv[3] : "";
  const bool quick = mode == "quick";
  ncclComm_t comm = nullptr;
  if (mode == "faults" || mode == "shrink") return faultLoop(rank, nranks, mode == "shrink");
  if (mode == "setup-fails") return setupFails(rank, nranks);
  try {
    ncclUniqueId id;
    tutti_test::checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");  // NCCL_COMM_ID names the root
    tutti_test::checkNccl(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank");
    if (mode == "algorithms") {
      std::vector<std::string> names = runEveryAlgorithm(rank, nranks, comm);
      tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
      std::printf("rank %d/%d: %zu algorithms passed\n", rank, nranks, names.size());
      return 0;
    }
    if (mode == "registered") {
      size_t ncases = 0;
      const uint64_t reads = runRegistered(rank, nranks, comm, &ncases);
      const std::string on = ranOn(comm);
      tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
      std::printf("rank %d/%d: %zu registered cases passed, %llu messages read in place (%s)\n", rank, nranks, ncases,
                  static_cast<unsigned long long>(reads), on.c_str());
      return 0;
    }
    if (mode == "alltoallv") {
      tutti_test::exchangeAllToAllv(rank, nranks, comm, tutti_test::AllToAllvIssue::NullStream);
      tutti_test::exchangeAllToAllv(rank, nranks, comm, tutti_test::AllToAllvIssue::StreamInGroup);
      const std::string on = ranOn(comm);
      tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
      std::printf("rank %d/%d: alltoallv passed (%s)\n", rank, nranks, on.c_str());
      return 0;
    }
    if (mode == "lastsend") {
      sendThenLeave(rank, comm);
      tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
      std::printf("rank %d/%d: lastsend passed\n", rank, nranks);
      return 0;
    }
    if (mode == "smoke") {
      const std::vector<tutti_test::Case> cases = smokeCases(nranks);
      tutti_test::runAll(cases, rank, nranks, comm);
      const std::string on = ranOn(comm);
      tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
      std::printf("rank %d/%d: %zu smoke cases passed (%s)\n", rank, nranks, cases.size(), on.c_str());
      return 0;
    }
    std::vector<tutti_test::Case> cases;
    for (const tutti_test::Case& c : tutti_test::allCases({0, 1, 7, 1023}, nranks))
      if (!quick || c.op == ncclSum) cases.push_back(c);
    for (tutti_test::Coll coll : {tutti_test::Coll::AllReduce, tutti_test::Coll::AllGather,
                                  tutti_test::Coll::ReduceScatter, tutti_test::Coll::AlltoAll})
      cases.push_back(tutti_test::Case{coll, ncclFloat32, ncclSum, (1u << 20) + 3, false, 0});
    tutti_test::runAll(cases, rank, nranks, comm);
    const std::string on = ranOn(comm);
    tutti_test::checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
    std::printf("rank %d/%d: %zu cases passed (%s)\n", rank, nranks, cases.size(), on.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d/%d: %s\n", rank, nranks, e.what());
    if (comm) ncclCommAbort(comm);
    return 1;
  }
}
