// net_message_overhead: the host time per small message between two ranks on different "hosts"
// of this machine (NCCL_HOSTID per process), so that every message crosses the network transport
// and the net backend that NCCL_NET picks. Rank 0 and rank 1 ping-pong `bytes` with ncclSend /
// ncclRecv; the figure is half the median round trip of each repetition, in microseconds.
//
//   net_message_overhead [--bytes N] [--iters N] [--reps N]
//
// Compare backends by the environment, e.g. NCCL_NET=Socket, or NCCL_NET=IB with TUTTI_IBVERBS_LIB
// naming the verbs stand-in (or nothing, on a machine with an HCA). Children are killed after 120 s.
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
};

int runRank(int rank, const ncclUniqueId& id, const Options& o) {
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
    if (recv[0] != char(peer)) {
      std::fprintf(stderr, "rank %d: wrong bytes received\n", rank);
      return 1;
    }
  }
  ncclCommDestroy(comm);
  if (rank == 0) {
    std::sort(perMessageUs.begin(), perMessageUs.end());
    const char* net = getenv("NCCL_NET");
    std::printf("net=%s bytes=%zu iters=%d reps=%d per-message-us median=%.2f min=%.2f max=%.2f\n", net ? net : "(default)",
                o.bytes, o.iters, o.reps, perMessageUs[perMessageUs.size() / 2], perMessageUs.front(), perMessageUs.back());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (a == "--bytes" && v >= 1) o.bytes = size_t(v);
    else if (a == "--iters" && v >= 1) o.iters = int(v);
    else if (a == "--reps" && v >= 1) o.reps = int(v);
    else {
      std::fprintf(stderr, "usage: net_message_overhead [--bytes N] [--iters N] [--reps N]\n");
      return 2;
    }
  }
  setenv("TUTTI_DEVICE", "host", 0);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  std::fflush(stdout);
  pid_t children[2];
  for (int rank = 0; rank < 2; ++rank) {
    children[rank] = fork();
    if (children[rank] == 0) {
      int rc = runRank(rank, id, o);
      std::fflush(stdout);  // _exit does not flush
      _exit(rc);
    }
  }
  int failures = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures ? 1 : 0;
}
