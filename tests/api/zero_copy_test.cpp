// Zero-copy on registered buffers (runtime/comm/registrations.h, "Zero-copy"): all-gather, broadcast and
// all-reduce whose buffers are registered with ncclCommRegister let their peers read them in place,
// as rank threads of one process and, with cross-memory reads, as processes of one host.
// Every case is checked against the float64 reference and bitwise against the same call on
// unregistered buffers; each registered buffer is poisoned as soon as its call has returned, so a
// peer still reading it afterwards (an operation that ended before its direct messages were read)
// shows as a wrong result.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/mem_alloc_buffers_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/shared_memory_support.h"
#include "tutti/tutti.h"

namespace {

using tutti_test::Case;
using tutti_test::Coll;
using tutti_test::MemAllocBuffers;

// All-gather, broadcast (first and last root) and all-reduce (sum; average where it is exact
// enough) at odd counts, in and out of place, in several types. The larger counts exceed the
// device executors' LL messages (which never go direct) and span several FIFO slots.
// small: fewer counts and types, for the runs at more ranks.
std::vector<Case> zeroCopyCases(int nranks, bool small) {
  std::vector<Case> cases;
  const std::vector<size_t> counts =
      small ? std::vector<size_t>{7, 65537} : std::vector<size_t>{1, 1003, 65537, 300001};
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclInt32, ncclBfloat16, ncclInt8};
  for (size_t count : counts)
    for (ncclDataType_t type : types) {
      if (count > 70000 && type != ncclFloat32) continue;  // one type across many slots is enough
      if (small && type != ncclFloat32 && (count < 1000 || type == ncclInt32 || type == ncclBfloat16)) continue;
      for (bool inPlace : {false, true}) {
        cases.push_back({Coll::AllGather, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, nranks - 1});
        cases.push_back({Coll::AllReduce, type, ncclSum, count, inPlace, 0});
        if (type == ncclFloat64) cases.push_back({Coll::AllReduce, type, ncclAvg, count, inPlace, 0});
      }
    }
  return cases;
}

// Runs every case on plain buffers and on registered ones (on ranks that `registers` says), and
// requires the same bytes. Under NCCL_ALGO=algorithm ("": the selector's choice).
void requireSameAsCopies(
    int nranks, const char* algorithm, bool onStream, bool small,
    bool (*registers)(int rank) = [](int) { return true; }) {
  tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
  tutti_test::ScopedEnv registeredOnly("TUTTI_READ_IN_PLACE", "0");  // unregistered buffers copied
  const std::vector<Case> cases = zeroCopyCases(nranks, small);
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases) {
      std::vector<char> copied, direct;
      tutti_test::runCase(c, rank, n, comm, nullptr, &copied);
      if (registers(rank)) {
        MemAllocBuffers buffers(comm, true, true, false, onStream);  // malloc'd host memory
        tutti_test::runCase(c, rank, n, comm, &buffers, &direct);
      } else {
        tutti_test::runCase(c, rank, n, comm, nullptr, &direct);
      }
      tutti_test::check(copied == direct, tutti_test::describe(c, rank, n) +
                                              ": the registered buffers' result differs from the copied one");
    }
  });
  INFO(nranks << " ranks, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)")
              << (onStream ? ", host stream" : ", null stream"));
  INFO(failures);
  REQUIRE(failures.empty());
}

}  // namespace

TEST_CASE("zero-copy: registered buffers give the copied path's bytes, 2 to 8 ranks",
          "[register][zero-copy][device-path]") {
  // The direct messages are used: every launch on registered buffers says so.
  tutti_test::CapturedLog log("TRACE", "COLL");
  requireSameAsCopies(2, "", false, false);
  CHECK(!log.linesWith("zero-copy: peers read the input and output in place").empty());
  requireSameAsCopies(3, "ring", true, true);
  requireSameAsCopies(4, "", true, true);
  requireSameAsCopies(5, "tree", false, true);
  requireSameAsCopies(8, "", false, true);
}

TEST_CASE("zero-copy: a plan's direct sends in every algorithm that marks them", "[register][zero-copy]") {
  requireSameAsCopies(4, "ring", false, true);
  requireSameAsCopies(6, "tree", true, true);
  requireSameAsCopies(5, "binomial", false, true);
  requireSameAsCopies(4, "pat", false, true);
}

