// net_message_overhead: the host time per small message between two ranks on different "hosts"
// of this machine (NCCL_HOSTID per process), so that every message crosses the network transport
// and the net backend that NCCL_NET picks. Rank 0 and rank 1 ping-pong `bytes` with ncclSend /
// ncclRecv; the figure is half the median round trip of each repetition, in microseconds.
//
//   net_message_overhead [--bytes N] [--iters N] [--reps N] [--compare RUNS]
//
// Compare backends by the environment, e.g. NCCL_NET=Socket, or NCCL_NET=IB with TUTTI_IBVERBS_LIB
// naming the verbs stand-in (or nothing, on a machine with an HCA). Children are killed after 120 s.
//
// --compare RUNS (TUTTI_IBVERBS_LIB naming the stand-in): RUNS pairs of runs, Socket and IB
// alternated, IB on the stand-in's shared-memory wire without data movement
// (TUTTI_IBVERBS_STANDIN_WIRE=shm, TUTTI_IBVERBS_STANDIN_NO_DATA=1), so that what IB's figure holds
// is the backend's per-message host work and the stand-in's control path; prints each run, the
// medians over runs and IB / Socket.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"

namespace {

struct Options {
  size_t bytes = 8;
  int iters = 2000;
  int reps = 7;
  int compare = 0;
};

// Rank 0 also writes its median (a double) to `resultFd` when that is not -1.
int runRank(int rank, const ncclUniqueId& id, const Options& o, int resultFd) {
  setenv("NCCL_HOSTID", rank == 0 ? "overhead-host-a" : "overhead-host-b", 1);
  alarm(120);  // a peer that never comes ends the run
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<char> send(o.bytes, char(rank)), recv(o.bytes);
  int peer = 1 - rank;
  std::vector<double> perMessageUs;
  for (int rep = 0; rep < o.reps + 1; ++rep) {  // the first repetition warms up
    std::vector<double> rtt;
    for (int i = 0; i < o.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      for (int step = 0; step < 2; ++step) {
        bool sending = (step == 0) == (rank == 0);
        ncclResult_t r = sending ? ncclSend(send.data(), o.bytes, ncclInt8, peer, comm, nullptr)
                                 : ncclRecv(recv.data(), o.bytes, ncclInt8, peer, comm, nullptr);
        if (r != ncclSuccess) {
          std::fprintf(stderr, "rank %d: %s: %s\n", rank, sending ? "ncclSend" : "ncclRecv", ncclGetLastError(comm));
          return 1;
        }
      }
      rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(rtt.begin(), rtt.end());
    if (rep > 0) perMessageUs.push_back(rtt[rtt.size() / 2] / 2);
    // (Through the stand-in without data movement the bytes do not arrive: nothing to check.)
    const char* noData = getenv("TUTTI_IBVERBS_STANDIN_NO_DATA");
    bool moved = !(noData && std::strcmp(noData, "1") == 0);
    if (moved && recv[0] != char(peer)) {
      std::fprintf(stderr, "rank %d: wrong bytes received\n", rank);
      return 1;
    }
  }
  ncclCommDestroy(comm);
  if (rank == 0) {
    std::sort(perMessageUs.begin(), perMessageUs.end());
    const char* net = getenv("NCCL_NET");
    double median = perMessageUs[perMessageUs.size() / 2];
    std::printf("net=%s bytes=%zu iters=%d reps=%d per-message-us median=%.2f min=%.2f max=%.2f\n",
                net ? net : "(default)", o.bytes, o.iters, o.reps, median, perMessageUs.front(), perMessageUs.back());
    if (resultFd >= 0 && write(resultFd, &median, sizeof median) != ssize_t(sizeof median)) return 1;
  }
  return 0;
}

// One ping-pong between two fresh rank processes with the environment as it is now: rank 0's
// median per-message time in us, or a negative value when a rank failed.
double runPair(const Options& o) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return -1;
  }
  int result[2];
  if (pipe(result) != 0) return -1;
  std::fflush(stdout);
  pid_t children[2];
  for (int rank = 0; rank < 2; ++rank) {
    children[rank] = fork();
    if (children[rank] == 0) {
      close(result[0]);
      int rc = runRank(rank, id, o, rank == 0 ? result[1] : -1);
      std::fflush(stdout);  // _exit does not flush
      _exit(rc);
    }
  }
  close(result[1]);
  int failures = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  double median = -1;
  if (read(result[0], &median, sizeof median) != ssize_t(sizeof median)) median = -1;
  close(result[0]);
  return failures ? -1 : median;
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// --compare: Socket and IB (stand-in, shared-memory wire, no data movement) alternated.
int compare(const Options& o) {
  const char* standin = getenv("TUTTI_IBVERBS_LIB");
  if (!standin || !*standin) {
    std::fprintf(stderr, "net_message_overhead --compare: TUTTI_IBVERBS_LIB must name the verbs stand-in\n");
    return 2;
  }
  std::vector<double> socketUs, ibUs;
  for (int run = 0; run < o.compare; ++run) {
    setenv("NCCL_NET", "Socket", 1);
    double s = runPair(o);
    setenv("NCCL_NET", "IB", 1);
    setenv("TUTTI_IBVERBS_STANDIN_WIRE", "shm", 1);
    setenv("TUTTI_IBVERBS_STANDIN_NO_DATA", "1", 1);
    double i = runPair(o);
    unsetenv("TUTTI_IBVERBS_STANDIN_WIRE");
    unsetenv("TUTTI_IBVERBS_STANDIN_NO_DATA");
    if (s < 0 || i < 0) {
      std::fprintf(stderr, "net_message_overhead --compare: run %d failed (%s)\n", run + 1, s < 0 ? "Socket" : "IB");
      return 1;
    }
    socketUs.push_back(s);
    ibUs.push_back(i);
  }
  double sm = medianOf(socketUs), im = medianOf(ibUs);
  std::printf(
      "compare runs=%d bytes=%zu: Socket median %.2f us, IB (stand-in shm wire, no data) median %.2f us, IB/Socket "
      "%.2f\n",
      o.compare, o.bytes, sm, im, im / sm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (a == "--bytes" && v >= 1)
      o.bytes = size_t(v);
    else if (a == "--iters" && v >= 1)
      o.iters = int(v);
    else if (a == "--reps" && v >= 1)
      o.reps = int(v);
    else if (a == "--compare" && v >= 1)
      o.compare = int(v);
    else {
      std::fprintf(stderr, "usage: net_message_overhead [--bytes N] [--iters N] [--reps N] [--compare RUNS]\n");
      return 2;
    }
  }
  setenv("TUTTI_DEVICE", "host", 0);
  if (o.compare) return compare(o);
  return runPair(o) < 0 ? 1 : 0;
}
