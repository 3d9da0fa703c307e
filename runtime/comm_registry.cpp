// The registry of live communicators: a handle the user destroyed is recognised, not dereferenced.
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "runtime/comm.h"

namespace tutti {
namespace {

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<const ncclComm*>& registry() {
  static std::unordered_set<const ncclComm*> r;
  return r;
}

}  // namespace

void registerComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(comm);
}
// Bumped by every removal: a thread's last positive answer stays valid while it is unchanged.
// Every call checks its communicator, and ranks that are threads of one process would otherwise
// pass the registry's lock (one cache line) between cores on every call.
std::atomic<uint64_t> registryGeneration{0};
struct LastLiveComm {
  const ncclComm* comm = nullptr;
  uint64_t generation = 0;
};
thread_local LastLiveComm tLastLive;

void unregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().erase(comm);
  registryGeneration.fetch_add(1, std::memory_order_release);
}
bool isLiveComm(const ncclComm* comm) {
  const uint64_t generation = registryGeneration.load(std::memory_order_acquire);
  if (comm != nullptr && tLastLive.comm == comm && tLastLive.generation == generation) return true;
  std::lock_guard<std::mutex> lock(registryMutex());
  if (registry().count(comm) == 0) return false;
  tLastLive = {comm, registryGeneration.load(std::memory_order_relaxed)};
  return true;
}

}  // namespace tutti