TEST_CASE("zero-copy: ranks need not agree on what they registered", "[register][zero-copy][device-path]") {
  // Odd ranks send bytes and even ranks addresses; every receiver takes either.
  requireSameAsCopies(3, "", false, true, [](int rank) { return rank % 2 == 0; });
}

TEST_CASE("zero-copy: a buffer deregistered between calls is copied from the next call on",
          "[register][zero-copy][device-path]") {
  tutti_test::CapturedLog log("TRACE", "COLL");
  tutti_test::ScopedEnv registeredOnly("TUTTI_READ_IN_PLACE", "0");
  const int nranks = 3;
  const size_t count = 40001;
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    std::vector<float> in(count), out(count * size_t(n));
    void* handles[2] = {nullptr, nullptr};
    TUTTI_NCCL_CHECK(ncclCommRegister(comm, in.data(), in.size() * sizeof(float), &handles[0]));
    TUTTI_NCCL_CHECK(ncclCommRegister(comm, out.data(), out.size() * sizeof(float), &handles[1]));
    for (int call = 0; call < 3; call++) {
      for (size_t i = 0; i < count; i++) in[i] = float((i * 7 + size_t(rank) * 13 + size_t(call)) % 1000);
      std::fill(out.begin(), out.end(), -1.0f);
      TUTTI_NCCL_CHECK(ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr));
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
          tutti_test::check(out[size_t(r) * count + i] == float((i * 7 + size_t(r) * 13 + size_t(call)) % 1000),
                            "rank " + std::to_string(rank) + ", call " + std::to_string(call) + ": block " +
                                std::to_string(r) + " element " + std::to_string(i) + " is wrong");
      // Idle between the calls: the first ran on registered buffers; from the second on they are not.
      if (call == 0)
        for (void* h : handles) TUTTI_NCCL_CHECK(ncclCommDeregister(comm, h));
    }
  });
  INFO(failures);
  REQUIRE(failures.empty());
  // The first call of each rank was zero-copy, the later ones not (3 ranks, one launch each).
  const std::vector<std::string> direct = log.linesWith("AllGather #");
  size_t zeroCopy = 0, copied = 0;
  for (const std::string& line : direct) {
    if (line.find("count 40001") == std::string::npos) continue;
    (line.find("zero-copy") != std::string::npos ? zeroCopy : copied)++;
  }
  CHECK(zeroCopy == size_t(nranks));
  CHECK(copied == size_t(2 * nranks));
}

TEST_CASE(
    "zero-copy: buffers registered as windows (ncclCommWindowRegister) go zero-copy and give the copied path's bytes",
    "[register][zero-copy][window]") {
  tutti_test::CapturedLog log("TRACE", "COLL");
  const std::vector<Case> cases = zeroCopyCases(3, true);
  std::string failures = tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases) {
      std::vector<char> copied, direct;
      tutti_test::runCase(c, rank, n, comm, nullptr, &copied);
      MemAllocBuffers windows(comm, true, true, true);
      tutti_test::runCase(c, rank, n, comm, &windows, &direct);
      tutti_test::check(copied == direct,
                        tutti_test::describe(c, rank, n) + ": the windows' result differs from the copied one");
    }
  });
  INFO(failures);
  REQUIRE(failures.empty());
  CHECK(!log.linesWith("zero-copy: peers read the input and output in place").empty());
}

namespace {

// Every case's output by rank, from runs of `nranks` ranks (threads, or processes: each writes its
// own entry, and processes hand theirs back through shared memory by comparing there instead).
using Outputs = std::vector<std::vector<std::vector<char>>>;

// Runs the cases as rank threads on unregistered buffers, malloc'd per call and poisoned as soon as
// the call returns (a peer still reading one afterwards shows as a wrong result), each against the
// float64 reference; returns each rank's outputs, and adds the messages read in place to *reads.
Outputs runUnregistered(int nranks, const std::vector<Case>& cases, bool onStream, uint64_t* reads) {
  Outputs outputs(size_t(nranks), std::vector<std::vector<char>>(cases.size()));
  std::atomic<uint64_t> inPlace{0};
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    uint64_t before = 0, after = 0;
    TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &before));
    for (size_t i = 0; i < cases.size(); i++) {
      MemAllocBuffers plain(comm, false, true, false, onStream);  // malloc'd, not registered
      tutti_test::runCase(cases[i], rank, n, comm, &plain, &outputs[size_t(rank)][i]);
    }
    TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &after));
    inPlace += after - before;
  });
  INFO(nranks << " ranks" << (onStream ? ", host stream" : ", null stream"));
  INFO(failures);
  REQUIRE(failures.empty());
  *reads += inPlace.load();
  return outputs;
}

