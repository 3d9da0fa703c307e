// A communicator's cache of finished launches (launch_cache.h).
#include "runtime/launch/launch_cache.h"

#include "runtime/comm/comm.h"
#include "runtime/launch/comm_launch.h"

namespace tutti {

LaunchCache::~LaunchCache() = default;

LaunchCache& launchCacheOf(ncclComm* comm) {
  if (!comm->executor.launchCache) {
    comm->executor.launchCache = std::make_shared<LaunchCache>();
    comm->executor.launchCache->idle.reserve(LaunchCache::kMaxIdle + 1);
  }
  return *comm->executor.launchCache;
}

std::unique_ptr<CommLaunch> takeIdleLaunch(ncclComm* comm, const LaunchShape& shape) {
  LaunchCache& cache = launchCacheOf(comm);
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (size_t i = cache.idle.size(); i-- > 0;)
    if (cache.idle[i].shape == shape) {
      std::unique_ptr<CommLaunch> L = std::move(cache.idle[i].launch);
      cache.idle.erase(cache.idle.begin() + std::ptrdiff_t(i));
      return L;
    }
  return nullptr;
}

void giveBackLaunch(ncclComm* comm, const LaunchShape& shape, std::unique_ptr<CommLaunch> L) {
  LaunchCache& cache = *comm->executor.launchCache;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.idle.size() == LaunchCache::kMaxIdle) cache.idle.erase(cache.idle.begin());  // the oldest
  cache.idle.push_back({shape, std::move(L)});
}

}  // namespace tutti
