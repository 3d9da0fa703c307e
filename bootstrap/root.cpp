// The bootstrap's root rendezvous server: gathers its block of ranks' listener addresses and
// hands every rank the whole table, or an error that names the ranks that never came.
//
// - A root serves one rendezvous and exits. It is an event loop over its listener and the
//   connections it accepted, so a silent or malicious connection never stalls the real ranks.
//   Each rank registers (rank, nranks, its listener address, host, pid) and keeps the connection
//   open; once its whole block is there, the root sends every rank the table of listener
//   addresses, or, at the deadline, an error frame that names the ranks that never came.
// - With nIds > 1 roots (ncclCommInitRankScalable) every root gathers its block of ranks; roots
//   1..nIds-1 then send their block to root 0 (whose address and secret every registration
//   carries), root 0 answers each with the full table, and each root hands it to its ranks. A
//   block that times out tells root 0 why, so every rank's error names the missing ranks.
// - The root's deadline is the earliest of its ranks' deadlines (each registration carries the
//   time its rank has left).
#include "bootstrap/root.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/loop.h"

namespace tutti::bootstrap {

namespace {

using namespace wire;

// The root servers running in this process. Never destroyed: detached root threads may still
// look at it while the process exits.
struct RootRegistry {
  std::mutex mutex;
  std::set<std::string> running;     // listener addresses
  std::atomic<bool> exiting{false};  // set at exit: roots stop quietly
};

RootRegistry& rootRegistry() {
  static RootRegistry* registry = new RootRegistry();
  return *registry;
}

void markProcessExiting() { rootRegistry().exiting.store(true, std::memory_order_release); }

class RootServer {
 public:
  RootServer(Socket listener, const Secret& secret, double unusedTimeoutSeconds)
      : listener_(std::move(listener)),
        address_(listener_.localAddress()),
        secret_(secret),
        unusedDeadline_(deadlineAfter(unusedTimeoutSeconds)),
        handshakeSeconds_(handshakeSeconds(unusedTimeoutSeconds)) {}

  const SocketAddress& address() const { return address_; }

  // The thread body: serves one rendezvous, or gives up at the deadline, then returns.
  void run() noexcept {
    try {
      serve();
    } catch (const std::exception& error) {
      TUTTI_WARN("bootstrap root %s: %s", address_.toString().c_str(), error.what());
      failEveryone(ErrorCode::Internal,
                   std::string("bootstrap root ") + address_.toString() + " failed: " + error.what());
    }
    RootRegistry& registry = rootRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.running.erase(address_.toString());
  }

 private:
  enum class Role { Unknown, Rank, BlockRoot, Done };

  struct Peer {
    Peer(Socket socket, double handshakeSeconds) : connection(std::move(socket), handshakeSeconds) {}
    IncomingConnection connection;
    Role role = Role::Unknown;
    int id = -1;  // the rank, or the block of a block root
    std::string host;
    uint32_t pid = 0;
  };

  // The job this root serves, fixed by the first registration or block report.
  struct Shape {
    int nranks = 0;
    int nIds = 0;
    int block = 0;
    int firstRank = 0;
    int count = 0;
    uint32_t timeoutMs = 0;
  };

  bool exiting() const { return rootRegistry().exiting.load(std::memory_order_acquire); }
  std::string who() const { return "bootstrap root " + address_.toString(); }
  std::string timeoutText() const { return secondsText(shape_ ? shape_->timeoutMs / 1000.0 : 0); }
  std::string blockText(int block) const {
    return "bootstrap root " + std::to_string(block) + " of " + std::to_string(shape_->nIds);
  }

  FramePolicy policy() const {
    FramePolicy policy(secret_);
    policy.allow(kRegister, sizeof(RegistrationPayload));
    policy.allow(kBlockReport, kMaxDataFrameBytes);
    policy.allow(kBlockFailed, kMaxErrorBytes);
    return policy;
  }

  bool ownBlockComplete() const {
    return shape_ && std::all_of(rankPeers_.begin(), rankPeers_.end(), [](Peer* peer) { return peer != nullptr; });
  }
  // The earliest deadline of the ranks (and block roots) heard from so far.
  SteadyTime deadline() const { return haveDeadline_ ? deadline_ : unusedDeadline_; }

