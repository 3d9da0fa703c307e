// One rank of a fault-injection run (tests/faults/run.py starts several as processes, in network
// namespaces for the network faults). It joins through NCCL_COMM_ID, runs checked collectives and
// destroys its communicator, printing each phase with a CLOCK_MONOTONIC timestamp, so the driver
// can inject a fault at a chosen phase and time the survivors' errors against the injection.
//
// Usage: fault_rank <rank> <nranks> <iterations> [hold-phase]
//   Phases, in order: init (ncclCommInitRank: bootstrap, exchange, ring connections), connect (the
//   first all-to-all: its direct connections are made inside that call), collective (all-reduces
//   of 64Ki float32, each checked against a float64 reference), destroy (ncclCommDestroy).
//   With hold-phase, the rank announces "holding <phase>" just before entering it and sleeps
//   there, so the driver can kill or stop it with its peers inside that phase.
// Exit status: 0 every call succeeded and every result was right; 3 a call failed (the error is
// printed as "error <phase> ..."); 4 a result was wrong (printed as "WRONG ..."); 2 usage.
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nccl.h"

namespace {

double monotonicSeconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// One line on stdout, flushed at once (the driver reads the file while the rank runs).
void say(int rank, const char* format, ...) {
  char text[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  std::printf("[%.3f] rank %d: %s\n", monotonicSeconds(), rank, text);
  std::fflush(stdout);
}

struct Rank {
  int rank, nranks;
  const char* hold;
  ncclComm_t comm = nullptr;
  const char* phase = "start";

  void enter(const char* name) {
    phase = name;
    if (hold != nullptr && std::string(hold) == name) {
      say(rank, "holding %s", name);
      for (;;) pause();  // until the driver's signal ends this process
    }
    say(rank, "phase %s", name);
  }

  // Reports a failed call and ends the process (after aborting the communicator: that must
  // return, not hang).
  void require(ncclResult_t result, const char* call) {
    if (result == ncclSuccess) return;
    say(rank, "error %s: %s: %s: %s", phase, call, ncclGetErrorString(result), ncclGetLastError(comm));
    if (comm != nullptr) {
      ncclResult_t aborted = ncclCommAbort(comm);
      say(rank, "aborted: %s", ncclGetErrorString(aborted));
    }
    std::exit(3);
  }
};

// What rank r contributes at element i of iteration it: small multiples of 1/4, exact in float32.
float contribution(int r, size_t i, int it) { return float((r + 1) * int(i % 97) + it % 13) * 0.25f; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <rank> <nranks> <iterations> [hold-phase]\n", argv[0]);
    return 2;
  }
  Rank me{std::atoi(argv[1]), std::atoi(argv[2]), argc > 4 ? argv[4] : nullptr};
  const int iterations = std::atoi(argv[3]);
  const int rank = me.rank, nranks = me.nranks;

  me.enter("init");
  ncclUniqueId id;
  me.require(ncclGetUniqueId(&id), "ncclGetUniqueId");  // NCCL_COMM_ID names the root
  me.require(ncclCommInitRank(&me.comm, nranks, id, rank), "ncclCommInitRank");

  me.enter("connect");
  const size_t perPeer = 1024;
  std::vector<int32_t> sendA(perPeer * size_t(nranks)), recvA(sendA.size(), -1);
  for (size_t i = 0; i < sendA.size(); i++) sendA[i] = int32_t(rank * 1000000 + int(i));
  me.require(ncclAlltoAll(sendA.data(), recvA.data(), perPeer, ncclInt32, me.comm, nullptr), "ncclAlltoAll");
  for (int p = 0; p < nranks; p++)
    for (size_t i = 0; i < perPeer; i++) {
      int32_t want = int32_t(p * 1000000 + int(size_t(rank) * perPeer + i));
      if (recvA[size_t(p) * perPeer + i] != want) {
        say(rank, "WRONG all-to-all: element %zu from rank %d is %d, expected %d", i, p, recvA[size_t(p) * perPeer + i],
            want);
        return 4;
      }
    }

  me.enter("collective");
  std::vector<float> buf(size_t(1) << 16);
  for (int it = 0; it < iterations; it++) {
    for (size_t i = 0; i < buf.size(); i++) buf[i] = contribution(rank, i, it);
    me.require(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, me.comm, nullptr),
               "ncclAllReduce");
    for (size_t i = 0; i < buf.size(); i++) {
      double want = 0;
      for (int r = 0; r < nranks; r++) want += double(contribution(r, i, it));
      if (std::fabs(double(buf[i]) - want) > 1e-6 * std::fabs(want)) {
        say(rank, "WRONG all-reduce %d: element %zu is %.9g, expected %.9g", it, i, double(buf[i]), want);
        return 4;
      }
    }
  }
  say(rank, "%d all-reduces checked", iterations);

  me.enter("destroy");
  ncclResult_t destroyed = ncclCommDestroy(me.comm);
  me.comm = nullptr;  // gone even when the destroy failed
  me.require(destroyed, "ncclCommDestroy");
  say(rank, "done");
  return 0;
}
