// Groups (runtime/launch/group.h): the thread's nesting depth, errors recorded inside a group, and what
// the outermost end does with the tasks collected: launch them together, drop them after an
// error, or only estimate them (groupSimulateEnd). Tasks go straight to enqueueTask, as the C entry
// points hand them over, on the smallest communicators that run them (2 rank threads, host mode).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "runtime/comm/comm.h"
#include "runtime/launch/group.h"
#include "runtime/launch/task.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

namespace {

using tutti::Error;
using tutti::ErrorCode;
using tutti::Task;
using tutti_test::check;
using tutti_test::ScopedEnv;

// Expects fn to throw tutti::Error (InvalidUsage); returns its message.
template <class Fn>
std::string usageErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidUsage);
    return e.what();
  }
  FAIL("no error was thrown");
  return "";
}

Task allReduce(const float* in, float* out, size_t count, ncclComm_t comm) {
  return Task{tutti::plan::Coll::AllReduce, in, out, count, ncclFloat32, ncclSum, 0, comm, nullptr};
}

// Each rank's wait is short, so that a group that launched wrongly fails instead of hanging.
struct ShortWaits {
  ScopedEnv timeout{"TUTTI_TIMEOUT", "10"};
};

}  // namespace

TEST_CASE("group: ending a group that was not started is refused, and nesting counts levels") {
  REQUIRE(tutti::groupDepth() == 0);
  CHECK_THAT(usageErrorOf([] { tutti::groupEnd(); }), Catch::Contains("ncclGroupEnd: not inside a group"));
  CHECK(tutti::groupDepth() == 0);  // the refusal changed nothing
  tutti::groupStart();
  tutti::groupStart();
  tutti::groupStart();
  CHECK(tutti::groupDepth() == 3);
  // The depth is the calling thread's own.
  int elsewhere = -1;
  std::thread([&] { elsewhere = tutti::groupDepth(); }).join();
  CHECK(elsewhere == 0);
  tutti::groupEnd();
  CHECK(tutti::groupDepth() == 2);
  tutti::groupEnd();
  tutti::groupEnd();  // an empty outermost group launches nothing
  CHECK(tutti::groupDepth() == 0);
  CHECK_THROWS_AS(tutti::groupEnd(), Error);
}

TEST_CASE("group: an error recorded inside a group fails its outermost end, drops its tasks, and is forgotten after") {
  ncclComm never;  // the tasks must be dropped unread: this communicator cannot run anything
  float buffer[4] = {};
  tutti::groupRecordError(ncclInvalidArgument);  // outside any group: not kept
  tutti::groupStart();
  REQUIRE_NOTHROW(tutti::groupEnd());
  tutti::groupStart();
  tutti::enqueueTask(allReduce(buffer, buffer, 4, &never));
  tutti::groupStart();
  tutti::enqueueTask(allReduce(buffer, buffer, 4, &never));
  tutti::groupRecordError(ncclInvalidArgument);
  tutti::groupRecordError(ncclInternalError);  // the first one counts; this one changes nothing
  tutti::enqueueTask(allReduce(buffer, buffer, 4, &never));
  tutti::groupEnd();  // inner: nothing happens yet
  CHECK(tutti::groupDepth() == 1);
  const std::string message = usageErrorOf([] { tutti::groupEnd(); });
  CHECK_THAT(message, Catch::Contains("a call inside the group failed") &&
                          Catch::Contains("the group's 3 other operations were dropped"));
  CHECK(tutti::groupDepth() == 0);
  // The next group starts clean: no error, no tasks left over.
  tutti::groupStart();
  REQUIRE_NOTHROW(tutti::groupEnd());
  tutti::groupStart();
  CHECK(tutti::groupSimulateEnd() == 0);
}

TEST_CASE("group: groupSimulateEnd must end the outermost group, and refuses after an error") {
  CHECK_THAT(usageErrorOf([] { tutti::groupSimulateEnd(); }), Catch::Contains("not inside a group"));
  tutti::groupStart();
  tutti::groupStart();
  CHECK_THAT(usageErrorOf([] { tutti::groupSimulateEnd(); }), Catch::Contains("inside a nested group"));
  CHECK(tutti::groupDepth() == 1);  // the inner group was ended
  tutti::groupRecordError(ncclInvalidUsage);
  CHECK_THAT(usageErrorOf([] { tutti::groupSimulateEnd(); }),
             Catch::Contains("ncclGroupSimulateEnd: a call inside the group failed"));
  CHECK(tutti::groupDepth() == 0);
}