  void serve() {
    FramePolicy framePolicy = policy();
    const std::string name = who();
    ServeScratch scratch;
    for (;;) {
      if (exiting()) return;
      SteadyTime now = SteadyClock::now();
      if (!shape_) {
        if (now >= unusedDeadline_) {
          TUTTI_INFO(log::Bootstrap, "%s: nobody registered before the timeout; exiting", who().c_str());
          return;
        }
      } else if (shape_->nIds == 1 || shape_->block > 0) {
        if (ownBlockComplete()) {
          if (shape_->nIds == 1)
            sendTableToRanks(entries_);
          else
            forwardThroughRootZero();
          return;
        }
        if (now >= deadline()) {
          failOwnBlockTimeout();
          return;
        }
      } else {  // root 0 of several
        bool everyBlockReported = true;
        bool everyBlockAnswered = true;  // reported, or said why it cannot
        for (size_t block = 1; block < blockPeers_.size(); ++block) {
          everyBlockReported = everyBlockReported && blockPeers_[block] != nullptr;
          everyBlockAnswered = everyBlockAnswered && (blockPeers_[block] != nullptr || !blockFailures_[block].empty());
        }
        if (ownBlockComplete() && everyBlockReported) {
          completeAsRootZero();
          return;
        }
        bool ownLate = !ownBlockComplete() && now >= deadline();
        bool reportsLate = now >= later(deadline(), kBlockReportGraceSeconds);
        if (ownLate || reportsLate || (ownBlockComplete() && everyBlockAnswered)) {
          failAsRootZero();
          return;
        }
      }

      serveConnectionsOnce(
          listener_, nullptr, peers_, framePolicy, handshakeSeconds_, name, scratch,
          [this](Peer& peer, Frame& frame) { return handleFrame(peer, frame); },
          [this](Peer& peer, DropKind kind, const std::string& reason) {
            if (kind == DropKind::Closed)
              noteClosed(peer);
            else
              TUTTI_WARN("%s: dropped connection from %s: %s", who().c_str(),
                         peer.connection.remote().toString().c_str(), reason.c_str());
            forgetPeer(&peer);
          });
    }
  }

  void noteClosed(Peer& peer) {
    // A rank may register again (it retries after an error); if it does not, the timeout's
    // message says it had come and left, not that it never came.
    if (peer.role == Role::Rank) leftRanks_[peer.id] = describe(peer);
    if (peer.role == Role::Rank || peer.role == Role::BlockRoot)
      TUTTI_WARN("%s: %s closed its connection before the rendezvous completed", who().c_str(), describe(peer).c_str());
    else if (peer.role == Role::Unknown)
      TUTTI_INFO(log::Bootstrap, "%s: %s closed its connection without sending anything", who().c_str(),
                 peer.connection.remote().toString().c_str());
  }

  // A connection about to be closed no longer stands for a rank or a block root.
  void forgetPeer(Peer* peer) {
    std::replace(rankPeers_.begin(), rankPeers_.end(), peer, static_cast<Peer*>(nullptr));
    std::replace(blockPeers_.begin(), blockPeers_.end(), peer, static_cast<Peer*>(nullptr));
  }

  // Tells one peer why it is refused (best effort) and returns the reason it is dropped.
  std::string refuse(Peer& peer, ErrorCode code, const std::string& message) {
    answer(peer, kError, errorPayload(code, message));
    return message;
  }

  // Checks a job description against the one this root already serves (or adopts it). Empty
  // when it agrees.
  std::string adoptShape(int nranks, int nIds, int block, uint32_t timeoutMs, const std::string& sender) {
    if (nranks < 1 || nIds < 1 || nIds > nranks || block < 0 || block >= nIds)
      return sender + " describes an impossible job: nranks " + std::to_string(nranks) + ", " + std::to_string(nIds) +
             " ids, root " + std::to_string(block);
    if (!shape_) {
      Shape shape;
      shape.nranks = nranks;
      shape.nIds = nIds;
      shape.block = block;
      shape.firstRank = firstRankOfBlock(block, nranks, nIds);
      shape.count = blockSize(block, nranks, nIds);
      shape.timeoutMs = timeoutMs;
      shape_ = shape;
      rankPeers_.assign(shape.count, nullptr);
      entries_.assign(shape.count, WireAddress{});
      if (block == 0) {
        blockPeers_.assign(nIds, nullptr);
        blockEntries_.assign(nIds, {});
        blockFailures_.assign(nIds, std::string());
      }
      return {};
    }
    if (shape_->nranks != nranks || shape_->nIds != nIds || shape_->block != block)
      return sender + " joins a job of " + std::to_string(nranks) + " ranks with " + std::to_string(nIds) +
             " ids as root " + std::to_string(block) + ", but this root serves a job of " +
             std::to_string(shape_->nranks) + " ranks with " + std::to_string(shape_->nIds) + " ids as root " +
             std::to_string(shape_->block) + " (was the same ncclUniqueId used for two communicators?)";
    return {};
  }

