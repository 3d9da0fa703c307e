// Questions between the ranks of one bootstrap: a rank asks peers a short question and gathers
// their answers by a deadline (see Bootstrap::ask and Bootstrap::setAnswerer).
//
// A peer's listener thread only queues a question; one thread of the peer's bootstrap, started at
// the first question, runs the answerer and sends the answer back, so that an answer never holds
// up the listener (nor, between threads of one process, the asker's own send).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace tutti::bootstrap {

// What one peer said to a question (Bootstrap::ask).
struct PeerAnswer {
  enum class Kind { Answered, NoAnswer, Unreachable };
  int peer = -1;
  Kind kind = Kind::NoAnswer;
  std::string text;  // Answered: the answer; otherwise why there is none
};

}  // namespace tutti::bootstrap

namespace tutti::bootstrap {

// What the questions need of the rank side that carries them.
class QuestionCarrier {
 public:
  virtual ~QuestionCarrier() = default;
  // Non-empty when the peer's connection to us has ended without a goodbye-less reconnect: why.
  virtual std::string peerGoneReason(int peer) = 0;
  // One attempt to hand a question (answer false) or an answer to a peer by the deadline. Throws Error.
  virtual void sendQuestionMessage(int peer, bool answer, const std::string& payload, SteadyTime deadline,
                                   const std::atomic<bool>* stop) = 0;
};

class Questions {
 public:
  using Answerer = std::function<std::string(int asker, const std::string& question)>;

  Questions(std::string context, QuestionCarrier& carrier);
  ~Questions() { stop(); }
  Questions(const Questions&) = delete;
  Questions& operator=(const Questions&) = delete;

  // Asks every peer in peers the question; returns one PeerAnswer per peer, in that order, by
  // the deadline at the latest.
  std::vector<PeerAnswer> ask(const std::vector<int>& peers, const std::string& question, double seconds);
  // Setting an empty answerer waits for a running call to finish; without one, a question is
  // answered "no answerer".
  void setAnswerer(Answerer answerer);

  // The listener side: a question or an answer arrived (payload: an 8-byte id, then the text).
  void deliver(int sender, bool answer, const std::string& payload);
  // Ends the answering thread; before the carrier's connections go.
  void stop();

 private:
  struct Pending {
    int peer;
    bool done = false;
    std::string text;
  };
  struct Question {
    int asker;
    std::string payload;
  };
  void answerLoop();  // the answering thread

  const std::string context_;
  QuestionCarrier& carrier_;

  std::mutex answererMutex_;
  Answerer answerer_;  // under answererMutex_

  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t nextId_ = 1;
  std::map<uint64_t, Pending> pending_;  // questions asked, by id
  std::deque<Question> queue_;           // questions to answer
  std::atomic<bool> stop_{false};
  std::thread thread_;  // the answering thread, once a question came
};

}  // namespace tutti::bootstrap