// The cases on unregistered buffers read in place (TUTTI_READ_IN_PLACE=1, every message size) and
// copied (TUTTI_READ_IN_PLACE=0) must give the same bytes; returns the messages read in place by
// the first and by the second.
std::pair<uint64_t, uint64_t> compareUnregistered(int nranks, const char* algorithm, bool onStream, bool small) {
  tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
  const std::vector<Case> cases = zeroCopyCases(nranks, small);
  uint64_t readsInPlace = 0, readsCopied = 0;
  Outputs direct, copied;
  {
    tutti_test::ScopedEnv on("TUTTI_READ_IN_PLACE", "1");
    tutti_test::ScopedEnv every("TUTTI_READ_IN_PLACE_MIN", "0");
    direct = runUnregistered(nranks, cases, onStream, &readsInPlace);
  }
  {
    tutti_test::ScopedEnv off("TUTTI_READ_IN_PLACE", "0");
    copied = runUnregistered(nranks, cases, onStream, &readsCopied);
  }
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < cases.size(); i++) {
      INFO(tutti_test::describe(cases[i], r, nranks) << ", NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)"));
      REQUIRE(direct[size_t(r)][i] == copied[size_t(r)][i]);
    }
  return {readsInPlace, readsCopied};
}

}  // namespace

TEST_CASE("zero-copy: unregistered buffers of rank threads are read in place and give the copied path's bytes",
          "[zero-copy][unregistered][device-path]") {
  tutti_test::CapturedLog log("TRACE", "COLL");
  for (const auto& [nranks, algorithm, onStream] :
       {std::tuple{2, "", false}, std::tuple{3, "ring", true}, std::tuple{4, "", true}, std::tuple{5, "tree", false},
        std::tuple{4, "binomial", false}, std::tuple{4, "pat", true}}) {
    const auto [inPlace, copied] = compareUnregistered(nranks, algorithm, onStream, nranks > 2);
    INFO(nranks << " ranks, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)"));
    CHECK(inPlace > 0);
    CHECK(copied == 0);
  }
  CHECK(!log.linesWith("zero-copy where peers reach this rank's memory: the input and output (unregistered)").empty());
}

TEST_CASE("zero-copy: TUTTI_READ_IN_PLACE_MIN copies the smaller messages of unregistered buffers",
          "[zero-copy][unregistered]") {
  // 65537 floats to 3 ranks: no message reaches 1 MiB, so none is read in place; from 64 KiB, some are.
  const std::vector<Case> cases = {{Coll::AllGather, ncclFloat32, ncclSum, 65537, false, 0},
                                   {Coll::Broadcast, ncclFloat32, ncclSum, 65537, false, 2},
                                   {Coll::AllReduce, ncclFloat32, ncclSum, 65537, true, 0}};
  tutti_test::ScopedEnv on("TUTTI_READ_IN_PLACE", "1");
  uint64_t large = 0, medium = 0;
  {
    tutti_test::ScopedEnv min("TUTTI_READ_IN_PLACE_MIN", "1M");
    runUnregistered(3, cases, false, &large);
  }
  {
    tutti_test::ScopedEnv min("TUTTI_READ_IN_PLACE_MIN", "16K");
    runUnregistered(3, cases, false, &medium);
  }
  CHECK(large == 0);
  CHECK(medium > 0);
}

