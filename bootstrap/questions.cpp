// Questions between the ranks of one bootstrap: asking with a deadline, and the answering thread.
#include "bootstrap/questions.h"

#include <cstring>
#include <system_error>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/wire.h"

namespace tutti::bootstrap {

namespace {

// An answer gets this long to leave: the asker waits no longer than its own deadline anyway.
constexpr double kAnswerSeconds = 1.0;
// Questions and answers are short texts.
constexpr size_t kMaxTextBytes = 4096;

std::string withId(uint64_t id, const std::string& text) {
  std::string payload(sizeof id, '\0');
  std::memcpy(payload.data(), &id, sizeof id);
  return payload + text.substr(0, kMaxTextBytes);
}

}  // namespace

Questions::Questions(std::string context, QuestionCarrier& carrier) : context_(std::move(context)), carrier_(carrier) {}

std::vector<PeerAnswer> Questions::ask(const std::vector<int>& peers, const std::string& question, double seconds) {
  const SteadyTime deadline = deadlineAfter(seconds);
  std::vector<PeerAnswer> answers(peers.size());
  std::vector<uint64_t> ids(peers.size(), 0);
  for (size_t i = 0; i < peers.size(); ++i) {
    answers[i].peer = peers[i];
    std::string gone = carrier_.peerGoneReason(peers[i]);
    if (!gone.empty()) {
      answers[i].kind = PeerAnswer::Kind::Unreachable;
      answers[i].text = gone;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ids[i] = nextId_++;
      pending_.emplace(ids[i], Pending{peers[i], false, std::string()});
    }
    try {
      carrier_.sendQuestionMessage(peers[i], false, withId(ids[i], question), deadline, &stop_);
    } catch (const Error& error) {
      // Nothing answers a question that never left: the peer cannot be reached.
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.erase(ids[i]);
      ids[i] = 0;
      answers[i].kind = error.code() == ErrorCode::Timeout ? PeerAnswer::Kind::NoAnswer : PeerAnswer::Kind::Unreachable;
      answers[i].text = error.message();
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, deadline, [&] {
    for (uint64_t id : ids)
      if (id != 0 && !pending_.at(id).done) return false;
    return true;
  });
  for (size_t i = 0; i < peers.size(); ++i) {
    if (ids[i] == 0) continue;
    Pending& p = pending_.at(ids[i]);
    if (p.done) {
      answers[i].kind = PeerAnswer::Kind::Answered;
      answers[i].text = std::move(p.text);
    } else {
      answers[i].kind = PeerAnswer::Kind::NoAnswer;
      answers[i].text = "did not answer within " + bootstrap::wire::secondsText(seconds);
    }
    pending_.erase(ids[i]);
  }
  return answers;
}

void Questions::setAnswerer(Answerer answerer) {
  std::lock_guard<std::mutex> lock(answererMutex_);
  answerer_ = std::move(answerer);
}

void Questions::deliver(int sender, bool answer, const std::string& payload) {
  uint64_t id = 0;
  if (payload.size() < sizeof id) {
    TUTTI_WARN("%s: a %s of %zu bytes from rank %d, too short for its id; ignored", context_.c_str(),
               answer ? "answer" : "question", payload.size(), sender);
    return;
  }
  std::memcpy(&id, payload.data(), sizeof id);
  std::lock_guard<std::mutex> lock(mutex_);
  if (answer) {
    auto found = pending_.find(id);
    if (found == pending_.end() || found->second.peer != sender) return;  // too late: the asker gave up
    found->second.done = true;
    found->second.text = payload.substr(sizeof id);
    changed_.notify_all();
    return;
  }
  if (stop_.load(std::memory_order_acquire)) return;
  queue_.push_back(Question{sender, payload});
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { answerLoop(); });
    } catch (const std::system_error& error) {
      TUTTI_WARN("%s: cannot start the thread that answers other ranks' questions: %s", context_.c_str(), error.what());
      queue_.clear();
      return;
    }
  }
  changed_.notify_all();
}

void Questions::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Questions::answerLoop() {
  for (;;) {
    Question question;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_.load(std::memory_order_acquire) || !queue_.empty(); });
      if (stop_.load(std::memory_order_acquire)) return;
      question = std::move(queue_.front());
      queue_.pop_front();
    }
    uint64_t id = 0;
    std::memcpy(&id, question.payload.data(), sizeof id);
    std::string text;
    {
      std::lock_guard<std::mutex> lock(answererMutex_);
      text = answerer_ ? answerer_(question.asker, question.payload.substr(sizeof id)) : std::string("no answerer");
    }
    try {
      carrier_.sendQuestionMessage(question.asker, true, withId(id, text), deadlineAfter(kAnswerSeconds), &stop_);
    } catch (const Error& error) {
      TUTTI_INFO(log::Bootstrap, "%s: could not answer rank %d: %s", context_.c_str(), question.asker, error.what());
    }
  }
}

}  // namespace tutti::bootstrap