  void tightenDeadline(uint32_t remainingMs) {
    SteadyTime candidate = SteadyClock::now() + std::chrono::milliseconds(remainingMs);
    deadline_ = haveDeadline_ ? std::min(deadline_, candidate) : candidate;
    haveDeadline_ = true;
  }

  // Returns why the connection must be dropped, or empty.
  std::string handleFrame(Peer& peer, Frame& frame) {
    if (peer.role != Role::Unknown)
      return refuse(peer, ErrorCode::Remote, "a second frame after the first one; the protocol allows one");
    switch (frame.header.type) {
      case kRegister: return handleRegistration(peer, frame);
      case kBlockReport: return handleBlockReport(peer, frame);
      case kBlockFailed: return handleBlockFailed(peer, frame);
      default: return "frame type " + std::to_string(frame.header.type) + " is not expected here";
    }
  }

  std::string handleRegistration(Peer& peer, Frame& frame) {
    if (frame.payload.size() != sizeof(RegistrationPayload))
      return "registration of " + std::to_string(frame.payload.size()) + " bytes, expected " +
             std::to_string(sizeof(RegistrationPayload));
    RegistrationPayload registration;
    std::memcpy(&registration, frame.payload.data(), sizeof registration);
    std::string host = printable(reinterpret_cast<const uint8_t*>(registration.host),
                                 strnlen(registration.host, sizeof registration.host));
    std::string sender = "rank " + std::to_string(registration.rank) + " (host " + host + ", pid " +
                         std::to_string(registration.pid) + ")";
    std::string problem =
        adoptShape(registration.nranks, registration.nIds, registration.block, registration.timeoutMs, sender);
    if (!problem.empty()) return refuse(peer, ErrorCode::InvalidUsage, problem);
    int rank = registration.rank;
    if (rank < shape_->firstRank || rank >= shape_->firstRank + shape_->count)
      return refuse(peer, ErrorCode::InvalidUsage,
                    sender + " registered with " + who() + ", which serves ranks " +
                        formatRankList({shape_->firstRank, shape_->firstRank + shape_->count - 1}));
    int slot = rank - shape_->firstRank;
    if (rankPeers_[slot] != nullptr)
      return refuse(peer, ErrorCode::InvalidUsage,
                    sender + " joined twice; rank " + std::to_string(rank) + " already came from host " +
                        rankPeers_[slot]->host + ", pid " + std::to_string(rankPeers_[slot]->pid));
    try {
      SocketAddress listener = SocketAddress::fromWire(registration.listener);
      if (listener.empty() || listener.port() == 0)
        return refuse(peer, ErrorCode::InvalidUsage, sender + " sent no listener address");
      if (shape_->block > 0) {
        rootZero_ = SocketAddress::fromWire(registration.rootZero);
        rootZeroSecret_ = {registration.rootZeroSecret[0], registration.rootZeroSecret[1]};
      }
    } catch (const Error& error) {
      return refuse(peer, ErrorCode::InvalidUsage, sender + ": " + error.message());
    }
    std::memcpy(entries_[slot].data(), registration.listener, SocketAddress::kWireBytes);
    peer.role = Role::Rank;
    peer.id = rank;
    peer.host = host;
    peer.pid = registration.pid;
    rankPeers_[slot] = &peer;
    leftRanks_.erase(rank);
    tightenDeadline(registration.remainingMs);
    TUTTI_INFO(
        log::Bootstrap, "%s: %s registered (%d of %d here)", who().c_str(), sender.c_str(),
        static_cast<int>(std::count_if(rankPeers_.begin(), rankPeers_.end(), [](Peer* p) { return p != nullptr; })),
        shape_->count);
    return {};
  }

