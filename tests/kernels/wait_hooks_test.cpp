// WaitHooks (kernels/wait_hooks.h): the defaults a context starts with, and that an executor's
// wait asks the hooks it is given — a mismatch answer ends a stalled wait early, and a timeout
// names the peer in the hooks' words.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "base/error.h"
#include "kernels/host/host_executor.h"
#include "kernels/mailbox.h"
#include "kernels/wait_hooks.h"

using tutti::Error;
using tutti::ErrorCode;
using namespace tutti::kern;

namespace {

// Names peers its own way and answers probes with a fixed text, counting the questions.
class ScriptedHooks final : public WaitHooks {
 public:
  explicit ScriptedHooks(std::string mismatch) : mismatch_(std::move(mismatch)) {}
  std::string describePeer(int peer) const override { return "peer #" + std::to_string(peer) + " on host-b"; }
  std::string probeCall(int peer, uint64_t signature, uint64_t count) const override {
    probes++;
    lastPeer = peer;
    return mismatch_;
  }
  mutable int probes = 0, lastPeer = -1;

 private:
  std::string mismatch_;
};

// A mailbox all-reduce of rank 0 of 2 whose peer never writes its input: the wait sleeps, probes
// and times out as the context says.
void runAlone(const ExecutionContext& ctx) {
  static Mailbox boxes[2];
  static Bell bells[2];
  Mailbox* boxPtrs[2] = {&boxes[0], &boxes[1]};
  Bell* bellPtrs[2] = {&bells[0], &bells[1]};
  float in = 1, out = 0;
  MailboxAllReduce op;
  op.seq = 1;
  op.rank = 0;
  op.nranks = 2;
  op.boxes = boxPtrs;
  op.bells = bellPtrs;
  op.in = &in;
  op.out = &out;
  op.count = 1;
  op.signature = 42;
  ExecutionContext c = ctx;
  c.bell = &bells[0];
  c.spin = 1;
  c.yields = 1;
  runMailboxAllReduce(op, c);
}

}  // namespace

TEST_CASE("wait hooks: a context starts with the defaults: bare rank numbers, no probes, no network", "[wait-hooks]") {
  ExecutionContext ctx;
  REQUIRE(ctx.hooks == &WaitHooks::none());
  CHECK(ctx.describePeer(3) == "rank 3");
  CHECK(ctx.hooks->probeCall(1, 42, 1).empty());
  CHECK_FALSE(ctx.hooks->drivesNetwork());
}

TEST_CASE("wait hooks: a stalled wait fails at once with the hooks' mismatch, not at the timeout", "[wait-hooks]") {
  ScriptedHooks hooks("peer #1 called Broadcast");
  ExecutionContext ctx;
  ctx.hooks = &hooks;
  ctx.timeoutSeconds = 30;
  const auto start = std::chrono::steady_clock::now();
  try {
    runAlone(ctx);
    FAIL("the wait ended without its peer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK(e.message().find("peer #1 called Broadcast") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(hooks.probes == 1);
  CHECK(hooks.lastPeer == 1);
}

TEST_CASE("wait hooks: a timeout names the peer in the hooks' words", "[wait-hooks]") {
  ScriptedHooks hooks("");
  ExecutionContext ctx;
  ctx.hooks = &hooks;
  ctx.timeoutSeconds = 1;
  try {
    runAlone(ctx);
    FAIL("the wait ended without its peer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK(e.message().find("peer #1 on host-b") != std::string::npos);
  }
  CHECK(hooks.probes >= 1);  // asked, from 0.5 s on, and given no answer
}
