// The bootstrap's rank side: joining through a root, then a socket network between the ranks with
// allGather, barrier and tagged point-to-point messages.
//
// - Each rank runs one listener thread, an event loop that accepts peers and sorts incoming
//   frames into per-(peer, tag) queues; recv waits on its queue. send connects to the peer on
//   first use and keeps the connection: one connection per ordered pair, so messages of one
//   pair and tag arrive in order. Messages larger than a frame travel as several frames.
// - Deadlines: a rank gives up at its deadline (plus a grace period while waiting for the root's
//   answer, so that the root's better error can arrive).
// - An orderly close says goodbye on every connection it made, so that a peer can tell it from a
//   process that died; failure notices (notices.h) ride on the same messages.
// - Ranks that are threads of one process skip the sockets: a message to a peer whose listener
//   is in this process goes straight into that peer's inbox, and a close tells such peers
//   directly. A thousand ranks as threads would otherwise hold tens of thousands of
//   connections (beyond the descriptor limit) and pay a system call per frame.
#include "bootstrap/bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "base/host_identity.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "bootstrap/id.h"
#include "bootstrap/loop.h"
#include "bootstrap/notices.h"
#include "bootstrap/questions.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"

namespace tutti::bootstrap {

// How long a receive that reached its deadline still waits for a failure notice in flight.
constexpr std::chrono::milliseconds kNoticeGrace{500};

namespace {

using namespace wire;

// Tags below 1000 are ours; a collective's round is added to its base.
constexpr uint32_t kTagAllGather = 100;
constexpr uint32_t kTagBarrier = 200;
constexpr uint32_t kTagNotice = 900;    // a failure notice (broadcastNotice)
constexpr uint32_t kTagQuestion = 910;  // a question (ask)
constexpr uint32_t kTagAnswer = 911;    // its answer
constexpr uint32_t kFirstUserTag = 1000;
// All goodbyes of one close share this deadline; each is one small frame, normally sent at once.
constexpr double kGoodbyeSeconds = 1.0;
// Messages larger than this travel as several frames.
constexpr size_t kDataChunkBytes = 4u << 20;
// What the watching sends and receives watch when their caller gives nothing to watch.
const std::atomic<bool> kNeverStopped{false};

class SocketBootstrap;

// The bootstraps of this process, by listener address. A sender holds the lock (shared) while it
// delivers, and a bootstrap leaves (exclusive) before it is destroyed, so a bootstrap found here
// stays alive for the delivery.
class ProcessBootstraps {
 public:
  static ProcessBootstraps& instance() {
    static auto* registry = new ProcessBootstraps();  // never destroyed: ranks may close after main()
    return *registry;
  }
  void join(const std::string& address, SocketBootstrap* bootstrap) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    byAddress_[address] = bootstrap;
  }
  void leave(const std::string& address) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    byAddress_.erase(address);
  }
  // Runs deliver on the bootstrap listening at address, if it is in this process; false if not.
  template <typename Deliver>
  bool withPeer(const std::string& address, Deliver&& deliver) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto found = byAddress_.find(address);
    if (found == byAddress_.end()) return false;
    deliver(*found->second);
    return true;
  }

 private:
  std::shared_mutex mutex_;
  std::unordered_map<std::string, SocketBootstrap*> byAddress_;
};

class SocketBootstrap final : public Bootstrap, private NoticeCarrier, private QuestionCarrier {
 public:
  SocketBootstrap(int rank, int nranks, double timeoutSeconds, const std::atomic<bool>* abortFlag, const Secret& secret,
                  bool sameProcessShortcut)
      : rank_(rank),
        nranks_(nranks),
        timeoutSeconds_(timeoutSeconds),
        abortFlag_(abortFlag),
        secret_(secret),
        shortcut_(sameProcessShortcut),
        peerGone_(nranks),
        links_(nranks),
        notices_(rank, nranks, context(), *this),
        questions_(context(), *this) {}

  ~SocketBootstrap() override {
    notices_.stop();  // a notice still being sent goes out first, over the links
    questions_.stop();
    if (!listenerText_.empty()) ProcessBootstraps::instance().leave(listenerText_);
    // From here the peers' connections closing is their answer to our close, not a death.
    stopping_.store(true, std::memory_order_release);
    sayGoodbye();
    if (wakeup_) wakeup_->signal();
    if (listenerThread_.joinable()) listenerThread_.join();
  }

