// The registration cache behind ncclCommRegister (runtime/comm/registrations.h).
#include <catch2/catch.hpp>

#include <vector>

#include "base/error.h"
#include "runtime/comm/registrations.h"

using tutti::Registrations;

TEST_CASE("registrations: the same range gives the same handle and counts references") {
  Registrations cache;
  std::vector<char> a(4096), b(4096);
  void* h1 = cache.add(a.data(), a.size());
  void* h2 = cache.add(a.data(), a.size());
  void* h3 = cache.add(a.data(), 1024);  // another range of the same buffer: its own entry
  void* h4 = cache.add(b.data(), b.size());
  CHECK(h1 == h2);
  CHECK(h3 != h1);
  CHECK(h4 != h1);
  CHECK(cache.size() == 3);
  cache.remove(h1, "test");
  CHECK(cache.size() == 3);  // one reference left
  CHECK(cache.covers(a.data() + 100, 200));
  cache.remove(h2, "test");
  CHECK(cache.size() == 2);
  CHECK_THROWS_WITH(cache.remove(h1, "ncclCommDeregister: rank 0"),
                    Catch::Contains("ncclCommDeregister: rank 0") && Catch::Contains("deregistered already"));
  int unrelated = 0;
  CHECK_THROWS_AS(cache.remove(&unrelated, "test"), tutti::Error);
  cache.remove(h3, "test");
  cache.remove(h4, "test");
  CHECK(cache.size() == 0);
}

TEST_CASE("registrations: covers answers for ranges inside one registered range only") {
  Registrations cache;
  std::vector<char> a(1000);
  cache.add(a.data() + 100, 500);  // [100, 600)
  CHECK(cache.covers(a.data() + 100, 500));
  CHECK(cache.covers(a.data() + 599, 1));
  CHECK(cache.covers(a.data() + 600, 0));
  CHECK_FALSE(cache.covers(a.data() + 99, 2));
  CHECK_FALSE(cache.covers(a.data() + 599, 2));
  CHECK_FALSE(cache.covers(a.data() + 700, 1));
  CHECK_FALSE(cache.covers(a.data(), 1000));
}
