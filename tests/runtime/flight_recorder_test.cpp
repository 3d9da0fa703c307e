// The flight recorder's ring (runtime/diagnostics/flight_recorder.h): entries oldest first, states that only
// move forward, wrap-around that drops the oldest, and transitions of replaced operations ignored.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/diagnostics/flight_recorder.h"

using tutti::FlightCall;
using tutti::FlightRecorder;
using tutti::FlightState;

namespace {

FlightCall callOf(uint64_t seq) {
  FlightCall c;
  c.seq = seq;
  c.signature = 1000 + seq;
  c.count = 10 * seq + 1;
  c.nchannels = 2;
  c.root = int32_t(seq % 3);
  c.algorithm = seq % 2 ? "ring" : "a-name-longer-than-twenty-three-characters";
  return c;
}

}  // namespace

TEST_CASE("flight recorder: entries keep their calls and move queued, running, done", "[flight]") {
  FlightRecorder r(8);
  for (uint64_t s = 0; s < 3; s++) r.queued(callOf(s), 100 + int64_t(s));
  r.running(0, 200);
  r.done(0, 300);
  r.running(1, 210);
  r.failed(2, 220);
  r.running(2, 230);  // a failed operation does not start again
  r.done(0, 400);     // ended already: the first end stands
  auto e = r.snapshot();
  REQUIRE(e.size() == 3);
  for (uint64_t s = 0; s < 3; s++) {
    CHECK(e[s].seq == s);
    CHECK(e[s].signature == 1000 + s);
    CHECK(e[s].count == 10 * s + 1);
    CHECK(e[s].root == int32_t(s % 3));
    CHECK(e[s].queuedNs == 100 + int64_t(s));
  }
  CHECK(e[0].state == FlightState::Done);
  CHECK(e[0].startedNs == 200);
  CHECK(e[0].endedNs == 300);
  CHECK(e[1].state == FlightState::Running);
  CHECK(e[1].endedNs == 0);
  CHECK(e[2].state == FlightState::Failed);
  CHECK(e[2].startedNs == 0);
  CHECK(std::string(e[1].algorithm) == "ring");
  CHECK(std::string(e[0].algorithm) == std::string("a-name-longer-than-twenty-three-characters").substr(0, 23));
}

TEST_CASE("flight recorder: the ring keeps the last N, and ignores transitions of replaced operations", "[flight]") {
  const size_t n = GENERATE(size_t(1), size_t(4), size_t(5));
  FlightRecorder r(n);
  const uint64_t total = 13;
  for (uint64_t s = 0; s < total; s++) r.queued(callOf(s), int64_t(s + 1));
  r.done(total - 1 - n, 99);  // its slot holds a newer operation now
  auto e = r.snapshot();
  REQUIRE(e.size() == n);
  for (size_t i = 0; i < n; i++) {
    CHECK(e[i].seq == total - n + i);
    CHECK(e[i].state == FlightState::Queued);
    CHECK(e[i].endedNs == 0);
  }
}

TEST_CASE("flight recorder: 0 entries records nothing", "[flight]") {
  FlightRecorder r(0);
  r.queued(callOf(0), 1);
  r.running(0, 2);
  r.done(0, 3);
  CHECK(r.capacity() == 0);
  CHECK(r.snapshot().empty());
}
