// The launch cache (runtime/launch/launch_cache.h) on a bare communicator: which shape hits, which
// misses, which launch a hit returns, and which one a full cache drops. The launches are unbound
// CommLaunch objects: the cache only keeps and hands them out, it never looks inside.
#include <catch2/catch.hpp>

#include <set>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/launch_cache.h"

namespace {

using tutti::CommLaunch;
using tutti::LaunchCache;
using tutti::LaunchShape;
namespace plan = tutti::plan;

struct Fixture {
  ncclComm comm;  // bare: no backend, peers or connections; the cache needs none
  plan::AlgorithmRegistry algorithms = plan::builtinAlgorithms();
  const plan::Algorithm* first() const { return &algorithms.all().at(0); }
  const plan::Algorithm* second() const { return &algorithms.all().at(1); }

  LaunchShape shape(size_t count = 1024) const {
    return LaunchShape{plan::Coll::AllReduce, count, ncclFloat32, ncclSum, 0, nullptr, first(), 2};
  }
  // A launch given back for `s`; returns its address, to recognise it when it comes back.
  CommLaunch* giveBack(const LaunchShape& s) {
    auto launch = std::make_unique<CommLaunch>(&comm, s.stream);
    CommLaunch* raw = launch.get();
    tutti::launchCacheOf(&comm);  // made by the caller's first launch, before any give-back
    tutti::giveBackLaunch(&comm, s, std::move(launch));
    return raw;
  }
  size_t idle() { return tutti::launchCacheOf(&comm).idle.size(); }
};

}  // namespace

TEST_CASE("launch cache: made once per communicator, on first use") {
  Fixture f;
  CHECK(f.comm.executor.launchCache == nullptr);
  LaunchCache& cache = tutti::launchCacheOf(&f.comm);
  CHECK(&tutti::launchCacheOf(&f.comm) == &cache);
  CHECK(f.comm.executor.launchCache.get() == &cache);
  CHECK(cache.idle.empty());
  // Room for every launch a full stream gives back, so that giving back never allocates.
  CHECK(cache.idle.capacity() > LaunchCache::kMaxIdle);
  CHECK(LaunchCache::kMaxIdle >= tutti::kern::HostStream::kCapacity);
}

TEST_CASE("launch cache: a launch given back is taken by the next call of its shape, once") {
  Fixture f;
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape()) == nullptr);  // a miss on an empty cache
  CommLaunch* kept = f.giveBack(f.shape());
  CHECK(f.idle() == 1);
  std::unique_ptr<CommLaunch> hit = tutti::takeIdleLaunch(&f.comm, f.shape());
  CHECK(hit.get() == kept);
  CHECK(f.idle() == 0);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape()) == nullptr);  // it left the cache with its taker
}

TEST_CASE("launch cache: every field of the shape is part of the key") {
  Fixture f;
  const LaunchShape base = f.shape();
  int streamTag = 0;
  auto with = [&](auto change) {
    LaunchShape s = base;
    change(s);
    return s;
  };
  const std::vector<std::pair<const char*, LaunchShape>> others = {
      {"collective", with([](LaunchShape& s) { s.coll = plan::Coll::ReduceScatter; })},
      {"count", with([](LaunchShape& s) { s.count = 1025; })},
      {"type", with([](LaunchShape& s) { s.type = ncclFloat64; })},
      {"op", with([](LaunchShape& s) { s.op = ncclMax; })},
      {"root", with([](LaunchShape& s) { s.root = 1; })},
      {"stream", with([&](LaunchShape& s) { s.stream = reinterpret_cast<cudaStream_t>(&streamTag); })},
      {"algorithm", with([&](LaunchShape& s) { s.algorithm = f.second(); })},
      {"channels", with([](LaunchShape& s) { s.nchannels = 1; })},
  };
  CommLaunch* kept = f.giveBack(base);
  for (const auto& [field, other] : others) {
    INFO("another " << field);
    CHECK(tutti::takeIdleLaunch(&f.comm, other) == nullptr);
  }
  CHECK(f.idle() == 1);  // the misses left it there
  CHECK(tutti::takeIdleLaunch(&f.comm, base).get() == kept);

  // And each of those shapes finds its own launch among the others.
  std::vector<CommLaunch*> keptOthers;
  for (const auto& entry : others) keptOthers.push_back(f.giveBack(entry.second));
  for (size_t i = others.size(); i-- > 0;) {
    INFO(others[i].first);
    CHECK(tutti::takeIdleLaunch(&f.comm, others[i].second).get() == keptOthers[i]);
  }
  CHECK(f.idle() == 0);
}

TEST_CASE("launch cache: the newest launch of a shape is taken first") {
  Fixture f;
  CommLaunch* older = f.giveBack(f.shape());
  f.giveBack(f.shape(7));
  CommLaunch* newer = f.giveBack(f.shape());
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape()).get() == newer);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape()).get() == older);
  CHECK(f.idle() == 1);  // the other shape's
}

TEST_CASE("launch cache: a full cache drops its oldest launch, whatever its shape") {
  Fixture f;
  // kMaxIdle + 1 launches of distinct shapes (count i): the first one given back goes.
  std::vector<CommLaunch*> kept;
  for (size_t i = 0; i <= LaunchCache::kMaxIdle; i++) kept.push_back(f.giveBack(f.shape(i)));
  CHECK(f.idle() == LaunchCache::kMaxIdle);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(0)) == nullptr);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(1)).get() == kept[1]);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(LaunchCache::kMaxIdle)).get() == kept.back());

  // Full again with one shape: the oldest of them goes, the newest stays.
  for (size_t i = f.idle(); i < LaunchCache::kMaxIdle; i++) f.giveBack(f.shape(5000));
  CHECK(f.idle() == LaunchCache::kMaxIdle);
  CommLaunch* newest = f.giveBack(f.shape(5000));
  CHECK(f.idle() == LaunchCache::kMaxIdle);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(2)) == nullptr);  // the oldest then: gone
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(3)).get() == kept[3]);
  CHECK(tutti::takeIdleLaunch(&f.comm, f.shape(5000)).get() == newest);
}

TEST_CASE("launch cache: launches given back on another thread are each taken exactly once") {
  Fixture f;
  tutti::launchCacheOf(&f.comm);
  constexpr int kLaunches = 300;  // more than the cache holds: some are dropped on the way
  std::vector<CommLaunch*> given(kLaunches);
  std::thread runner([&] {
    for (int i = 0; i < kLaunches; i++) given[size_t(i)] = f.giveBack(f.shape(size_t(i % 3)));
  });
  std::set<CommLaunch*> taken;
  std::vector<std::unique_ptr<CommLaunch>> owned;
  for (int pass = 0; pass < 20000; pass++)
    if (auto L = tutti::takeIdleLaunch(&f.comm, f.shape(size_t(pass % 3)))) {
      CHECK(taken.insert(L.get()).second);
      owned.push_back(std::move(L));
    }
  runner.join();
  for (size_t s = 0; s < 3; s++)
    while (auto L = tutti::takeIdleLaunch(&f.comm, f.shape(s))) {
      CHECK(taken.insert(L.get()).second);
      owned.push_back(std::move(L));
    }
  CHECK(f.idle() == 0);
  CHECK(taken.size() <= size_t(kLaunches));
  // Whatever was taken is among what was given.
  const std::set<CommLaunch*> givenSet(given.begin(), given.end());
  for (CommLaunch* L : taken) CHECK(givenSet.count(L) == 1);
}
