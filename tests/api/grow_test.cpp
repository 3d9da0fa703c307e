// ncclCommGrow: two ranks grow to three and four, as threads and as processes, and the grown
// communicator reduces and exchanges correctly while the parent carries on; the arguments it
// refuses, an id used twice, and a failure that every rank hears of within its timeout.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"
#include "tests/common/shared_memory_support.h"

using tutti_test::check;
using tutti_test::runOnThreads;
using tutti_test::ScopedEnv;
using tutti_test::SharedWithChildren;

namespace {

// What the ranks of one grow share: the parent's id, the grow's id once rank 0 made it.
struct GrowMeeting {
  ncclUniqueId parentId;
  ncclUniqueId growId;
  std::atomic<int> growIdReady{0};
};

std::string lastError() { return ncclGetLastError(nullptr); }

// The grow's id, once existing rank 0 has published it (at most 60 s).
ncclUniqueId awaitGrowId(GrowMeeting& meeting, const std::string& who) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (meeting.growIdReady.load() == 0) {
    check(std::chrono::steady_clock::now() < deadline, who + ": existing rank 0 never published the grow's id");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return meeting.growId;
}

// How the existing ranks pass the id: rank 0 (which made it) passes it and the others NULL, as
// NCCL's header says, or all pass it, or all pass NULL (rank 0 then brings the id it made).
enum class OthersPass { Null, Id, AllNull };

// Slot i of nNew: existing ranks (i < nOld) make the parent of nOld ranks and grow it, new ranks
// wait for the id and join; then body(grown, parent) (parent null on new ranks), and both go.
void growSlot(int i, int nOld, int nNew, OthersPass others, GrowMeeting& meeting,
              const std::function<void(int rank, ncclComm_t grown, ncclComm_t parent)>& body) {
  const std::string who = "slot " + std::to_string(i);
  ncclComm_t parent = nullptr, grown = nullptr;
  if (i < nOld) {
    TUTTI_NCCL_CHECK(ncclCommInitRank(&parent, nOld, meeting.parentId, i));
    ncclUniqueId id{};
    if (i == 0) {
      TUTTI_NCCL_CHECK(ncclCommGetUniqueId(parent, &id));
      meeting.growId = id;
      meeting.growIdReady.store(1);
    } else if (others == OthersPass::Id) {
      id = awaitGrowId(meeting, who);
    }
    const bool passId = (i == 0 && others != OthersPass::AllNull) || others == OthersPass::Id;
    TUTTI_NCCL_CHECK(ncclCommGrow(parent, nNew, passId ? &id : nullptr, -1, &grown, nullptr));
  } else {
    const ncclUniqueId id = awaitGrowId(meeting, who);
    TUTTI_NCCL_CHECK(ncclCommGrow(nullptr, nNew, &id, i, &grown, nullptr));
  }
  try {
    body(i, grown, parent);
  } catch (...) {
    ncclCommAbort(grown);
    ncclCommAbort(parent);
    throw;
  }
  TUTTI_NCCL_CHECK(ncclCommDestroy(grown));
  if (parent != nullptr) TUTTI_NCCL_CHECK(ncclCommDestroy(parent));
}

// Sum all-reduces of a few sizes against the float64 reference of every rank's inputs.
void checkedAllReduces(ncclComm_t comm, const std::string& who, size_t seed) {
  int nranks = 0, rank = -1;
  TUTTI_NCCL_CHECK(ncclCommCount(comm, &nranks));
  TUTTI_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  for (size_t count : {size_t(1), size_t(1000), size_t(70001)})
    for (ncclDataType_t type : {ncclFloat32, ncclFloat64}) {
      const size_t bytes = tutti_test::elementBytes(type);
      std::vector<unsigned char> in(count * bytes), out(count * bytes);
      tutti_test::fillInput(type, ncclSum, nranks, rank, in.data(), count, seed);
      TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, type, ncclSum, comm, nullptr));
      const std::string wrong = tutti_test::checkReduced(type, ncclSum, nranks, out.data(), count, seed);
      check(wrong.empty(), who + ": all-reduce of " + std::to_string(count) + " elements over " +
                               std::to_string(nranks) + " ranks: " + wrong);
    }
}