  std::string handleBlockReport(Peer& peer, Frame& frame) {
    if (frame.payload.size() < sizeof(BlockReportHeader)) return "block report too short";
    BlockReportHeader report;
    std::memcpy(&report, frame.payload.data(), sizeof report);
    std::string sender = "bootstrap root " + std::to_string(report.block) + " at " + peer.connection.remote().host();
    if (report.block == 0) return refuse(peer, ErrorCode::InvalidUsage, sender + " claims to be root 0");
    std::string problem = adoptShape(report.nranks, report.nIds, 0, report.timeoutMs, sender);
    if (!problem.empty()) return refuse(peer, ErrorCode::InvalidUsage, problem);
    if (report.count != blockSize(report.block, report.nranks, report.nIds) ||
        frame.payload.size() != sizeof report + static_cast<size_t>(report.count) * SocketAddress::kWireBytes)
      return refuse(peer, ErrorCode::InvalidUsage, sender + " sent a block report of the wrong size");
    if (blockPeers_[report.block] != nullptr) return refuse(peer, ErrorCode::InvalidUsage, sender + " reported twice");
    std::vector<WireAddress>& entries = blockEntries_[report.block];
    entries.assign(report.count, WireAddress{});
    for (int i = 0; i < report.count; ++i)
      std::memcpy(entries[i].data(), frame.payload.data() + sizeof report + i * SocketAddress::kWireBytes,
                  SocketAddress::kWireBytes);
    peer.role = Role::BlockRoot;
    peer.id = report.block;
    blockPeers_[report.block] = &peer;
    tightenDeadline(report.remainingMs);
    TUTTI_INFO(log::Bootstrap, "%s: %s reported its %d ranks", who().c_str(), sender.c_str(), report.count);
    return {};
  }

  std::string handleBlockFailed(Peer& peer, Frame& frame) {
    int block = static_cast<int>(frame.header.tag);
    Error failure = errorFromPayload(frame.payload, peer.connection.remote());
    if (shape_ && shape_->block == 0 && block > 0 && block < shape_->nIds)
      blockFailures_[block] = failure.message();
    else
      earlyFailures_.push_back(failure.message());
    peer.role = Role::Done;  // nothing more comes on this connection
    return {};
  }

  std::string describe(const Peer& peer) const {
    if (peer.role == Role::Rank)
      return "rank " + std::to_string(peer.id) + " (host " + peer.host + ", pid " + std::to_string(peer.pid) + ")";
    if (peer.role == Role::BlockRoot) return blockText(peer.id);
    return peer.connection.remote().toString();
  }

  // Best effort: a peer that cannot be answered is logged, and the others still are.
  void answer(Peer& peer, uint32_t type, const std::vector<uint8_t>& payload) {
    try {
      sendFrame(peer.connection.socket(), type, 0, -1, secret_, payload.data(), payload.size(),
                deadlineAfter(handshakeSeconds_), &rootRegistry().exiting);
    } catch (const Error& error) {
      TUTTI_WARN("%s: could not answer %s: %s", who().c_str(), describe(peer).c_str(), error.what());
    }
  }

  // Each rank of this block gets its neighbours' addresses (wire.h, neighbourRanks).
  void sendTableToRanks(const std::vector<WireAddress>& table) {
    for (size_t i = 0; i < rankPeers_.size(); ++i)
      if (rankPeers_[i] != nullptr)
        answer(*rankPeers_[i], kTable, neighbourTablePayload(table, shape_->firstRank + int(i)));
  }

  void sendToRanks(uint32_t type, const std::vector<uint8_t>& payload) {
    for (Peer* peer : rankPeers_)
      if (peer != nullptr) answer(*peer, type, payload);
  }

  void failEveryone(ErrorCode code, const std::string& message) {
    std::vector<uint8_t> payload = errorPayload(code, message);
    sendToRanks(kError, payload);
    for (Peer* peer : blockPeers_)
      if (peer != nullptr) answer(*peer, kError, payload);
  }

  std::vector<int> missingRanks() const {
    std::vector<int> missing;
    for (size_t i = 0; i < rankPeers_.size(); ++i)
      if (rankPeers_[i] == nullptr) missing.push_back(shape_->firstRank + static_cast<int>(i));
    return missing;
  }

  std::string neverArrivedText(const std::vector<int>& missing) const {
    std::string text = (missing.size() == 1 ? "rank " : "ranks ") + formatRankList(missing) + " of " +
                       std::to_string(shape_->nranks) + " never arrived at the bootstrap root " + address_.toString() +
                       " within " + timeoutText();
    for (int rank : missing) {
      auto left = leftRanks_.find(rank);
      if (left != leftRanks_.end())
        text += "; " + left->second +
                " had registered, but its connection closed before the rendezvous completed "
                "and it did not register again (did the process end?)";
    }
    return text;
  }