  // Opens this rank's listener and starts the thread that serves it. Returns "host:port".
  std::string startListening(const NetworkInterface& interface) {
    listener_ = Socket::listen(interface.address);
    listenerAddress_ = listener_.localAddress();
    wakeup_ = std::make_unique<WakeupEvent>();
    try {
      listenerThread_ = std::thread([this] { listenLoop(); });
    } catch (const std::system_error& error) {
      throw Error(ErrorCode::System, context() + ": starting the listener thread: " + error.what());
    }
    TUTTI_INFO(log::Bootstrap, "%s: listening on %s (interface %s)", context().c_str(),
               listenerAddress_.toString().c_str(), interface.name.c_str());
    listenerText_ = listenerAddress_.toString();
    if (shortcut_) ProcessBootstraps::instance().join(listenerText_, this);
    return listenerText_;
  }

  // Registers with this rank's root and waits for the table of every rank's listener.
  void join(const std::vector<UniqueIdContents>& ids, SteadyTime deadline) {
    int nIds = static_cast<int>(ids.size());
    int block = blockOfRank(rank_, nranks_, nIds);
    const UniqueIdContents& root = ids[block];
    std::string rootText = "the bootstrap root " + root.root.toString() +
                           (nIds > 1 ? " (root " + std::to_string(block) + " of " + std::to_string(nIds) + ")" : "");

    RegistrationPayload registration{};
    registration.rank = rank_;
    registration.nranks = nranks_;
    registration.nIds = nIds;
    registration.block = block;
    registration.timeoutMs = static_cast<uint32_t>(std::min(timeoutSeconds_ * 1000.0, 4.0e9));
    registration.pid = static_cast<uint32_t>(getpid());
    listenerAddress_.toWire(registration.listener);
    ids[0].root.toWire(registration.rootZero);
    registration.rootZeroSecret[0] = ids[0].secret[0];
    registration.rootZeroSecret[1] = ids[0].secret[1];
    std::string host = hostname();
    if (host.empty()) host = "unknown-host";
    std::strncpy(registration.host, host.c_str(), sizeof registration.host - 1);

    FramePolicy answerPolicy(root.secret);
    answerPolicy.allow(kTable, neighbourTablePayloadMaxBytes(nranks_)).allow(kError, kMaxErrorBytes);
    SteadyTime answerDeadline = later(deadline, kRootAnswerGraceSeconds);
    Frame answer;
    for (;;) {
      try {
        Socket socket = Socket::connect(root.root, deadline, abortFlag_);
        registration.remainingMs = millisecondsUntil(deadline);
        sendFrame(socket, kRegister, 0, rank_, root.secret, &registration, sizeof registration, deadline, abortFlag_);
        answer = readFrame(socket, answerPolicy, answerDeadline, abortFlag_);
        break;
      } catch (const Error& error) {
        // A root that closed on us may be a previous job's root on the same NCCL_COMM_ID
        // address finishing; a fresh one comes up there. Try again while there is time.
        if (error.code() == ErrorCode::Remote && SteadyClock::now() + std::chrono::milliseconds(100) < deadline) {
          TUTTI_INFO(log::Bootstrap, "%s: %s: %s; registering again", context().c_str(), rootText.c_str(),
                     error.what());
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        if (error.code() == ErrorCode::Timeout)
          throw Error(ErrorCode::Timeout, context() + ": " + rootText + " did not complete the rendezvous within " +
                                              secondsText(timeoutSeconds_) + " (" + error.message() + ")");
        rethrowWithContext(error, context() + ": joining through " + rootText);
      }
    }
    if (answer.header.type == kError) {
      Error error = errorFromPayload(answer.payload, root.root);
      throw Error(error.code(), context() + ": " + error.message());
    }
    peers_ = neighboursFrom(answer.payload, rootText);
    learnEveryAddress();
    TUTTI_INFO(log::Bootstrap, "%s: joined; %d ranks known", context().c_str(), nranks_);
  }

  // The root's answer: the listeners of this rank's neighbours (wire.h), checked to be
  // exactly those; the other entries stay empty until learnEveryAddress.
  std::vector<SocketAddress> neighboursFrom(const std::vector<uint8_t>& payload, const std::string& rootText) const {
    const std::vector<int> expected = neighbourRanks(rank_, nranks_);
    int32_t header[2] = {0, 0};
    if (payload.size() >= sizeof header) std::memcpy(header, payload.data(), sizeof header);
    if (payload.size() != 8 + expected.size() * kNeighbourEntryBytes || header[0] != nranks_ ||
        header[1] != int32_t(expected.size()))
      throw Error(ErrorCode::Remote,
                  context() + ": " + rootText + " sent a table of " + std::to_string(payload.size()) + " bytes for " +
                      std::to_string(header[0]) + " ranks, expected the " + std::to_string(expected.size()) +
                      " neighbours of rank " + std::to_string(rank_) + " of " + std::to_string(nranks_));
    std::vector<SocketAddress> peers(static_cast<size_t>(nranks_));
    for (size_t i = 0; i < expected.size(); ++i) {
      const uint8_t* entry = payload.data() + 8 + i * kNeighbourEntryBytes;
      int32_t r = -1;
      std::memcpy(&r, entry, sizeof r);
      if (r != expected[i])
        throw Error(ErrorCode::Remote, context() + ": the table from " + rootText + " lists rank " + std::to_string(r) +
                                           " where rank " + std::to_string(expected[i]) + " was expected");
      try {
        peers[size_t(r)] = SocketAddress::fromWire(entry + 8);
      } catch (const Error& error) {
        rethrowWithContext(error, context() + ": the table from " + rootText + ", entry for rank " + std::to_string(r));
      }
    }
    return peers;
  }

  // Every rank's listener, by an allGather among the ranks (which needs only the neighbours').
  void learnEveryAddress() {
    std::vector<WireAddress> table(static_cast<size_t>(nranks_));
    listenerAddress_.toWire(table[size_t(rank_)].data());
    allGather(table.data(), SocketAddress::kWireBytes);
    std::vector<bool> fromRoot(static_cast<size_t>(nranks_), false);
    for (int r : neighbourRanks(rank_, nranks_)) fromRoot[size_t(r)] = true;
    for (int r = 0; r < nranks_; ++r) {
      try {
        SocketAddress address = SocketAddress::fromWire(table[size_t(r)].data());
        if (fromRoot[size_t(r)] && address.toString() != peers_[size_t(r)].toString())
          throw Error(ErrorCode::Remote, "rank " + std::to_string(r) + " says it listens at " + address.toString() +
                                             ", the root said " + peers_[size_t(r)].toString());
        peers_[size_t(r)] = address;
      } catch (const Error& error) {
        rethrowWithContext(error,
                           context() + ": the exchange of listener addresses, entry for rank " + std::to_string(r));
      }
    }
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void broadcastNotice(const std::string& text) override {
    if (!peers_.empty()) notices_.broadcast(text);  // not joined: no peer to tell
  }

  void flushNotices() override { notices_.flush(); }

  void setNoticeHandler(std::function<void(int sender, const std::string& text)> handler) override {
    notices_.setNoticeHandler(std::move(handler));
  }

  void setPeerLostHandler(std::function<void(int peer, const std::string& reason)> handler) override {
    notices_.setPeerLostHandler(std::move(handler));
  }

  std::vector<PeerAnswer> ask(const std::vector<int>& peers, const std::string& question,
                              double timeoutSeconds) override {
    for (int peer : peers) checkPeer(peer, "ask");
    return questions_.ask(peers, question, timeoutSeconds);
  }

  void setAnswerer(std::function<std::string(int asker, const std::string& question)> answerer) override {
    questions_.setAnswerer(std::move(answerer));
  }

  std::string peerAddress(int peer) const override {
    checkPeer(peer, "peerAddress");
    return peers_[peer].toString();
  }

  void send(int peer, uint32_t tag, const void* data, size_t size) override {
    checkUserMessage(peer, tag, data, size, "send");
    sendMessage(peer, tag, data, size, deadlineAfter(timeoutSeconds_), "send");
  }

  void recv(int peer, uint32_t tag, void* data, size_t size, double timeoutSeconds) override {
    checkUserMessage(peer, tag, data, size, "recv");
    double seconds = timeoutSeconds > 0 ? timeoutSeconds : timeoutSeconds_;
    recvMessage(peer, tag, data, size, deadlineAfter(seconds), "recv", seconds);
  }

  bool tryRecv(int peer, uint32_t tag, void* data, size_t size) override {
    checkUserMessage(peer, tag, data, size, "recv");
    return recvMessage(peer, tag, data, size, SteadyTime{}, "recv", 0, nullptr, false);
  }

  void sendWatching(int peer, uint32_t tag, const void* data, size_t size, double timeoutSeconds,
                    const std::atomic<bool>* stop) override {
    checkUserMessage(peer, tag, data, size, "send");
    sendMessage(peer, tag, data, size, deadlineAfter(timeoutSeconds), "send", stop ? stop : &kNeverStopped);
  }

  void recvWatching(int peer, uint32_t tag, void* data, size_t size, double timeoutSeconds,
                    const std::atomic<bool>* stop) override {
    checkUserMessage(peer, tag, data, size, "recv");
    recvMessage(peer, tag, data, size, deadlineAfter(timeoutSeconds), "recv", timeoutSeconds,
                stop ? stop : &kNeverStopped);
  }

  void allGather(void* data, size_t bytesPerRank) override {
    allGatherV(data, std::vector<size_t>(size_t(nranks_), bytesPerRank));
  }

  // Bruck: after round k a rank holds the 2^(k+1) blocks that follow its own (cyclically), in a
  // rotated buffer; ceil(log2 n) rounds, each one send and one receive. Blocks may differ in size
  // (an empty one costs nothing), so a rank receives only the bytes there are.
  void allGatherV(void* data, const std::vector<size_t>& sizes) override {
    if (sizes.size() != size_t(nranks_))
      throw Error(ErrorCode::InvalidArgument, context() + ": allGather with " + std::to_string(sizes.size()) +
                                                  " block sizes for " + std::to_string(nranks_) + " ranks");
    size_t n = size_t(nranks_);
    std::vector<size_t> offset(n + 1, 0);  // of rank r's block in data
    for (size_t r = 0; r < n; r++) offset[r + 1] = offset[r] + sizes[r];
    if (data == nullptr && offset[n] > 0)
      throw Error(ErrorCode::InvalidArgument, context() + ": allGather of a null buffer");
    if (nranks_ == 1 || offset[n] == 0) return;
    SteadyTime deadline = deadlineAfter(timeoutSeconds_);
    std::vector<size_t> start(n + 1, 0);  // of the i-th block after ours in the rotated buffer
    for (size_t i = 0; i < n; i++) start[i + 1] = start[i] + sizes[(size_t(rank_) + i) % n];
    uint8_t* blocks = static_cast<uint8_t*>(data);
    std::vector<uint8_t> rotated(offset[n]);
    std::memcpy(rotated.data(), blocks + offset[size_t(rank_)], sizes[size_t(rank_)]);
    uint32_t round = 0;
    for (int distance = 1; distance < nranks_; distance *= 2, ++round) {
      size_t count = size_t(std::min(distance, nranks_ - distance));
      int to = (rank_ - distance + nranks_) % nranks_;
      int from = (rank_ + distance) % nranks_;
      sendMessage(to, kTagAllGather + round, rotated.data(), start[count], deadline, "allGather");
      recvMessage(from, kTagAllGather + round, rotated.data() + start[size_t(distance)],
                  start[size_t(distance) + count] - start[size_t(distance)], deadline, "allGather");
    }
    for (size_t i = 0; i < n; ++i) {
      size_t r = (size_t(rank_) + i) % n;
      std::memcpy(blocks + offset[r], rotated.data() + start[i], sizes[r]);
    }
  }

  // Dissemination: in round k every rank signals rank + 2^k and waits for rank - 2^k.
  void barrier() override {
    SteadyTime deadline = deadlineAfter(timeoutSeconds_);
    uint32_t round = 0;
    for (int distance = 1; distance < nranks_; distance *= 2, ++round) {
      sendMessage((rank_ + distance) % nranks_, kTagBarrier + round, nullptr, 0, deadline, "barrier");
      recvMessage((rank_ - distance + nranks_) % nranks_, kTagBarrier + round, nullptr, 0, deadline, "barrier");
    }
  }

 private:
  // Incoming connection from a peer, as the listener sees it.
  struct PeerConnection {
    PeerConnection(Socket socket, double handshakeSeconds) : connection(std::move(socket), handshakeSeconds) {}
    IncomingConnection connection;
    int sender = -1;           // fixed by the first frame
    bool saidGoodbye = false;  // its end is then an orderly close
    bool inMessage = false;    // kDataPart frames seen, the kData that ends them not yet
    uint32_t messageTag = 0;
    std::vector<uint8_t> message;
  };

  // Outgoing connection to a peer, made on first send.
  struct Link {
    std::mutex mutex;
    std::string address;     // the peer's listener, "host:port"
    bool inProcess = false;  // messages went straight to its inbox: it is a thread of this process
    Socket socket;
    std::string broken;  // why a send failed midway; the stream is unusable after that
  };

  std::string context() const { return "bootstrap rank " + std::to_string(rank_) + " of " + std::to_string(nranks_); }

  std::string describePeer(int peer) const override {
    return "rank " + std::to_string(peer) + " (" + (peers_.empty() ? std::string("?") : peers_[peer].toString()) + ")";
  }

  void checkPeer(int peer, const char* operation) const {
    if (peer < 0 || peer >= nranks_)
      throw Error(ErrorCode::InvalidArgument, context() + ": " + operation + " names rank " + std::to_string(peer) +
                                                  ", not in 0.." + std::to_string(nranks_ - 1));
  }

  void checkUserMessage(int peer, uint32_t tag, const void* data, size_t size, const char* operation) const {
    checkPeer(peer, operation);
    if (tag < kFirstUserTag)
      throw Error(ErrorCode::InvalidArgument, context() + ": " + operation + " with tag " + std::to_string(tag) +
                                                  "; tags below " + std::to_string(kFirstUserTag) +
                                                  " are reserved for the bootstrap");
    if (data == nullptr && size > 0)
      throw Error(ErrorCode::InvalidArgument,
                  context() + ": " + operation + " of " + std::to_string(size) + " bytes from a null buffer");
  }

  // Tells every peer this rank has a connection to that the close is orderly. Never waits long:
  // a peer whose socket does not take the few bytes by the shared deadline is skipped (it will
  // take our close for a death, the safe side). Nothing sets an abort flag during a destructor.
  void sayGoodbye() noexcept {
    SteadyTime deadline = deadlineAfter(kGoodbyeSeconds);
    for (int peer = 0; peer < nranks_; ++peer) {
      Link& link = links_[peer];
      std::lock_guard<std::mutex> lock(link.mutex);
      if (link.inProcess) {
        ProcessBootstraps::instance().withPeer(link.address, [&](SocketBootstrap& to) {
          to.markPeerGone(rank_, "rank " + std::to_string(rank_) + " closed its bootstrap (a thread of this process)");
        });
        continue;
      }
      if (!link.socket.valid() || !link.broken.empty()) continue;
      try {
        sendFrame(link.socket, kData, kTagGoodbye, rank_, secret_, nullptr, 0, deadline, nullptr);
      } catch (const Error& error) {
        TUTTI_INFO(log::Bootstrap, "%s: could not say goodbye to %s: %s", context().c_str(), describePeer(peer).c_str(),
                   error.what());
      }
    }
  }

  bool peerGone(int peer) override {
    std::lock_guard<std::mutex> lock(inboxMutex_);
    return !peerGone_[peer].empty();
  }

  void sendNotice(int peer, const std::string& text, SteadyTime deadline, const std::atomic<bool>* stop) override {
    sendMessage(peer, kTagNotice, text.data(), text.size(), deadline, "notice", stop);
  }

  std::string peerGoneReason(int peer) override {
    std::lock_guard<std::mutex> lock(inboxMutex_);
    return peerGone_[peer];
  }

  void sendQuestionMessage(int peer, bool answer, const std::string& payload, SteadyTime deadline,
                           const std::atomic<bool>* stop) override {
    sendMessage(peer, answer ? kTagAnswer : kTagQuestion, payload.data(), payload.size(), deadline,
                answer ? "answer" : "question", stop);
  }

  void sendMessage(int peer, uint32_t tag, const void* data, size_t size, SteadyTime deadline, const char* operation,
                   const std::atomic<bool>* abortFlag = nullptr) {
    if (abortFlag == nullptr) abortFlag = abortFlag_;
    const uint8_t* bytes = static_cast<const uint8_t*>(data);
    if (peer == rank_) {
      deliver(peer, tag, std::vector<uint8_t>(bytes, bytes + size));
      return;
    }
    Link& link = links_[peer];
    std::lock_guard<std::mutex> lock(link.mutex);
    if (shortcut_ && !link.socket.valid() && link.broken.empty()) {
      // A peer in this process takes the message into its inbox; one that has left this process
      // (or never was in it) is reached through its listener, which then refuses or answers.
      if (link.address.empty()) link.address = peers_[peer].toString();
      bool delivered = ProcessBootstraps::instance().withPeer(link.address, [&](SocketBootstrap& to) {
        to.deliver(rank_, tag, std::vector<uint8_t>(bytes, bytes + size));
      });
      if (delivered) {
        link.inProcess = true;
        return;
      }
      link.inProcess = false;
    }
    std::string where = context() + ": " + operation + " to " + describePeer(peer) + " with tag " + std::to_string(tag);
    if (!link.broken.empty()) throw Error(ErrorCode::Remote, where + ": the connection failed earlier: " + link.broken);
    if (!link.socket.valid()) {
      try {
        link.socket = Socket::connect(peers_[peer], deadline, abortFlag);
      } catch (const Error& error) {
        rethrowWithContext(error, where + (error.code() == ErrorCode::Timeout
                                               ? " (no connection within " + secondsText(timeoutSeconds_) + ")"
                                               : std::string()));
      }
    }
    try {
      size_t offset = 0;
      do {
        size_t piece = std::min(kDataChunkBytes, size - offset);
        bool last = offset + piece == size;
        sendFrame(link.socket, last ? kData : kDataPart, tag, rank_, secret_, bytes + offset, piece, deadline,
                  abortFlag);
        offset += piece;
      } while (offset < size);
    } catch (const Error& error) {
      // Part of a frame may be out: nothing more can go on this connection.
      link.socket.close();
      link.broken = error.message();
      rethrowWithContext(
          error, where + (error.code() == ErrorCode::Timeout ? " (not sent within " + secondsText(timeoutSeconds_) + ")"
                                                             : std::string()));
    }
  }

  // Waits for the message unless `wait` is false: then false at once when it has not arrived.
  bool recvMessage(int peer, uint32_t tag, void* data, size_t size, SteadyTime deadline, const char* operation,
                   double seconds = 0, const std::atomic<bool>* abortFlag = nullptr, bool wait = true) {
    if (abortFlag == nullptr) abortFlag = abortFlag_;
    std::vector<uint8_t> message;
    bool graced = false;  // the deadline was extended once for a notice in flight (below)
    {
      std::unique_lock<std::mutex> lock(inboxMutex_);
      for (;;) {
        auto queue = inbox_.find({peer, tag});
        if (queue != inbox_.end() && !queue->second.empty()) {
          message = std::move(queue->second.front());
          queue->second.pop_front();
          if (queue->second.empty()) inbox_.erase(queue);
          break;
        }
        std::string where =
            context() + ": " + operation + " from " + describePeer(peer) + " with tag " + std::to_string(tag);
        if (!listenerFailure_.empty())
          throw Error(ErrorCode::System, where + ": this rank's listener failed: " + listenerFailure_);
        if (!peerGone_[peer].empty()) throw Error(ErrorCode::Remote, where + ": " + peerGone_[peer]);
        if (abortFlag != nullptr && abortFlag->load(std::memory_order_acquire))
          throw Error(ErrorCode::Aborted, where + ": aborted while waiting");
        if (!wait) return false;
        SteadyTime now = SteadyClock::now();
        if (now >= deadline && !graced) {
          // The peer may have gone quiet because its own wait failed a moment ago (ranks start
          // their waits together, with one timeout): its failure notice, naming the rank at the
          // root, can be on the way. A short grace lets it land, so that the error names that
          // rank rather than the peer that waited on it.
          graced = true;
          deadline = now + kNoticeGrace;
        } else if (now >= deadline) {
          throw Error(ErrorCode::Timeout,
                      where + ": nothing arrived within " + secondsText(seconds > 0 ? seconds : timeoutSeconds_));
        }
        inboxChanged_.wait_until(lock, std::min(deadline, now + kPollSlice));
      }
    }
    if (message.size() != size)
      throw Error(ErrorCode::InvalidUsage, context() + ": " + operation + " from " + describePeer(peer) + " with tag " +
                                               std::to_string(tag) + " expected " + std::to_string(size) +
                                               " bytes, but " + std::to_string(message.size()) + " were sent");
    if (size > 0) std::memcpy(data, message.data(), size);
    return true;
  }

  void deliver(int sender, uint32_t tag, std::vector<uint8_t>&& message) {
    if (tag == kTagNotice && sender != rank_) {
      notices_.deliver(sender, std::string(message.begin(), message.end()));
      return;
    }
    if (tag == kTagQuestion || tag == kTagAnswer) {
      questions_.deliver(sender, tag == kTagAnswer, std::string(message.begin(), message.end()));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(inboxMutex_);
      inbox_[{sender, tag}].push_back(std::move(message));
    }
    inboxChanged_.notify_all();
  }

  void markPeerGone(int sender, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(inboxMutex_);
      peerGone_[sender] = why;
    }
    inboxChanged_.notify_all();
  }

  // The listener thread: no exception leaves it; a failure is recorded for recv to report.
  void listenLoop() noexcept {
    try {
      serveListener();
    } catch (const std::exception& error) {
      TUTTI_WARN("%s: listener failed: %s", context().c_str(), error.what());
      {
        std::lock_guard<std::mutex> lock(inboxMutex_);
        listenerFailure_ = error.what();
      }
      inboxChanged_.notify_all();
    }
  }

  // Returns why the connection must be dropped, or empty.
  std::string handleFrame(PeerConnection& peer, Frame& frame) {
    int sender = frame.header.senderRank;
    if (peer.sender < 0) {
      if (sender < 0 || sender >= nranks_ || sender == rank_)
        return "first frame claims to come from rank " + std::to_string(sender);
      peer.sender = sender;
      std::lock_guard<std::mutex> lock(inboxMutex_);
      peerGone_[sender].clear();
    } else if (sender != peer.sender) {
      return "frame claims rank " + std::to_string(sender) + " on the connection of rank " +
             std::to_string(peer.sender);
    }
    uint32_t tag = frame.header.tag;
    if (peer.inMessage && tag != peer.messageTag)
      return "tag " + std::to_string(tag) + " in the middle of a message with tag " + std::to_string(peer.messageTag);
    if (tag == kTagGoodbye) {
      if (frame.header.type != kData || !frame.payload.empty()) return "malformed goodbye";
      peer.saidGoodbye = true;
      return {};
    }
    if (frame.header.type == kDataPart || peer.inMessage) {
      peer.message.insert(peer.message.end(), frame.payload.begin(), frame.payload.end());
      peer.inMessage = frame.header.type == kDataPart;
      peer.messageTag = tag;
      if (peer.inMessage) return {};
      deliver(sender, tag, std::move(peer.message));
      peer.message = {};
      return {};
    }
    deliver(sender, tag, std::move(frame.payload));
    return {};
  }

  void dropPeerConnection(PeerConnection& peer, DropKind kind, const std::string& reason) {
    bool orderly = kind == DropKind::Closed && !peer.inMessage;
    std::string why = kind != DropKind::Closed ? reason
                      : peer.inMessage         ? "closed in the middle of a message"
                      : peer.saidGoodbye       ? "closed by the peer after its goodbye"
                                               : "closed by the peer";
    if (!orderly)
      TUTTI_WARN("%s: dropped connection from %s: %s", context().c_str(), peer.connection.remote().toString().c_str(),
                 why.c_str());
    if (peer.sender < 0) return;
    markPeerGone(peer.sender, "the connection from rank " + std::to_string(peer.sender) + " ended: " + why);
    // A stall is a live but stuck peer: TUTTI_TIMEOUT is the bound for those.
    if (peer.saidGoodbye || kind == DropKind::Stalled || stopping_.load(std::memory_order_acquire)) return;
    if (kind == DropKind::Refused)
      notices_.reportPeerLost(peer.sender, "its bootstrap connection failed: " + why);
    else if (peer.connection.closeError() != 0)
      notices_.reportPeerLost(peer.sender, "its process ended: the bootstrap connection was reset without a goodbye (" +
                                               errnoText(peer.connection.closeError()) + ")");
    else
      notices_.reportPeerLost(peer.sender, "its process ended: the bootstrap connection closed without a goodbye");
  }

  void serveListener() {
    FramePolicy framePolicy(secret_);
    framePolicy.allow(kData, kMaxDataFrameBytes).allow(kDataPart, kMaxDataFrameBytes);
    double handshake = handshakeSeconds(timeoutSeconds_);
    std::vector<std::unique_ptr<PeerConnection>> connections;
    const std::string name = context();
    ServeScratch scratch;
    while (!stopping_.load(std::memory_order_acquire)) {
      serveConnectionsOnce(
          listener_, wakeup_.get(), connections, framePolicy, handshake, name, scratch,
          [this](PeerConnection& peer, Frame& frame) { return handleFrame(peer, frame); },
          [this](PeerConnection& peer, DropKind kind, const std::string& reason) {
            dropPeerConnection(peer, kind, reason);
          });
    }
  }

  const int rank_;
  const int nranks_;
  const double timeoutSeconds_;
  const std::atomic<bool>* const abortFlag_;
  const Secret secret_;
  const bool shortcut_;  // BootstrapOptions::sameProcessShortcut

  Socket listener_;
  SocketAddress listenerAddress_;
  std::string listenerText_;          // its "host:port": the key of this bootstrap in ProcessBootstraps
  std::vector<SocketAddress> peers_;  // every rank's listener, once joined

  std::mutex inboxMutex_;
  std::condition_variable inboxChanged_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<uint8_t>>> inbox_;
  std::vector<std::string> peerGone_;  // non-empty: why that peer's connection ended
  std::string listenerFailure_;

  std::vector<Link> links_;  // by peer

  FailureNotices notices_;  // stopped first: its thread sends through the links
  Questions questions_;     // likewise: its answering thread sends through the links

  std::unique_ptr<WakeupEvent> wakeup_;
  std::atomic<bool> stopping_{false};
  std::thread listenerThread_;  // last: started after, and joined before, everything it uses
};

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::create(const ncclUniqueId* ids, int nIds, int rank, int nranks,
                                             const BootstrapOptions& options) {
  if (ids == nullptr) throw Error(ErrorCode::InvalidArgument, "bootstrap: the unique id is null");
  if (nranks < 1) throw Error(ErrorCode::InvalidArgument, "bootstrap: nranks " + std::to_string(nranks) + " < 1");
  if (rank < 0 || rank >= nranks)
    throw Error(ErrorCode::InvalidArgument,
                "bootstrap: rank " + std::to_string(rank) + " is not in 0.." + std::to_string(nranks - 1));
  if (nIds < 1 || nIds > nranks)
    throw Error(ErrorCode::InvalidArgument, "bootstrap rank " + std::to_string(rank) + ": " + std::to_string(nIds) +
                                                " unique ids for " + std::to_string(nranks) +
                                                " ranks; expected 1 to nranks");
  if (options.timeoutSeconds < 0) throw Error(ErrorCode::InvalidArgument, "bootstrap: negative timeout");
  double timeoutSeconds = options.timeoutSeconds > 0 ? options.timeoutSeconds : configuredTimeoutSeconds();
  SteadyTime deadline = deadlineAfter(timeoutSeconds);

  std::vector<UniqueIdContents> contents;
  for (int i = 0; i < nIds; ++i) {
    try {
      contents.push_back(decodeUniqueId(ids[i]));
    } catch (const Error& error) {
      rethrowWithContext(error, "bootstrap rank " + std::to_string(rank) + ", unique id " + std::to_string(i));
    }
  }
  int block = blockOfRank(rank, nranks, nIds);
  if (contents[block].fromCommId && rank == firstRankOfBlock(block, nranks, nIds))
    ensureCommIdRoot(contents[block], timeoutSeconds, deadline);

  auto bootstrap = std::make_unique<SocketBootstrap>(rank, nranks, timeoutSeconds, options.abortFlag,
                                                     contents[0].secret, options.sameProcessShortcut);
  std::string listenerAddress = bootstrap->startListening(findInterfaceToReach(contents[block].root));
  if (options.onListening) options.onListening(listenerAddress);
  bootstrap->join(contents, deadline);
  return bootstrap;
}

}  // namespace tutti::bootstrap
