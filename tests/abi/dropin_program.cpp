// An NCCL program as users have them: compiled against NVIDIA's nccl.h and linked to NVIDIA's
// libnccl.so.2. Run with LD_PRELOAD=<tutti's libnccl.so.2> and TUTTI_DEVICE=host it must get
// tutti (checked first: it fails with "not tutti's" otherwise) and correct results from 4 rank
// threads joined by ncclGetUniqueId + ncclCommInitRankConfig, host buffers, NULL streams.
// Usage: abi_dropin <path of tutti's libnccl.so.2>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 4;
constexpr size_t kCount = 777;
constexpr int kBroadcastRoot = 1;

std::string canonical(const char* path) {
  char resolved[PATH_MAX];
  return path != nullptr && realpath(path, resolved) != nullptr ? resolved : (path ? path : "(none)");
}

// True when the libnccl.so.2 this process loaded, and the definition its ncclAllReduce calls
// bind to, are the file at `expected`, and that library hides tutti's own extensions.
bool servedBy(const std::string& expected) {
  void* handle = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    std::fprintf(stderr, "dropin: no libnccl.so.2 is loaded in this process, so not tutti's %s\n", expected.c_str());
    return false;
  }
  link_map* map = nullptr;
  std::string loaded = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 ? canonical(map->l_name) : "(unknown)";
  Dl_info info{};
  void* allReduce = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  std::string binding =
      allReduce != nullptr && dladdr(allReduce, &info) != 0 ? canonical(info.dli_fname) : "(unresolved)";
  bool extensionsHidden = dlsym(handle, "tuttiVersionString") == nullptr;
  dlclose(handle);
  if (loaded != expected || binding != expected) {
    std::fprintf(stderr, "dropin: ncclAllReduce is served by %s (libnccl.so.2 loaded from %s), not tutti's %s\n",
                 binding.c_str(), loaded.c_str(), expected.c_str());
    return false;
  }
  if (!extensionsHidden) {
    std::fprintf(stderr, "dropin: %s exports tuttiVersionString; the drop-in must export NVIDIA's list only\n",
                 expected.c_str());
    return false;
  }
  return true;
}

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw std::runtime_error(std::string(what) + " returned " + ncclGetErrorString(result) + ": " +
                             ncclGetLastError(nullptr));
}

// One rank's communicator, aborted if the rank fails part-way (so peers stop waiting on it).
class RankComm {
 public:
  RankComm(int rank, ncclUniqueId id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;  // NVIDIA's initializer, read by tutti
    config.blocking = 1;
    config.commName = "dropin";
    check(ncclCommInitRankConfig(&comm_, kRanks, id, rank, &config), "ncclCommInitRankConfig");
  }
  ~RankComm() {
    if (comm_ != nullptr) ncclCommAbort(comm_);
  }
  RankComm(const RankComm&) = delete;
  RankComm& operator=(const RankComm&) = delete;
  ncclComm_t get() const { return comm_; }
  void destroy() {
    ncclComm_t comm = comm_;
    comm_ = nullptr;
    check(ncclCommDestroy(comm), "ncclCommDestroy");
  }

 private:
  ncclComm_t comm_ = nullptr;
};

struct RankOutcome {
  long checks = 0;
  long mismatches = 0;
  std::string error;

  template <typename T>
  void expect(const char* what, size_t index, T got, T expected) {
    if (got == expected) {
      ++checks;
      return;
    }
    if (++mismatches <= 5)
      std::fprintf(stderr, "dropin: %s element %zu: got %g, expected %g\n", what, index, static_cast<double>(got),
                   static_cast<double>(expected));
  }
};