  // A lone root, or a block root, whose own ranks did not all come.
  void failOwnBlockTimeout() {
    std::string message = neverArrivedText(missingRanks());
    TUTTI_WARN("bootstrap: %s", message.c_str());
    failEveryone(ErrorCode::Timeout, message);
    if (shape_->block > 0 && !rootZero_.empty()) {
      // Let root 0 tell its ranks which ranks are missing, instead of a vaguer timeout.
      try {
        SteadyTime until = deadlineAfter(std::min(1.0, handshakeSeconds_));
        Socket socket = Socket::connect(rootZero_, until, &rootRegistry().exiting);
        std::vector<uint8_t> payload = errorPayload(ErrorCode::Timeout, blockText(shape_->block) + ": " + message);
        sendFrame(socket, kBlockFailed, static_cast<uint32_t>(shape_->block), -1, rootZeroSecret_, payload.data(),
                  payload.size(), until, &rootRegistry().exiting);
      } catch (const Error& error) {
        TUTTI_INFO(log::Bootstrap, "%s: could not tell root 0 at %s: %s", who().c_str(), rootZero_.toString().c_str(),
                   error.what());
      }
    }
  }

  // A block root with all its ranks: trade the block for the full table with root 0.
  void forwardThroughRootZero() {
    SteadyTime until = later(deadline(), kRootZeroAnswerGraceSeconds);
    try {
      Socket socket = Socket::connect(rootZero_, until, &rootRegistry().exiting);
      BlockReportHeader report{};
      report.block = shape_->block;
      report.nranks = shape_->nranks;
      report.nIds = shape_->nIds;
      report.count = shape_->count;
      report.remainingMs = millisecondsUntil(deadline());
      report.timeoutMs = shape_->timeoutMs;
      std::vector<uint8_t> payload(sizeof report + entries_.size() * SocketAddress::kWireBytes);
      std::memcpy(payload.data(), &report, sizeof report);
      for (size_t i = 0; i < entries_.size(); ++i)
        std::memcpy(payload.data() + sizeof report + i * SocketAddress::kWireBytes, entries_[i].data(),
                    SocketAddress::kWireBytes);
      sendFrame(socket, kBlockReport, static_cast<uint32_t>(shape_->block), -1, rootZeroSecret_, payload.data(),
                payload.size(), until, &rootRegistry().exiting);
      FramePolicy answerPolicy(rootZeroSecret_);
      answerPolicy.allow(kTable, tablePayloadBytes(shape_->nranks)).allow(kError, kMaxErrorBytes);
      Frame answer = readFrame(socket, answerPolicy, until, &rootRegistry().exiting);
      if (answer.header.type == kError) {
        Error error = errorFromPayload(answer.payload, rootZero_);
        failEveryone(error.code(), error.message());
        return;
      }
      if (answer.payload.size() != tablePayloadBytes(shape_->nranks))
        throw Error(ErrorCode::Remote, "its table has " + std::to_string(answer.payload.size()) + " bytes, expected " +
                                           std::to_string(tablePayloadBytes(shape_->nranks)));
      std::vector<WireAddress> table(static_cast<size_t>(shape_->nranks));
      for (size_t i = 0; i < table.size(); ++i)
        std::memcpy(table[i].data(), answer.payload.data() + 8 + i * SocketAddress::kWireBytes,
                    SocketAddress::kWireBytes);
      sendTableToRanks(table);
    } catch (const Error& error) {
      std::string message = blockText(shape_->block) + " at " + address_.toString() +
                            " could not get the other ranks' addresses from bootstrap root 0 at " +
                            rootZero_.toString() + ": " + error.message();
      TUTTI_WARN("%s", message.c_str());
      failEveryone(error.code() == ErrorCode::Timeout ? ErrorCode::Timeout : ErrorCode::Remote, message);
    }
  }

  void completeAsRootZero() {
    std::vector<WireAddress> table;
    table.reserve(shape_->nranks);
    table.insert(table.end(), entries_.begin(), entries_.end());
    for (int block = 1; block < shape_->nIds; ++block)
      table.insert(table.end(), blockEntries_[block].begin(), blockEntries_[block].end());
    sendTableToRanks(table);
    std::vector<uint8_t> payload = tablePayload(table);
    for (int block = 1; block < shape_->nIds; ++block) answer(*blockPeers_[block], kTable, payload);
  }