TEST_CASE(
    "ncclCommWindowRegister: symmetric windows of different sizes, or flags that differ, fail every rank naming the "
    "peer",
    "[register][window][arguments]") {
  for (bool flagsDiffer : {false, true}) {
    std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
      std::vector<char> buf(8192);
      ncclWindow_t win = nullptr;
      const size_t size = !flagsDiffer && rank == 1 ? 4096 : 8192;
      const int flags = flagsDiffer && rank == 1 ? NCCL_WIN_DEFAULT : NCCL_WIN_COLL_SYMMETRIC;
      const ncclResult_t result = ncclCommWindowRegister(comm, buf.data(), size, &win, flags);
      const std::string message = ncclGetLastError(comm);
      const std::string other = "rank " + std::to_string(1 - rank) + " (";
      tutti_test::check(result == ncclInvalidUsage && message.find(other) != std::string::npos &&
                            message.find(flagsDiffer ? "winFlags" : "symmetric window") != std::string::npos,
                        "rank " + std::to_string(rank) + " got " + ncclGetErrorString(result) + ": " + message);
    });
    INFO((flagsDiffer ? "flags differ: " : "sizes differ: ") << failures);
    CHECK(failures.empty());
  }
}

// Ranks as processes of this host (shm between them): the receiver reads a peer's registered
// buffer in its process with process_vm_readv (TUTTI_CMA; transports/shm). Every case against the
// float64 reference (runCase) and bitwise against the copied run; tuttiCommZeroCopyReads says
// whether messages were read in place: never on unregistered buffers, on registered ones only
// when `reads`.
namespace {

// Waits (up to 30 s) until a worker of comm sleeps in a wait: its operation has done all it can
// before its peer moves (published its sends, copied what it holds).
bool waitUntilBlocked(ncclComm_t comm) {
  char text[4096];
  for (int i = 0; i < 30000; i++) {
    if (tuttiCommDescribeWait(comm, text, sizeof text) == ncclSuccess && text[0] != '\0') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// One rank's side of the comparisons of zero-copy across processes: every case run the copied
// way and then through registered buffers must give the same bytes; the copied runs read nothing
// in place, the registered ones something where `reads` (else nothing, `noReadsBecause` says why).
template <typename RunCopied, typename RunRegistered>
void checkRegisteredAgainstCopied(const std::vector<Case>& cases, int rank, int n, ncclComm_t comm, bool reads,
                                  const std::string& noReadsBecause, RunCopied&& runCopied,
                                  RunRegistered&& runRegistered) {
  uint64_t readsCopied = 0, readsRegistered = 0;
  for (const Case& c : cases) {
    std::vector<char> copied, direct;
    uint64_t before = 0, middle = 0, after = 0;
    TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &before));
    runCopied(c, &copied);
    TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &middle));
    runRegistered(c, &direct);
    TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &after));
    readsCopied += middle - before;
    readsRegistered += after - middle;
    tutti_test::check(copied == direct, tutti_test::describe(c, rank, n) +
                                            ": the registered buffers' result differs from the copied one");
  }
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + ")";
  tutti_test::check(readsCopied == 0,
                    who + " read " + std::to_string(readsCopied) + " messages in place from unregistered buffers");
  if (reads)
    tutti_test::check(readsRegistered > 0, who + " read no message in place from its peers' registered buffers");
  else
    tutti_test::check(readsRegistered == 0,
                      who + " read " + std::to_string(readsRegistered) + " messages in place " + noReadsBecause);
}

void requireSameAsCopiesAcrossProcesses(int nranks, const char* algorithm, bool small, bool reads) {
  tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
  tutti_test::ScopedEnv registeredOnly("TUTTI_READ_IN_PLACE", "0");
  const std::vector<Case> cases = zeroCopyCases(nranks, small);
  std::string failures = tutti_test::runProcesses(nranks, [&](int rank, int n, ncclComm_t comm) {
    checkRegisteredAgainstCopied(
        cases, rank, n, comm, reads, "with TUTTI_CMA=0",
        [&](const Case& c, std::vector<char>* out) { tutti_test::runCase(c, rank, n, comm, nullptr, out); },
        [&](const Case& c, std::vector<char>* out) {
          MemAllocBuffers buffers(comm, true, true);
          tutti_test::runCase(c, rank, n, comm, &buffers, out);
        });
  });
  INFO(nranks << " rank processes, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)") << ", reads " << reads);
  INFO(failures);
  REQUIRE(failures.empty());
}

}  // namespace