void runRank(int rank, ncclUniqueId id, RankOutcome& outcome) {
  RankComm comm(rank, id);
  int count = 0, userRank = -1;
  check(ncclCommCount(comm.get(), &count), "ncclCommCount");
  check(ncclCommUserRank(comm.get(), &userRank), "ncclCommUserRank");
  outcome.expect("ncclCommCount", 0, count, kRanks);
  outcome.expect("ncclCommUserRank", 0, userRank, rank);

  std::vector<float> send(kRanks * kCount), recv(kRanks * kCount);
  auto reset = [&](auto&& input) {
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(input(i));
    std::fill(recv.begin(), recv.end(), -1.0f);
  };

  reset([&](size_t i) { return (rank + 1) * int(i % 9); });
  check(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm.get(), nullptr), "ncclAllReduce");
  for (size_t i = 0; i < kCount; ++i) outcome.expect("AllReduce", i, recv[i], float(10 * int(i % 9)));

  reset([&](size_t i) { return rank * 100 + int(i % 50); });
  check(ncclBroadcast(send.data(), recv.data(), kCount, ncclFloat32, kBroadcastRoot, comm.get(), nullptr),
        "ncclBroadcast");
  for (size_t i = 0; i < kCount; ++i)
    outcome.expect("Broadcast", i, recv[i], float(kBroadcastRoot * 100 + int(i % 50)));

  reset([&](size_t i) { return rank * 1000 + int(i % 333); });
  check(ncclAllGather(send.data(), recv.data(), kCount, ncclFloat32, comm.get(), nullptr), "ncclAllGather");
  for (int source = 0; source < kRanks; ++source)
    for (size_t i = 0; i < kCount; ++i)
      outcome.expect("AllGather", source * kCount + i, recv[source * kCount + i], float(source * 1000 + int(i % 333)));

  reset([&](size_t j) { return (rank + 1) * (int(j % 5) + 1); });
  check(ncclReduceScatter(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm.get(), nullptr),
        "ncclReduceScatter");
  for (size_t i = 0; i < kCount; ++i)
    outcome.expect("ReduceScatter", i, recv[i], float(10 * (int((rank * kCount + i) % 5) + 1)));

  // A ring exchange: each rank sends to the next and receives from the previous, in one group.
  std::vector<int32_t> ringSend(kCount), ringRecv(kCount, -1);
  for (size_t i = 0; i < kCount; ++i) ringSend[i] = int32_t(rank * 100000 + int(i));
  int next = (rank + 1) % kRanks, previous = (rank + kRanks - 1) % kRanks;
  check(ncclGroupStart(), "ncclGroupStart");
  check(ncclSend(ringSend.data(), kCount, ncclInt32, next, comm.get(), nullptr), "ncclSend");
  check(ncclRecv(ringRecv.data(), kCount, ncclInt32, previous, comm.get(), nullptr), "ncclRecv");
  check(ncclGroupEnd(), "ncclGroupEnd");
  for (size_t i = 0; i < kCount; ++i)
    outcome.expect("Send/Recv ring", i, ringRecv[i], int32_t(previous * 100000 + int(i)));

  comm.destroy();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path of tutti's libnccl.so.2>\n", argv[0]);
    return 2;
  }
  std::string expected = canonical(argv[1]);
  if (!servedBy(expected)) return 3;

  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    std::fprintf(stderr, "dropin: ncclGetVersion gave %d, expected %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "dropin: ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
    return 1;
  }

  std::vector<RankOutcome> outcomes(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank)
    threads.emplace_back([rank, id, &outcomes] {
      try {
        runRank(rank, id, outcomes[rank]);
      } catch (const std::exception& error) {
        outcomes[rank].error = error.what();
      }
    });
  for (std::thread& thread : threads) thread.join();

  long checks = 0, mismatches = 0;
  bool failed = false;
  for (int rank = 0; rank < kRanks; ++rank) {
    checks += outcomes[rank].checks;
    mismatches += outcomes[rank].mismatches;
    if (!outcomes[rank].error.empty()) {
      std::fprintf(stderr, "dropin: rank %d: %s\n", rank, outcomes[rank].error.c_str());
      failed = true;
    }
  }
  if (failed || mismatches != 0) {
    std::fprintf(stderr, "dropin: FAILED (%ld mismatches, %ld checks passed)\n", mismatches, checks);
    return 1;
  }
  std::printf("dropin: %ld checks passed, served by %s\n", checks, expected.c_str());
  return 0;
}