// Each rank sends to the next and receives from the previous; what arrives is the sender's values.
void checkedRingExchange(ncclComm_t comm, const std::string& who) {
  int nranks = 0, rank = -1;
  TUTTI_NCCL_CHECK(ncclCommCount(comm, &nranks));
  TUTTI_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  const size_t count = 33333;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<double> out(count), in(count, -1.0);
  for (size_t k = 0; k < count; k++) out[k] = double(rank) * 1e6 + double(k) * 0.5;
  TUTTI_NCCL_CHECK(ncclGroupStart());
  TUTTI_NCCL_CHECK(ncclSend(out.data(), count, ncclFloat64, next, comm, nullptr));
  TUTTI_NCCL_CHECK(ncclRecv(in.data(), count, ncclFloat64, prev, comm, nullptr));
  TUTTI_NCCL_CHECK(ncclGroupEnd());
  for (size_t k = 0; k < count; k++)
    if (in[k] != double(prev) * 1e6 + double(k) * 0.5) {
      check(false, who + ": element " + std::to_string(k) + " from rank " + std::to_string(prev) + " is " +
                       std::to_string(in[k]));
      return;
    }
}

// The whole check a grown communicator gets: its size and this rank's place, collectives on it,
// and the parent after it.
void checkGrown(int slot, ncclComm_t grown, ncclComm_t parent, int nOld, int nNew) {
  const std::string who = "slot " + std::to_string(slot);
  int count = 0, rank = -1;
  TUTTI_NCCL_CHECK(ncclCommCount(grown, &count));
  TUTTI_NCCL_CHECK(ncclCommUserRank(grown, &rank));
  check(count == nNew, who + ": the grown communicator has " + std::to_string(count) + " ranks");
  check(rank == slot, who + " is rank " + std::to_string(rank) + " of the grown communicator");
  checkedAllReduces(grown, who + " in the grown communicator", 3);
  checkedRingExchange(grown, who + " in the grown communicator");
  if (parent != nullptr) {
    TUTTI_NCCL_CHECK(ncclCommCount(parent, &count));
    check(count == nOld, who + ": the parent has " + std::to_string(count) + " ranks after the grow");
    checkedAllReduces(parent, who + " in the parent", 11);
  }
}

std::string growAsThreads(int nOld, int nNew, OthersPass others) {
  GrowMeeting meeting;
  TUTTI_NCCL_CHECK(ncclGetUniqueId(&meeting.parentId));
  return runOnThreads(nNew, [&](int i) {
    growSlot(i, nOld, nNew, others, meeting,
             [&](int slot, ncclComm_t grown, ncclComm_t parent) { checkGrown(slot, grown, parent, nOld, nNew); });
  });
}

// One process per slot; a process that does not end within the deadline is killed and named.
std::string growAsProcesses(int nOld, int nNew, OthersPass others) {
  SharedWithChildren<GrowMeeting> meeting;
  if (ncclGetUniqueId(&meeting->parentId) != ncclSuccess) return "ncclGetUniqueId: " + lastError();
  return tutti_test::runOnProcesses(
      nNew,
      [&](int i) {
        growSlot(i, nOld, nNew, others, *meeting.operator->(),
                 [&](int slot, ncclComm_t grown, ncclComm_t parent) { checkGrown(slot, grown, parent, nOld, nNew); });
        return std::string();
      },
      180);
}

}  // namespace

TEST_CASE(
    "ncclCommGrow as threads: 2 ranks grow to 3 and to 4, the grown ones reduce and exchange, the parent "
    "carries on",
    "[grow][device-path]") {
  CHECK(growAsThreads(2, 3, OthersPass::Null) == "");
  CHECK(growAsThreads(2, 4, OthersPass::Id) == "");
  CHECK(growAsThreads(2, 3, OthersPass::AllNull) == "");
}

