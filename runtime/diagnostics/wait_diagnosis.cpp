// Diagnosis of a wait that timed out: the questions along the chain of waits, and the answers.
#include "runtime/diagnostics/wait_diagnosis.h"

#include <algorithm>
#include <sstream>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

namespace tutti {

namespace {

// A peer that says nothing in this long is taken for stopped or hung; a live one answers in
// microseconds (its bootstrap's thread answers, whatever its workers do).
constexpr double kAnswerSeconds = 1.0;

// Why a peer could not be reached: a refused or reset connection, or one closed without a
// goodbye, means its process is gone; a goodbye means it closed its communicator.
std::string unreachableDetail(const std::string& error) {
  bool left =
      error.find("after its goodbye") != std::string::npos || error.find("closed its bootstrap") != std::string::npos;
  return "could not be reached (" + error + (left ? "): it closed its communicator" : "): its process is gone");
}

}  // namespace

std::string encodeWaitAnswer(const RankWait& wait) {
  if (wait.state != RankWaitState::Waiting || wait.waitsFor.empty()) return "idle";
  std::string text =
      "waiting " + std::to_string(wait.opSeq) + " " + (wait.opName.empty() ? std::string("-") : wait.opName) + " ";
  for (size_t i = 0; i < wait.waitsFor.size(); ++i) text += (i ? "," : "") + std::to_string(wait.waitsFor[i]);
  return text;
}

RankWait parseWaitAnswer(const std::string& text) {
  RankWait wait;
  if (text == "idle") {
    wait.state = RankWaitState::Idle;
    return wait;
  }
  std::istringstream in(text);
  std::string word, peers;
  if (!(in >> word) || word != "waiting" || !(in >> wait.opSeq >> wait.opName >> peers)) return RankWait{};
  if (wait.opName == "-") wait.opName.clear();
  std::istringstream list(peers);
  for (std::string peer; std::getline(list, peer, ',');) {
    try {
      wait.waitsFor.push_back(std::stoi(peer));
    } catch (const std::exception&) {
      return RankWait{};
    }
  }
  wait.state = wait.waitsFor.empty() ? RankWaitState::Unknown : RankWaitState::Waiting;
  return wait;
}

RankWait waitOfRecords(const std::vector<kern::WaitRecord>& records) {
  RankWait wait;
  wait.state = RankWaitState::Idle;
  for (const kern::WaitRecord& r : records) {
    if (r.what == kern::WaitFor::Nothing || r.peer < 0) continue;
    if (wait.state != RankWaitState::Waiting) {
      wait.state = RankWaitState::Waiting;
      wait.opSeq = r.opSeq;
      wait.opName = r.opName;
    }
    if (std::find(wait.waitsFor.begin(), wait.waitsFor.end(), r.peer) == wait.waitsFor.end())
      wait.waitsFor.push_back(r.peer);
  }
  return wait;
}

std::string diagnoseWait(bootstrap::Bootstrap& bootstrap, const RankWait& mine,
                         const std::function<std::string(int)>& peerName, double budgetSeconds) {
  const int me = bootstrap.rank();
  const int nranks = bootstrap.nranks();
  if (mine.state != RankWaitState::Waiting) return {};
  WaitGraph graph;
  graph.ranks.resize(size_t(nranks));
  for (int r = 0; r < nranks; ++r) graph.names.push_back(peerName(r));
  graph.ranks[size_t(me)] = mine;
  std::vector<bool> asked(size_t(nranks), false);
  asked[size_t(me)] = true;
  auto next = [&](const RankWait& w, std::vector<int>& frontier) {
    for (int peer : w.waitsFor)
      if (peer >= 0 && peer < nranks && !asked[size_t(peer)]) {
        asked[size_t(peer)] = true;
        frontier.push_back(peer);
      }
  };
  std::vector<int> frontier;
  next(mine, frontier);
  const SteadyTime deadline = deadlineAfter(budgetSeconds);
  while (!frontier.empty()) {
    double left = std::chrono::duration<double>(deadline - SteadyClock::now()).count();
    if (left < 0.05) break;  // the rest stay Unknown
    double seconds = std::min(kAnswerSeconds, left);
    std::vector<bootstrap::PeerAnswer> answers;
    try {
      answers = bootstrap.ask(frontier, kWaitQuestion, seconds);
    } catch (const std::exception& error) {
      TUTTI_INFO(log::Init, "rank %d: asking what the ranks wait for failed: %s", me, error.what());
      break;
    }
    std::vector<int> following;
    for (const bootstrap::PeerAnswer& answer : answers) {
      RankWait& w = graph.ranks[size_t(answer.peer)];
      switch (answer.kind) {
        case bootstrap::PeerAnswer::Kind::Answered:
          w = parseWaitAnswer(answer.text);
          next(w, following);
          break;
        case bootstrap::PeerAnswer::Kind::NoAnswer:
          w.state = RankWaitState::NoAnswer;
          w.detail = "did not answer within " + bootstrap::wire::secondsText(seconds) + ": stopped or hung";
          break;
        case bootstrap::PeerAnswer::Kind::Unreachable:
          w.state = RankWaitState::Gone;
          w.detail = unreachableDetail(answer.text);
          break;
      }
    }
    frontier = std::move(following);
  }
  return findRootCause(graph, me).text;
}

}  // namespace tutti
