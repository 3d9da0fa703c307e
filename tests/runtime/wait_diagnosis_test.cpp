// Tests of the diagnosis of a timed-out wait (runtime/diagnostics/wait_diagnosis.h): the answers' words, and
// the questions along a chain of ranks as threads (through inboxes and through sockets) to a rank
// that never answers or that left.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/diagnostics/wait_diagnosis.h"
#include "tests/runtime/bootstrap_test_support.h"

using namespace tutti;
using namespace tutti::bootstrap_test;

namespace {

RankWait waitingFor(std::vector<int> peers, uint64_t op) {
  RankWait w;
  w.state = RankWaitState::Waiting;
  w.waitsFor = std::move(peers);
  w.opSeq = op;
  w.opName = "AllReduce";
  return w;
}

std::string nameOf(int rank) {
  return "rank " + std::to_string(rank) + " (testhost pid " + std::to_string(1000 + rank) + ")";
}

}  // namespace

TEST_CASE("wait answers: written and read back, and text that is no answer reads as unknown", "[wait_diagnosis]") {
  RankWait back = parseWaitAnswer(encodeWaitAnswer(waitingFor({3, 1}, 42)));
  CHECK(back.state == RankWaitState::Waiting);
  CHECK(back.waitsFor == std::vector<int>{3, 1});
  CHECK(back.opSeq == 42);
  CHECK(back.opName == "AllReduce");
  CHECK(parseWaitAnswer(encodeWaitAnswer(RankWait{})).state == RankWaitState::Idle);
  CHECK(parseWaitAnswer("no answerer").state == RankWaitState::Unknown);
  CHECK(parseWaitAnswer("waiting 3 AllReduce x,y").state == RankWaitState::Unknown);
  CHECK(parseWaitAnswer("waiting").state == RankWaitState::Unknown);
}

TEST_CASE("wait answers: a rank's workers' records give the peers it waits for, once each", "[wait_diagnosis]") {
  std::vector<kern::WaitRecord> records(4);
  records[1].what = kern::WaitFor::Data;
  records[1].peer = 2;
  records[1].opSeq = 9;
  records[1].opName = "Broadcast";
  records[2].what = kern::WaitFor::Space;
  records[2].peer = 5;
  records[2].opSeq = 9;
  records[2].opName = "Broadcast";
  records[3] = records[1];
  RankWait w = waitOfRecords(records);
  CHECK(w.state == RankWaitState::Waiting);
  CHECK(w.waitsFor == std::vector<int>{2, 5});
  CHECK(w.opSeq == 9);
  CHECK(w.opName == "Broadcast");
  CHECK(waitOfRecords(std::vector<kern::WaitRecord>(3)).state == RankWaitState::Idle);
}

TEST_CASE("wait diagnosis: the chain is followed to a rank that never answers or that left") {
  useLoopback();
  bool shortcut = GENERATE(true, false);
  bool left = GENERATE(false, true);
  INFO((shortcut ? "same-process shortcut" : "sockets") << (left ? ", rank 3 left" : ", rank 3 hangs"));
  const int nranks = 4;
  std::vector<ncclUniqueId> ids = makeIds(1);
  bootstrap::BootstrapOptions options;
  options.sameProcessShortcut = shortcut;
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    ranks[size_t(rank)] = bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, options);
    ranks[size_t(rank)]->barrier();
  }));
  // Rank 0 waits for 1, which waits for 2, which waits for 3; rank 3 hangs in its answer or left.
  ranks[1]->setAnswerer([](int, const std::string&) { return encodeWaitAnswer(waitingFor({2}, 8)); });
  ranks[2]->setAnswerer([](int, const std::string&) { return encodeWaitAnswer(waitingFor({3}, 8)); });
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
  if (left) {
    ranks[3].reset();
  } else {
    ranks[3]->setAnswerer([&](int, const std::string&) {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return released; });
      return std::string("idle");
    });
  }
  std::string cause = diagnoseWait(*ranks[0], waitingFor({1}, 8), nameOf, 2.0);
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  changed.notify_all();
  INFO(cause);
  CHECK(
      cause.find(
          "rank 0 waits for rank 1 in AllReduce #8, which waits for rank 2 in AllReduce #8, which waits for rank 3") ==
      0);
  CHECK(cause.find(nameOf(3)) != std::string::npos);
  if (left)
    CHECK(cause.find("could not be reached") != std::string::npos);
  else
    CHECK(cause.find("did not answer within 1 s: stopped or hung") != std::string::npos);
  for (auto& rank : ranks)
    if (rank) rank->setAnswerer(nullptr);
}