TEST_CASE("ncclCommGrow as processes: 2 ranks grow to 3 and to 4", "[grow][device-path]") {
  CHECK(growAsProcesses(2, 3, OthersPass::Id) == "");
  CHECK(growAsProcesses(2, 4, OthersPass::Null) == "");
}

TEST_CASE("ncclCommGrow refuses bad arguments by name, on every existing rank, and leaves the parent usable",
          "[grow]") {
  ncclUniqueId parentId;
  TUTTI_NCCL_CHECK(ncclGetUniqueId(&parentId));
  GrowMeeting meeting;
  std::string failures = runOnThreads(2, [&](int i) {
    const std::string who = "rank " + std::to_string(i);
    ncclComm_t parent = nullptr, grown = nullptr;
    TUTTI_NCCL_CHECK(ncclCommInitRank(&parent, 2, parentId, i));
    // No existing rank passes an id, and none has made one.
    ncclResult_t r = ncclCommGrow(parent, 3, nullptr, -1, &grown, nullptr);
    check(r == ncclInvalidArgument && lastError().find("no existing rank passed an id") != std::string::npos,
          who + ": " + lastError());
    ncclUniqueId id{};
    if (i == 0) {
      TUTTI_NCCL_CHECK(ncclCommGetUniqueId(parent, &id));
      meeting.growId = id;
      meeting.growIdReady.store(1);
    } else {
      id = awaitGrowId(meeting, who);
    }
    // nRanks not above the parent's size: refused on both ranks (rank 1 passes the bad value),
    // naming the rank.
    r = ncclCommGrow(parent, i == 1 ? 2 : 3, &id, -1, &grown, nullptr);
    check(r == ncclInvalidArgument, who + ": a grow to 2 ranks returned " + std::to_string(int(r)));
    check(lastError().find("nRanks 2 does not exceed") != std::string::npos &&
              lastError().find("rank 1 of the existing ranks") != std::string::npos,
          who + ": " + lastError());
    check(grown == nullptr, who + ": newcomm set by a refused grow");
    // An existing rank that passes a rank of its own.
    r = ncclCommGrow(parent, 3, &id, 1, &grown, nullptr);
    check(r == ncclInvalidArgument && lastError().find("pass -1") != std::string::npos, who + ": " + lastError());
    // The existing ranks disagree on nRanks: both hear of it.
    r = ncclCommGrow(parent, 3 + i, &id, -1, &grown, nullptr);
    check(r == ncclInvalidArgument && lastError().find("every rank passes the same nRanks") != std::string::npos,
          who + ": " + lastError());
    // The parent works after all of them.
    double in = i + 1.5, out = 0;
    TUTTI_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, parent, nullptr));
    check(out == 4.0, who + ": all-reduce after the refusals gave " + std::to_string(out));
    TUTTI_NCCL_CHECK(ncclCommDestroy(parent));
  });
  CHECK(failures == "");

  // A new rank out of range, or without an id, is refused before it meets anyone.
  ncclComm_t grown = nullptr;
  CHECK(ncclCommGrow(nullptr, 3, &parentId, 3, &grown, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("rank 3 is out of range for nRanks 3") != std::string::npos);
  CHECK(ncclCommGrow(nullptr, 3, &parentId, -1, &grown, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommGrow(nullptr, 3, nullptr, 2, &grown, nullptr) == ncclInvalidArgument);
  CHECK(lastError().find("needs the id") != std::string::npos);
  CHECK(ncclCommGrow(nullptr, 0, &parentId, 0, &grown, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommGrow(nullptr, 3, &parentId, 2, nullptr, nullptr) == ncclInvalidArgument);
}

TEST_CASE("ncclCommGrow: an id serves one grow, a second grow with it is refused by name, and a new id works",
          "[grow]") {
  ScopedEnv bootstrapTimeout("TUTTI_BOOTSTRAP_TIMEOUT", "5");
  GrowMeeting meeting;
  TUTTI_NCCL_CHECK(ncclGetUniqueId(&meeting.parentId));
  std::atomic<int> secondIdReady{0};
  ncclUniqueId secondId{};
  std::string failures = runOnThreads(3, [&](int i) {
    const std::string who = "slot " + std::to_string(i);
    growSlot(i, 2, 3, OthersPass::Null, meeting, [&](int slot, ncclComm_t grown, ncclComm_t parent) {
      ncclComm_t again = nullptr;
      if (parent != nullptr) {
        ncclUniqueId used = meeting.growId;
        const ncclResult_t r = ncclCommGrow(parent, 3, slot == 0 ? &used : nullptr, -1, &again, nullptr);
        check(r == ncclInvalidArgument,
              who + ": a second grow with the consumed id returned " + std::to_string(int(r)));
        check(lastError().find("consumed by an earlier ncclCommGrow") != std::string::npos, who + ": " + lastError());
        check(again == nullptr, who + ": newcomm set by the refused grow");
        // The consumed id lets the communicator make another.
        if (slot == 0) {
          TUTTI_NCCL_CHECK(ncclCommGetUniqueId(parent, &secondId));
          secondIdReady.store(1);
        }
      } else {
        // A new rank with the consumed id finds no root; it fails within its bootstrap timeout.
        const auto start = std::chrono::steady_clock::now();
        const ncclUniqueId used = meeting.growId;
        const ncclResult_t r = ncclCommGrow(nullptr, 3, &used, 2, &again, nullptr);
        check(r != ncclSuccess && r != ncclInProgress, who + ": a new rank's grow with a consumed id succeeded");
        check(lastError().find("ncclCommGrow") != std::string::npos, who + ": " + lastError());
        check(tutti_test::secondsSince(start) < 60,
              who + ": the refused grow took " + std::to_string(tutti_test::secondsSince(start)) + " s");
        check(again == nullptr, who + ": newcomm set by the failed grow");
      }
      checkedAllReduces(grown, who + " in the grown communicator after the refusals", 5);
    });
  });
  CHECK(failures == "");
  CHECK(secondIdReady.load() == 1);
}

TEST_CASE(
    "ncclCommGrow: a failure on the existing ranks reaches them all, and the new rank's wait ends with "
    "the missing ranks named",
    "[grow]") {
  ScopedEnv bootstrapTimeout("TUTTI_BOOTSTRAP_TIMEOUT", "4");
  GrowMeeting meeting;
  TUTTI_NCCL_CHECK(ncclGetUniqueId(&meeting.parentId));
  std::string failures = runOnThreads(3, [&](int i) {
    const std::string who = "slot " + std::to_string(i);
    const auto start = std::chrono::steady_clock::now();
    ncclComm_t grown = nullptr;
    if (i < 2) {
      ncclComm_t parent = nullptr;
      TUTTI_NCCL_CHECK(ncclCommInitRank(&parent, 2, meeting.parentId, i));
      ncclUniqueId id{};
      if (i == 0) {
        TUTTI_NCCL_CHECK(ncclCommGetUniqueId(parent, &id));
        meeting.growId = id;
        meeting.growIdReady.store(1);
      }
      // Existing rank 1 passes a bad config: both existing ranks fail naming it.
      ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
      bad.blocking = 7;
      const ncclResult_t r = ncclCommGrow(parent, 3, i == 0 ? &id : nullptr, -1, &grown, i == 1 ? &bad : nullptr);
      check(r == ncclInvalidArgument, who + ": the grow returned " + std::to_string(int(r)));
      check(lastError().find("rank 1 of the existing ranks") != std::string::npos, who + ": " + lastError());
      TUTTI_NCCL_CHECK(ncclCommDestroy(parent));
    } else {
      const ncclUniqueId id = awaitGrowId(meeting, who);
      const ncclResult_t r = ncclCommGrow(nullptr, 3, &id, 2, &grown, nullptr);
      check(r != ncclSuccess && r != ncclInProgress, who + ": the new rank's grow succeeded alone");
      check(lastError().find("never arrived") != std::string::npos, who + ": " + lastError());
    }
    check(grown == nullptr, who + ": newcomm set by a failed grow");
    check(tutti_test::secondsSince(start) < 60,
          who + ": the failed grow took " + std::to_string(tutti_test::secondsSince(start)) + " s");
  });
  CHECK(failures == "");
}