TEST_CASE("group: tasks collected in a group run at the outermost end, all of them, not before") {
  ShortWaits waits;
  constexpr size_t kCount = 4099;
  const std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
    std::vector<float> a(kCount), b(kCount), outA(kCount, -1.0f), outB(kCount, -1.0f);
    for (size_t i = 0; i < kCount; i++) {
      a[i] = float(int(i % 61) - 30) * 0.5f + float(rank);
      b[i] = float(i % 7) * float(rank + 1);
    }
    tutti::groupStart();
    tutti::enqueueTask(allReduce(a.data(), outA.data(), kCount, comm));
    tutti::groupStart();
    tutti::enqueueTask(allReduce(b.data(), outB.data(), kCount, comm));
    tutti::groupEnd();
    check(outA[0] == -1.0f && outB[kCount - 1] == -1.0f, "a task ran before the outermost ncclGroupEnd");
    tutti::groupEnd();
    // Float64 references: each rank's inputs are computed here again for the other rank.
    for (size_t i = 0; i < kCount; i++) {
      const double sumA = (double(int(i % 61) - 30) * 0.5 + 0) + (double(int(i % 61) - 30) * 0.5 + 1);
      const double sumB = double(i % 7) * 1 + double(i % 7) * 2;
      if (double(outA[i]) != sumA || double(outB[i]) != sumB)
        check(false, "element " + std::to_string(i) + ": " + std::to_string(outA[i]) + ", " + std::to_string(outB[i]) +
                         " where " + std::to_string(sumA) + ", " + std::to_string(sumB) + " were expected");
    }
  });
  CHECK(failures == "");
  CHECK(tutti::groupDepth() == 0);
}

TEST_CASE(
    "group: a send and a receive each larger than the FIFOs complete only because the group launches them together") {
  ShortWaits waits;
  ScopedEnv buffers("NCCL_BUFFSIZE", "65536");  // a connection holds 64 KiB; each message is 1 MiB
  constexpr size_t kCount = 256 * 1024;
  const std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
    const int other = 1 - rank;
    std::vector<float> sent(kCount), got(kCount, 0.0f);
    for (size_t i = 0; i < kCount; i++) sent[i] = float(i % 1000) + 1000.0f * float(rank);
    tutti::groupStart();
    tutti::enqueueTask(
        Task{tutti::plan::Coll::Send, sent.data(), nullptr, kCount, ncclFloat32, ncclSum, other, comm, nullptr});
    tutti::enqueueTask(
        Task{tutti::plan::Coll::Recv, nullptr, got.data(), kCount, ncclFloat32, ncclSum, other, comm, nullptr});
    tutti::groupEnd();
    for (size_t i = 0; i < kCount; i++)
      if (got[i] != float(i % 1000) + 1000.0f * float(other)) check(false, "element " + std::to_string(i) + " differs");
  });
  CHECK(failures == "");
}

TEST_CASE(
    "group: groupSimulateEnd runs nothing and adds a communicator's operations, taking the longest communicator") {
  ShortWaits waits;
  const std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
    ncclComm_t other = nullptr;
    TUTTI_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &other, nullptr));
    std::vector<float> big(1 << 20, 1.0f), small(64, 1.0f), out(1 << 20, -1.0f);
    auto simulate = [&](const std::vector<Task>& tasks) {
      tutti::groupStart();
      for (const Task& t : tasks) tutti::enqueueTask(t);
      return tutti::groupSimulateEnd();
    };
    const Task bigOnComm = allReduce(big.data(), out.data(), big.size(), comm);
    const Task smallOnComm = allReduce(small.data(), out.data(), small.size(), comm);
    const Task smallOnOther = allReduce(small.data(), out.data(), small.size(), other);
    const double bigAlone = simulate({bigOnComm}), smallAlone = simulate({smallOnComm}),
                 smallOther = simulate({smallOnOther});
    check(bigAlone > smallAlone && smallAlone > 0 && smallOther > 0, "estimates " + std::to_string(bigAlone) + ", " +
                                                                         std::to_string(smallAlone) + ", " +
                                                                         std::to_string(smallOther));
    // One communicator's operations run one after another; communicators side by side.
    const double sameComm = simulate({bigOnComm, smallOnComm});
    check(sameComm == bigAlone + smallAlone, "on one communicator: " + std::to_string(sameComm) + ", not the sum");
    const double twoComms = simulate({bigOnComm, smallOnOther});
    check(twoComms == std::max(bigAlone, smallOther),
          "on two communicators: " + std::to_string(twoComms) + ", not the longest");
    check(out[0] == -1.0f, "groupSimulateEnd ran an operation");
    check(tutti::groupDepth() == 0, "groupSimulateEnd left a group open");
    TUTTI_NCCL_CHECK(ncclCommDestroy(other));
  });
  CHECK(failures == "");
}