  void failAsRootZero() {
    std::vector<std::string> parts;
    std::vector<int> missing = missingRanks();
    if (!missing.empty()) parts.push_back(neverArrivedText(missing));
    for (int block = 1; block < shape_->nIds; ++block) {
      if (!blockFailures_[block].empty()) {
        parts.push_back(blockFailures_[block]);
      } else if (blockPeers_[block] == nullptr) {
        int first = firstRankOfBlock(block, shape_->nranks, shape_->nIds);
        std::vector<int> ranks;
        for (int r = first; r < first + blockSize(block, shape_->nranks, shape_->nIds); ++r) ranks.push_back(r);
        parts.push_back((ranks.size() == 1 ? "rank " : "ranks ") + formatRankList(ranks) + " of " +
                        std::to_string(shape_->nranks) + " (served by " + blockText(block) +
                        ") never reported to bootstrap root 0 at " + address_.toString() + " within " + timeoutText());
      }
    }
    for (const std::string& early : earlyFailures_) parts.push_back(early);
    std::string message;
    for (const std::string& part : parts) message += (message.empty() ? "" : "; ") + part;
    TUTTI_WARN("bootstrap root 0 at %s: %s", address_.toString().c_str(), message.c_str());
    failEveryone(ErrorCode::Timeout, message);
  }

  Socket listener_;
  SocketAddress address_;
  Secret secret_;
  SteadyTime unusedDeadline_;
  double handshakeSeconds_;

  std::vector<std::unique_ptr<Peer>> peers_;
  std::optional<Shape> shape_;
  SteadyTime deadline_{};
  bool haveDeadline_ = false;
  std::vector<Peer*> rankPeers_;          // by rank - firstRank; null: not (or no longer) here
  std::map<int, std::string> leftRanks_;  // ranks whose registered connection closed, described
  std::vector<WireAddress> entries_;
  SocketAddress rootZero_;  // block roots: where to send the block
  Secret rootZeroSecret_{};
  std::vector<Peer*> blockPeers_;  // root 0: the block roots that reported, by block
  std::vector<std::vector<WireAddress>> blockEntries_;
  std::vector<std::string> blockFailures_;
  std::vector<std::string> earlyFailures_;  // block failures that came before the job's shape
};

// Whether a System error (throwSystemError's "... (errno N)") came from this errno.
bool mentionsErrno(const Error& error, int err) {
  return error.code() == ErrorCode::System &&
         error.message().find("(errno " + std::to_string(err) + ")") != std::string::npos;
}

}  // namespace

void startRoot(Socket listener, const Secret& secret, double timeoutSeconds) {
  static std::once_flag atExitOnce;
  std::call_once(atExitOnce, [] { std::atexit(markProcessExiting); });
  auto server = std::make_shared<RootServer>(std::move(listener), secret, timeoutSeconds);
  std::string address = server->address().toString();
  RootRegistry& registry = rootRegistry();
  {
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.running.insert(address);
  }
  try {
    std::thread([server] { server->run(); }).detach();
  } catch (const std::system_error& error) {
    std::lock_guard<std::mutex> lock(registry.mutex);
    registry.running.erase(address);
    throw Error(ErrorCode::System, "starting the bootstrap root thread on " + address + ": " + error.what());
  }
  TUTTI_INFO(log::Bootstrap, "bootstrap root listening on %s", address.c_str());
}

void ensureCommIdRoot(const UniqueIdContents& id, double timeoutSeconds, SteadyTime deadline) {
  std::string address = id.root.toString();
  {
    RootRegistry& registry = rootRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    if (registry.running.count(address) != 0) return;
  }
  SteadyTime bindDeadline = std::min(deadline, deadlineAfter(5));
  for (;;) {
    try {
      startRoot(Socket::listen(id.root), id.secret, timeoutSeconds);
      return;
    } catch (const Error& error) {
      bool inUse = mentionsErrno(error, EADDRINUSE);
      if (!inUse || SteadyClock::now() >= bindDeadline) {
        if (mentionsErrno(error, EADDRNOTAVAIL))
          throw Error(ErrorCode::InvalidUsage, "NCCL_COMM_ID=" + address +
                                                   " is not an address of this host, so the first rank cannot "
                                                   "start the bootstrap root there: " +
                                                   error.message());
        rethrowWithContext(error, "starting the bootstrap root for NCCL_COMM_ID=" + address);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace tutti::bootstrap
