// Tests of the bootstrap's questions (bootstrap::Bootstrap::ask, setAnswerer) with ranks as threads, through
// their inboxes and through the sockets: answers arrive, a peer that never answers and a peer that
// left give no answer by the deadline instead of a hang.
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/runtime/bootstrap_test_support.h"

using namespace tutti;
using namespace tutti::bootstrap_test;

TEST_CASE("bootstrap: every peer answers a question through its answerer") {
  useLoopback();
  bool shortcut = GENERATE(true, false);
  INFO((shortcut ? "same-process shortcut" : "sockets"));
  const int nranks = 4;
  std::vector<ncclUniqueId> ids = makeIds(1);
  bootstrap::BootstrapOptions options;
  options.sameProcessShortcut = shortcut;
  std::vector<std::vector<bootstrap::PeerAnswer>> got(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> bootstrap =
        bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, options);
    bootstrap->setAnswerer([rank](int asker, const std::string& question) {
      return "rank " + std::to_string(rank) + " to rank " + std::to_string(asker) + ": " + question;
    });
    bootstrap->barrier();  // every answerer is set before the first question
    std::vector<int> peers;
    for (int peer = nranks - 1; peer >= 0; --peer)
      if (peer != rank) peers.push_back(peer);
    got[size_t(rank)] = bootstrap->ask(peers, "what from " + std::to_string(rank) + "?", 10.0);
    bootstrap->barrier();  // every question answered before any rank leaves
    bootstrap->setAnswerer(nullptr);
  }));
  for (int rank = 0; rank < nranks; ++rank) {
    INFO("asker rank " << rank);
    REQUIRE(got[size_t(rank)].size() == size_t(nranks - 1));
    for (const bootstrap::PeerAnswer& answer : got[size_t(rank)]) {
      INFO("peer " << answer.peer << ": " << answer.text);
      CHECK(answer.kind == bootstrap::PeerAnswer::Kind::Answered);
      CHECK(answer.text == "rank " + std::to_string(answer.peer) + " to rank " + std::to_string(rank) + ": what from " +
                               std::to_string(rank) + "?");
    }
  }
}

TEST_CASE("bootstrap: a peer that never answers or that left gives no answer by the deadline") {
  useLoopback();
  bool shortcut = GENERATE(true, false);
  INFO((shortcut ? "same-process shortcut" : "sockets"));
  const int nranks = 3;
  std::vector<ncclUniqueId> ids = makeIds(1);
  bootstrap::BootstrapOptions options;
  options.sameProcessShortcut = shortcut;
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> ranks(nranks);
  requireAllOk(runRanks(nranks, [&](int rank) {
    ranks[size_t(rank)] = bootstrap::Bootstrap::create(ids.data(), 1, rank, nranks, options);
    ranks[size_t(rank)]->barrier();  // every rank holds a connection from its neighbours
  }));

  // Rank 1 hangs in its answerer until released; rank 2 answers.
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
  ranks[1]->setAnswerer([&](int, const std::string&) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return released; });
    return std::string("late");
  });
  ranks[2]->setAnswerer([](int, const std::string&) { return std::string("here"); });
  std::vector<bootstrap::PeerAnswer> answers = ranks[0]->ask({1, 2}, "where?", 0.5);
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  changed.notify_all();
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].peer == 1);
  CHECK(answers[0].kind == bootstrap::PeerAnswer::Kind::NoAnswer);
  CHECK(answers[0].text.find("did not answer") != std::string::npos);
  CHECK(answers[1].peer == 2);
  CHECK(answers[1].kind == bootstrap::PeerAnswer::Kind::Answered);
  CHECK(answers[1].text == "here");

  // The late answer, once it comes, is not taken for the next question's.
  ranks[1]->setAnswerer([](int, const std::string& q) { return "now: " + q; });
  answers = ranks[0]->ask({1}, "again?", 10.0);
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].kind == bootstrap::PeerAnswer::Kind::Answered);
  CHECK(answers[0].text == "now: again?");

  // Rank 2 leaves: no hang, and not an answer.
  ranks[2]->setAnswerer(nullptr);
  ranks[2].reset();
  answers = ranks[0]->ask({2}, "still there?", 2.0);
  REQUIRE(answers.size() == 1);
  INFO(answers[0].text);
  CHECK(answers[0].kind != bootstrap::PeerAnswer::Kind::Answered);
  ranks[1]->setAnswerer(nullptr);
}