TEST_CASE("zero-copy across processes: registered buffers read with process_vm_readv give the copied path's bytes",
          "[register][zero-copy][processes][cma]") {
  tutti_test::ScopedEnv cma("TUTTI_CMA", "1");
  tutti_test::CapturedLog log("INFO", "SHM");
  requireSameAsCopiesAcrossProcesses(2, "", false, true);
  requireSameAsCopiesAcrossProcesses(3, "ring", true, true);
  requireSameAsCopiesAcrossProcesses(4, "tree", true, true);
  CHECK(!log.linesWith("zero-copy across processes: registered buffers of pid").empty());
}

TEST_CASE("zero-copy across processes: off by default, registered buffers are copied",
          "[register][zero-copy][processes][cma]") {
  tutti_test::ScopedEnv cma("TUTTI_CMA", nullptr);
  tutti_test::CapturedLog log("INFO", "SHM");
  requireSameAsCopiesAcrossProcesses(2, "", true, false);
  CHECK(log.linesWith("are read in place (process_vm_readv)").empty());
}

TEST_CASE("zero-copy across processes: TUTTI_CMA=0 copies registered buffers, and says so",
          "[register][zero-copy][processes][cma]") {
  tutti_test::ScopedEnv cma("TUTTI_CMA", "0");
  tutti_test::CapturedLog log("INFO", "SHM");
  requireSameAsCopiesAcrossProcesses(2, "", true, false);
  CHECK(!log.linesWith("zero-copy across processes off, copying: TUTTI_CMA=0").empty());
  CHECK(log.linesWith("are read in place (process_vm_readv)").empty());
}

TEST_CASE("zero-copy across processes: unregistered buffers read with process_vm_readv give the copied path's bytes",
          "[zero-copy][unregistered][processes][cma]") {
  tutti_test::ScopedEnv cma("TUTTI_CMA", "1");
  for (const auto& [nranks, algorithm] : {std::pair{2, ""}, std::pair{3, "ring"}, std::pair{4, "tree"}}) {
    tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
    tutti_test::ScopedEnv on("TUTTI_READ_IN_PLACE", "1");
    tutti_test::ScopedEnv every("TUTTI_READ_IN_PLACE_MIN", "0");
    const std::vector<Case> cases = zeroCopyCases(nranks, nranks > 2);
    std::string failures = tutti_test::runProcesses(nranks, [&](int rank, int n, ncclComm_t comm) {
      // This communicator reads in place; a child split off after TUTTI_READ_IN_PLACE=0 copies.
      auto run = [&](ncclComm_t c, std::vector<std::vector<char>>* outputs) {
        uint64_t before = 0, after = 0;
        TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(c, &before));
        for (const Case& one : cases) {
          MemAllocBuffers plain(c, false, true);  // malloc'd, not registered, poisoned after each call
          outputs->emplace_back();
          tutti_test::runCase(one, rank, n, c, &plain, &outputs->back());
        }
        TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(c, &after));
        return after - before;
      };
      std::vector<std::vector<char>> direct, copied;
      const uint64_t inPlace = run(comm, &direct);
      setenv("TUTTI_READ_IN_PLACE", "0", 1);
      ncclComm_t copying = nullptr;
      TUTTI_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &copying, nullptr));
      const uint64_t readsCopying = run(copying, &copied);
      TUTTI_NCCL_CHECK(ncclCommDestroy(copying));
      const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + ")";
      tutti_test::check(inPlace > 0, who + " read no message of its peers' unregistered buffers in place");
      tutti_test::check(readsCopying == 0, who + " read " + std::to_string(readsCopying) +
                                               " messages in place with TUTTI_READ_IN_PLACE=0");
      for (size_t i = 0; i < cases.size(); i++)
        tutti_test::check(direct[i] == copied[i], tutti_test::describe(cases[i], rank, n) +
                                                      ": read in place, the result differs from the copied one");
    });
    INFO(nranks << " rank processes, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)"));
    INFO(failures);
    REQUIRE(failures.empty());
  }
}

TEST_CASE(
    "zero-copy across processes: a sender whose buffer vanishes under a read fails the reader naming it and its pid",
    "[register][zero-copy][processes][cma][faults]") {
  // Rank 0 publishes its registered input by address, then unmaps it (a user's error, and the
  // one way to make process_vm_readv fail with the peer alive: EFAULT) before rank 1 reads it.
  tutti_test::ScopedEnv cma("TUTTI_CMA", "1");
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "20");
  tutti_test::ScopedEnv algo("NCCL_ALGO", "ring");
  // One channel, one worker: once it sleeps, rank 0 has sent and copied all it can.
  tutti_test::ScopedEnv channels("NCCL_MAX_NCHANNELS", "1");
  struct State {
    std::atomic<int> senderPid{0};
    std::atomic<int> published{0};
  };
  tutti_test::SharedWithChildren<State> state;
  const size_t count = 1 << 16;
  std::string failures = tutti_test::runProcesses(
      2,
      [&](int rank, int n, ncclComm_t comm) {
        const size_t bytes = count * sizeof(float);
        // Warm up: connections made and the verdicts posted.
        std::vector<float> warm(count * size_t(n));
        TUTTI_NCCL_CHECK(
            ncclAllGather(warm.data() + size_t(rank) * count, warm.data(), count, ncclFloat32, comm, nullptr));
        void* in = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        tutti_test::check(in != MAP_FAILED, "mmap failed");
        std::vector<float> out(count * size_t(n));
        void* handle = nullptr;
        TUTTI_NCCL_CHECK(ncclCommRegister(comm, in, bytes, &handle));
        std::thread unmapper;
        if (rank == 0) {
          state->senderPid.store(int(getpid()));
          // Rank 0's first step sends its input by address; the unmap follows once rank 0 waits for
          // rank 1's block, which comes only after the unmap.
          unmapper = std::thread([&] {
            waitUntilBlocked(comm);
            munmap(in, bytes);
            state->published.store(1);
          });
        } else {
          while (state->published.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const ncclResult_t result = ncclAllGather(in, out.data(), count, ncclFloat32, comm, nullptr);
        if (unmapper.joinable()) unmapper.join();
        const std::string message = ncclGetLastError(comm);
        if (rank == 1) {
          tutti_test::check(result == ncclSystemError, "rank 1: the all-gather returned " +
                                                           std::string(ncclGetErrorString(result)) + ": " + message);
          tutti_test::check(message.find("rank 0 (") != std::string::npos &&
                                message.find("pid " + std::to_string(state->senderPid.load())) != std::string::npos &&
                                message.find("process_vm_readv") != std::string::npos &&
                                message.find("EFAULT") != std::string::npos,
                            "rank 1's error does not name rank 0, its pid " + std::to_string(state->senderPid.load()) +
                                " and the failed read: " + message);
        } else {
          tutti_test::check(result != ncclSuccess,
                            "rank 0: the all-gather succeeded with its input unmapped under the reader");
        }
      },
      60);
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("zero-copy across processes: a sender killed while its messages wait to be read fails the reader naming it",
          "[register][zero-copy][processes][cma][faults]") {
  tutti_test::ScopedEnv cma("TUTTI_CMA", "1");
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  tutti_test::ScopedEnv algo("NCCL_ALGO", "ring");
  struct State {
    std::atomic<int> senderPid{0};
    std::atomic<int> killed{0};
  };
  tutti_test::SharedWithChildren<State> state;
  const size_t count = 1 << 16;
  std::string failures = tutti_test::runProcesses(
      2,
      [&](int rank, int n, ncclComm_t comm) {
        std::vector<float> in(count, float(rank + 1)), out(count * size_t(n));
        void* handles[2] = {nullptr, nullptr};
        TUTTI_NCCL_CHECK(ncclCommRegister(comm, in.data(), in.size() * sizeof(float), &handles[0]));
        TUTTI_NCCL_CHECK(ncclCommRegister(comm, out.data(), out.size() * sizeof(float), &handles[1]));
        TUTTI_NCCL_CHECK(ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr));
        if (rank == 0) {
          state->senderPid.store(int(getpid()));
          // Dies inside the next all-gather, after publishing its block by address.
          std::thread([&] {
            waitUntilBlocked(comm);
            state->killed.store(1);
            raise(SIGKILL);
          }).detach();
        } else {
          while (state->killed.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const ncclResult_t result = ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr);
        const std::string message = ncclGetLastError(comm);
        // The read finds the process gone (ESRCH), or the death notice got there first: either way
        // the error is the peer's, naming it and its pid.
        tutti_test::check(result == ncclRemoteError, "rank 1: the all-gather returned " +
                                                         std::string(ncclGetErrorString(result)) + ": " + message);
        tutti_test::check(message.find("rank 0 (") != std::string::npos &&
                              message.find("pid " + std::to_string(state->senderPid.load())) != std::string::npos,
                          "rank 1's error does not name rank 0 and its pid " + std::to_string(state->senderPid.load()) +
                              ": " + message);
      },
      60);
  CHECK(failures == "process 0 died of signal 9\n");
}

// Between rank processes on the emulated device with device memory (TUTTI_EMULATED_MEMORY=device),
// as on GPUs: registered buffers from ncclMemAlloc (memfd pages there, CUDA virtual memory on a
// GPU) are exported and mapped by the peers (runtime/comm/peer_buffers.h), which read them in place.
namespace {

// Every case on unregistered ncclMemAlloc buffers, then on registered ones: the same bytes (and
// each the float64 reference, in runCase). tuttiCommZeroCopyReads: never a read in place from
// unregistered buffers; from registered ones some on every rank when `reads`, none otherwise.
// The ranks reach each other through `transport` (p2p; shm with NCCL_P2P_DISABLE).
void requireMappedSameAsCopies(int nranks, const char* algorithm, bool small, bool reads, bool fromMalloc = false,
                               bool windows = false, const std::string& transport = "p2p") {
  tutti_test::ScopedEnv device("TUTTI_DEVICE", "emulated");
  tutti_test::ScopedEnv memory("TUTTI_EMULATED_MEMORY", "device");
  tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
  const std::vector<Case> cases = zeroCopyCases(nranks, small);
  std::string failures = tutti_test::runProcesses(nranks, [&](int rank, int n, ncclComm_t comm) {
    const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(getpid()) + ")";
    char names[64];
    int nodes = 0;
    TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
    tutti_test::check(names == transport, who + " reached its peers through " + names + ", not " + transport);
    checkRegisteredAgainstCopied(
        cases, rank, n, comm, reads, "where none may be",
        [&](const Case& c, std::vector<char>* out) {
          MemAllocBuffers buffers(comm, false);
          tutti_test::runCase(c, rank, n, comm, &buffers, out);
        },
        [&](const Case& c, std::vector<char>* out) {
          MemAllocBuffers buffers(comm, true, fromMalloc, windows);
          tutti_test::runCase(c, rank, n, comm, &buffers, out);
        });
  });
  INFO(nranks << " rank processes on the emulated device, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)")
              << ", reads " << reads);
  INFO(failures);
  REQUIRE(failures.empty());
}

}  // namespace

TEST_CASE(
    "zero-copy across processes, emulated device: registered ncclMemAlloc buffers mapped by the peers give the copied "
    "path's bytes",
    "[register][zero-copy][processes][emulated]") {
  tutti_test::ScopedEnv map("TUTTI_MAP_REGISTERED", nullptr);  // the default: on
  tutti_test::CapturedLog log("INFO", "REG");
  requireMappedSameAsCopies(2, "", false, true);
  requireMappedSameAsCopies(4, "ring", true, true);
  requireMappedSameAsCopies(4, "tree", true, true);
  CHECK(log.linesWith("is copied").empty());
}

TEST_CASE(
    "zero-copy across processes, emulated device: registered buffers mapped through named handles (legacy CUDA IPC)",
    "[register][zero-copy][processes][emulated]") {
  tutti_test::ScopedEnv ipc("TUTTI_EMULATED_IPC", "handle");
  requireMappedSameAsCopies(2, "ring", true, true);
}

TEST_CASE(
    "zero-copy across processes, emulated device: without virtual memory management ncclMemAlloc gives cuMemAlloc's "
    "memory, mapped by its "
    "legacy IPC handle",
    "[register][zero-copy][processes][emulated][capabilities]") {
  tutti_test::ScopedEnv lacks("TUTTI_EMULATED_LACKS", "vmm");
  requireMappedSameAsCopies(2, "ring", true, true);
}

TEST_CASE("zero-copy across processes, emulated device: buffers registered as windows are mapped by the peers alike",
          "[register][zero-copy][processes][emulated]") {
  requireMappedSameAsCopies(2, "", true, true, false, true);
}

TEST_CASE(
    "zero-copy across processes, emulated device: with NCCL_P2P_DISABLE, through shared segments, registered buffers "
    "are mapped too",
    "[register][zero-copy][processes][emulated]") {
  tutti_test::ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
  requireMappedSameAsCopies(2, "", true, true, false, false, "shm");
}

TEST_CASE("zero-copy across processes, emulated device: TUTTI_MAP_REGISTERED=0 copies registered buffers",
          "[register][zero-copy][processes][emulated]") {
  tutti_test::ScopedEnv map("TUTTI_MAP_REGISTERED", "0");
  requireMappedSameAsCopies(2, "", true, false);
}

TEST_CASE(
    "zero-copy across processes, emulated device: registered buffers not from ncclMemAlloc are copied, and the log "
    "says why",
    "[register][zero-copy][processes][emulated]") {
  tutti_test::CapturedLog log("INFO", "REG");
  requireMappedSameAsCopies(2, "", true, false, true);
  CHECK(!log.linesWith("is copied to the peers in other processes").empty());
  CHECK(!log.linesWith("are not memory from ncclMemAlloc").empty());
}

TEST_CASE(
    "zero-copy across processes, emulated device: a sender killed while its mapped buffer waits to be read fails the "
    "reader naming it",
    "[register][zero-copy][processes][emulated][faults]") {
  tutti_test::ScopedEnv device("TUTTI_DEVICE", "emulated");
  tutti_test::ScopedEnv memory("TUTTI_EMULATED_MEMORY", "device");
  tutti_test::ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  tutti_test::ScopedEnv algo("NCCL_ALGO", "ring");
  struct State {
    std::atomic<int> senderPid{0};
    std::atomic<int> killed{0};
  };
  tutti_test::SharedWithChildren<State> state;
  const size_t count = 1 << 16;
  std::string failures = tutti_test::runProcesses(
      2,
      [&](int rank, int n, ncclComm_t comm) {
        void* in = nullptr;
        void* out = nullptr;
        TUTTI_NCCL_CHECK(ncclMemAlloc(&in, count * sizeof(float)));
        TUTTI_NCCL_CHECK(ncclMemAlloc(&out, count * sizeof(float) * size_t(n)));
        std::vector<float> ones(count, float(rank + 1));
        std::memcpy(in, ones.data(), count * sizeof(float));
        void* handles[2] = {nullptr, nullptr};
        TUTTI_NCCL_CHECK(ncclCommRegister(comm, in, count * sizeof(float), &handles[0]));
        TUTTI_NCCL_CHECK(ncclCommRegister(comm, out, count * sizeof(float) * size_t(n), &handles[1]));
        TUTTI_NCCL_CHECK(ncclAllGather(in, out, count, ncclFloat32, comm, nullptr));
        uint64_t reads = 0;
        TUTTI_NCCL_CHECK(tuttiCommZeroCopyReads(comm, &reads));
        tutti_test::check(reads > 0, "rank " + std::to_string(rank) + " read nothing in place in the first all-gather");
        if (rank == 0) {
          state->senderPid.store(int(getpid()));
          // Dies inside the next all-gather, once it has published its block by address.
          std::thread([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            state->killed.store(1);
            raise(SIGKILL);
          }).detach();
        } else {
          while (state->killed.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const auto start = std::chrono::steady_clock::now();
        const ncclResult_t result = ncclAllGather(in, out, count, ncclFloat32, comm, nullptr);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string message = ncclGetLastError(comm);
        tutti_test::check(result != ncclSuccess, "rank 1: the all-gather succeeded with rank 0 dead");
        tutti_test::check(seconds < 50, "rank 1: the all-gather took " + std::to_string(seconds) + " s to fail");
        tutti_test::check(
            message.find("rank 0 (") != std::string::npos,
            "rank 1's error does not name rank 0 (pid " + std::to_string(state->senderPid.load()) + "): " + message);
      },
      90);
  CHECK(failures == "process 0 died of signal 9\n");
}
