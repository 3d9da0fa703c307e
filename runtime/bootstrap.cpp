// The bootstrap: root rendezvous servers, framed messages, and the per-rank socket network with
// allGather, barrier and tagged point-to-point messages.
//
// Design, in short:
// - A root serves one rendezvous and exits. It is an event loop (poll) over its listener and
//   the connections it accepted, so a silent or malicious connection never stalls the real ranks.
//   Each rank registers (rank, nranks, its listener address, host, pid) and keeps the connection
//   open; once its whole block is there, the root sends every rank the table of listener
//   addresses, or, at the deadline, an error frame that names the ranks that never came.
// - With nIds > 1 roots (ncclCommInitRankScalable) every root gathers its block of ranks; roots
//   1..nIds-1 then send their block to root 0 (whose address and secret every registration
//   carries), root 0 answers each with the full table, and each root hands it to its ranks. A
//   block that times out tells root 0 why, so every rank's error names the missing ranks.
// - Each rank runs one listener thread, an event loop that accepts peers and sorts incoming
//   frames into per-(peer, tag) queues; recv waits on its queue. send connects to the peer on
//   first use and keeps the connection: one connection per ordered pair, so messages of one
//   pair and tag arrive in order. Messages larger than a frame travel as several frames.
// - Every frame starts with {magic, type, tag, sender, length, secret}. A connection whose frame
//   has a bad magic, a wrong secret, a type or length not allowed there, or that goes silent in
//   the middle of a frame (or before its first one) is dropped and logged; nothing is allocated
//   for a length that was not checked first.
// - Deadlines: a rank gives up at its deadline (plus a grace period while waiting for the root's
//   answer, so that the root's better error can arrive). The root's deadline is the earliest of
//   its ranks' deadlines (each registration carries the time its rank has left).
#include "runtime/bootstrap.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "base/host_identity.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "base/tunables.h"
#include "runtime/bootstrap_id.h"
#include "runtime/bootstrap_loop.h"
#include "runtime/bootstrap_wire.h"

namespace tutti {

namespace {

using namespace bootstrap_wire;
using namespace bootstrap_detail;

// Tags below 1000 are ours; a collective's round is added to its base.
constexpr uint32_t kTagAllGather = 100;
constexpr uint32_t kTagBarrier = 200;
constexpr uint32_t kTagNotice = 900;  // a failure notice (broadcastNotice)
constexpr uint32_t kFirstUserTag = 1000;
// A failure notice gets this long per peer, and a destroy waits this long for notices to leave.
constexpr double kNoticeSecondsPerPeer = 2.0;
constexpr std::chrono::seconds kNoticeGrace{3};
// All goodbyes of one close share this deadline; each is one small frame, normally sent at once.
constexpr double kGoodbyeSeconds = 1.0;

// A rank waits this much past its deadline for the root's answer, so that the root's error
// (which it sends at the earliest rank's deadline) arrives before the rank gives up on it.
constexpr double kRootAnswerGraceSeconds = 3;
// Root 0 waits this much past its deadline for the other roots' blocks; a block root waits this
// much for root 0's answer. Both are below kRootAnswerGraceSeconds, so ranks hear the outcome.
constexpr double kBlockReportGraceSeconds = 1;
constexpr double kRootZeroAnswerGraceSeconds = 2;
// Messages larger than this travel as several frames.
constexpr size_t kDataChunkBytes = 4u << 20;

Secret randomSecret() {
  Secret secret{};
  uint8_t* bytes = reinterpret_cast<uint8_t*>(secret.data());
  size_t filled = 0;
  while (filled < sizeof secret) {
    ssize_t count = getrandom(bytes + filled, sizeof secret - filled, 0);
    if (count < 0) {
      if (errno == EINTR) continue;
      throwSystemError("ncclGetUniqueId: getrandom for the bootstrap secret", errno);
    }
    filled += static_cast<size_t>(count);
  }
  return secret;
}

// ---------------------------------------------------------------------------------------------
// Roots

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
      failEveryone(ErrorCode::Internal, std::string("bootstrap root ") + address_.toString() +
                                            " failed: " + error.what());
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
          if (shape_->nIds == 1) sendToRanks(kTable, tablePayload(entries_));
          else forwardThroughRootZero();
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

      serveConnectionsOnce(listener_, nullptr, peers_, framePolicy, handshakeSeconds_, name, scratch,
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
    if (peer.role == Role::Rank || peer.role == Role::BlockRoot)
      TUTTI_WARN("%s: %s closed its connection before the rendezvous completed", who().c_str(),
                 describe(peer).c_str());
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
      return sender + " describes an impossible job: nranks " + std::to_string(nranks) + ", " +
             std::to_string(nIds) + " ids, root " + std::to_string(block);
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
    std::string problem = adoptShape(registration.nranks, registration.nIds, registration.block,
                                     registration.timeoutMs, sender);
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
      if (listener.empty() || listener.port() == 0) return refuse(peer, ErrorCode::InvalidUsage, sender + " sent no listener address");
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
    tightenDeadline(registration.remainingMs);
    TUTTI_INFO(log::Bootstrap, "%s: %s registered (%d of %d here)", who().c_str(), sender.c_str(),
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
    if (blockPeers_[report.block] != nullptr)
      return refuse(peer, ErrorCode::InvalidUsage, sender + " reported twice");
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
    return (missing.size() == 1 ? "rank " : "ranks ") + formatRankList(missing) + " of " +
           std::to_string(shape_->nranks) + " never arrived at the bootstrap root " + address_.toString() +
           " within " + timeoutText();
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
        TUTTI_INFO(log::Bootstrap, "%s: could not tell root 0 at %s: %s", who().c_str(),
                   rootZero_.toString().c_str(), error.what());
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
      sendToRanks(kTable, answer.payload);
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
    std::vector<uint8_t> payload = tablePayload(table);
    sendToRanks(kTable, payload);
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
                        ") never reported to bootstrap root 0 at " + address_.toString() + " within " +
                        timeoutText());
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
  std::vector<Peer*> rankPeers_;   // by rank - firstRank; null: not (or no longer) here
  std::vector<WireAddress> entries_;
  SocketAddress rootZero_;         // block roots: where to send the block
  Secret rootZeroSecret_{};
  std::vector<Peer*> blockPeers_;  // root 0: the block roots that reported, by block
  std::vector<std::vector<WireAddress>> blockEntries_;
  std::vector<std::string> blockFailures_;
  std::vector<std::string> earlyFailures_;  // block failures that came before the job's shape
};

// Starts a root thread on an open listener and detaches it: it ends by itself after one
// rendezvous or its timeout, and must not keep the process from exiting.
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

// Whether a System error (throwSystemError's "... (errno N)") came from this errno.
bool mentionsErrno(const Error& error, int err) {
  return error.code() == ErrorCode::System &&
         error.message().find("(errno " + std::to_string(err) + ")") != std::string::npos;
}

// NCCL_COMM_ID: the first rank of the block starts the root on the fixed address, unless this
// process already runs one there. The previous job's root may still be closing its listener.
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
                                                   "start the bootstrap root there: " + error.message());
        rethrowWithContext(error, "starting the bootstrap root for NCCL_COMM_ID=" + address);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The rank side

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(int rank, int nranks, double timeoutSeconds, const std::atomic<bool>* abortFlag,
                  const Secret& secret)
      : rank_(rank),
        nranks_(nranks),
        timeoutSeconds_(timeoutSeconds),
        abortFlag_(abortFlag),
        secret_(secret),
        peerGone_(nranks),
        links_(nranks) {}

  ~SocketBootstrap() override {
    // A notice still being sent gets a moment to reach the peers: destroy right after a
    // failure is the usual way out, and the notice is what stops the other ranks quickly.
    flushNotices();
    noticeStop_.store(true, std::memory_order_release);
    if (noticeThread_.joinable()) noticeThread_.join();
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
    return listenerAddress_.toString();
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
    answerPolicy.allow(kTable, tablePayloadBytes(nranks_)).allow(kError, kMaxErrorBytes);
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
    if (answer.payload.size() != tablePayloadBytes(nranks_))
      throw Error(ErrorCode::Remote, context() + ": " + rootText + " sent a table of " +
                                         std::to_string(answer.payload.size()) + " bytes for " +
                                         std::to_string(nranks_) + " ranks");
    std::vector<SocketAddress> peers(nranks_);
    for (int r = 0; r < nranks_; ++r) {
      try {
        peers[r] = SocketAddress::fromWire(answer.payload.data() + 8 + r * SocketAddress::kWireBytes);
      } catch (const Error& error) {
        rethrowWithContext(error, context() + ": the table from " + rootText + ", entry for rank " + std::to_string(r));
      }
    }
    peers_ = std::move(peers);
    TUTTI_INFO(log::Bootstrap, "%s: joined; %d ranks known", context().c_str(), nranks_);
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void broadcastNotice(const std::string& text) override {
    std::lock_guard<std::mutex> lock(noticeMutex_);
    if (noticeThread_.joinable() || peers_.empty()) return;
    std::string message = text.substr(0, kMaxErrorBytes);
    try {
      noticeThread_ = std::thread([this, message] { sendNotices(message); });
    } catch (const std::system_error& error) {
      TUTTI_WARN("%s: cannot start the thread that tells the other ranks of a failure: %s", context().c_str(), error.what());
    }
  }

  void flushNotices() override {
    std::unique_lock<std::mutex> lock(noticeMutex_);
    if (noticeThread_.joinable()) noticeDoneChanged_.wait_for(lock, kNoticeGrace, [this] { return noticeDone_; });
  }

  void setNoticeHandler(std::function<void(int sender, const std::string& text)> handler) override {
    std::lock_guard<std::mutex> lock(noticeHandlerMutex_);
    noticeHandler_ = std::move(handler);
  }

  void setPeerLostHandler(std::function<void(int peer, const std::string& reason)> handler) override {
    std::lock_guard<std::mutex> lock(noticeHandlerMutex_);
    peerLostHandler_ = std::move(handler);
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

  // Bruck: after round k a rank holds the 2^(k+1) slots that follow its own (cyclically), in a
  // rotated buffer; ceil(log2 n) rounds, each one send and one receive.
  void allGather(void* data, size_t bytesPerRank) override {
    if (data == nullptr && bytesPerRank > 0)
      throw Error(ErrorCode::InvalidArgument, context() + ": allGather of a null buffer");
    if (nranks_ == 1 || bytesPerRank == 0) return;
    SteadyTime deadline = deadlineAfter(timeoutSeconds_);
    size_t n = static_cast<size_t>(nranks_);
    uint8_t* slots = static_cast<uint8_t*>(data);
    std::vector<uint8_t> rotated(n * bytesPerRank);
    std::memcpy(rotated.data(), slots + rank_ * bytesPerRank, bytesPerRank);
    uint32_t round = 0;
    for (int distance = 1; distance < nranks_; distance *= 2, ++round) {
      int count = std::min(distance, nranks_ - distance);
      int to = (rank_ - distance + nranks_) % nranks_;
      int from = (rank_ + distance) % nranks_;
      sendMessage(to, kTagAllGather + round, rotated.data(), count * bytesPerRank, deadline, "allGather");
      recvMessage(from, kTagAllGather + round, rotated.data() + distance * bytesPerRank, count * bytesPerRank,
                  deadline, "allGather");
    }
    for (size_t i = 0; i < n; ++i)
      std::memcpy(slots + ((rank_ + i) % n) * bytesPerRank, rotated.data() + i * bytesPerRank, bytesPerRank);
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
    int sender = -1;  // fixed by the first frame
    bool saidGoodbye = false;  // its end is then an orderly close
    bool inMessage = false;  // kDataPart frames seen, the kData that ends them not yet
    uint32_t messageTag = 0;
    std::vector<uint8_t> message;
  };

  // Outgoing connection to a peer, made on first send.
  struct Link {
    std::mutex mutex;
    Socket socket;
    std::string broken;  // why a send failed midway; the stream is unusable after that
  };

  std::string context() const {
    return "bootstrap rank " + std::to_string(rank_) + " of " + std::to_string(nranks_);
  }

  std::string describePeer(int peer) const {
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
      throw Error(ErrorCode::InvalidArgument, context() + ": " + operation + " of " + std::to_string(size) +
                                                  " bytes from a null buffer");
  }

  // Tells every peer this rank has a connection to that the close is orderly. Never waits long:
  // a peer whose socket does not take the few bytes by the shared deadline is skipped (it will
  // take our close for a death, the safe side). Nothing sets an abort flag during a destructor.
  void sayGoodbye() noexcept {
    SteadyTime deadline = deadlineAfter(kGoodbyeSeconds);
    for (int peer = 0; peer < nranks_; ++peer) {
      Link& link = links_[peer];
      std::lock_guard<std::mutex> lock(link.mutex);
      if (!link.socket.valid() || !link.broken.empty()) continue;
      try {
        sendFrame(link.socket, kData, kTagGoodbye, rank_, secret_, nullptr, 0, deadline, nullptr);
      } catch (const Error& error) {
        TUTTI_INFO(log::Bootstrap, "%s: could not say goodbye to %s: %s", context().c_str(), describePeer(peer).c_str(),
                   error.what());
      }
    }
  }

  // Runs on the notice thread: one short attempt per peer, in rank order from ours.
  void sendNotices(const std::string& message) {
    for (int i = 1; i < nranks_ && !noticeStop_.load(std::memory_order_acquire); ++i) {
      int peer = (rank_ + i) % nranks_;
      {
        std::lock_guard<std::mutex> lock(inboxMutex_);
        if (!peerGone_[peer].empty()) continue;  // its connection to us ended: likely the one that died
      }
      try {
        sendMessage(peer, kTagNotice, message.data(), message.size(), deadlineAfter(kNoticeSecondsPerPeer), "notice",
                    &noticeStop_);
      } catch (const Error& error) {
        TUTTI_INFO(log::Bootstrap, "%s: could not tell %s of the failure: %s", context().c_str(), describePeer(peer).c_str(),
                   error.what());
      }
    }
    std::lock_guard<std::mutex> lock(noticeMutex_);
    noticeDone_ = true;
    noticeDoneChanged_.notify_all();
  }

  void sendMessage(int peer, uint32_t tag, const void* data, size_t size, SteadyTime deadline,
                   const char* operation, const std::atomic<bool>* abortFlag = nullptr) {
    if (abortFlag == nullptr) abortFlag = abortFlag_;
    const uint8_t* bytes = static_cast<const uint8_t*>(data);
    if (peer == rank_) {
      deliver(peer, tag, std::vector<uint8_t>(bytes, bytes + size));
      return;
    }
    Link& link = links_[peer];
    std::lock_guard<std::mutex> lock(link.mutex);
    std::string where = context() + ": " + operation + " to " + describePeer(peer) + " with tag " + std::to_string(tag);
    if (!link.broken.empty())
      throw Error(ErrorCode::Remote, where + ": the connection failed earlier: " + link.broken);
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
      rethrowWithContext(error, where + (error.code() == ErrorCode::Timeout
                                             ? " (not sent within " + secondsText(timeoutSeconds_) + ")"
                                             : std::string()));
    }
  }

  void recvMessage(int peer, uint32_t tag, void* data, size_t size, SteadyTime deadline, const char* operation,
                   double seconds = 0) {
    std::vector<uint8_t> message;
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
        std::string where = context() + ": " + operation + " from " + describePeer(peer) + " with tag " +
                            std::to_string(tag);
        if (!listenerFailure_.empty())
          throw Error(ErrorCode::System, where + ": this rank's listener failed: " + listenerFailure_);
        if (!peerGone_[peer].empty()) throw Error(ErrorCode::Remote, where + ": " + peerGone_[peer]);
        if (abortFlag_ != nullptr && abortFlag_->load(std::memory_order_acquire))
          throw Error(ErrorCode::Aborted, where + ": aborted while waiting");
        SteadyTime now = SteadyClock::now();
        if (now >= deadline)
          throw Error(ErrorCode::Timeout, where + ": nothing arrived within " + secondsText(seconds > 0 ? seconds : timeoutSeconds_));
        inboxChanged_.wait_until(lock, std::min(deadline, now + kPollSlice));
      }
    }
    if (message.size() != size)
      throw Error(ErrorCode::InvalidUsage, context() + ": " + operation + " from " + describePeer(peer) +
                                               " with tag " + std::to_string(tag) + " expected " +
                                               std::to_string(size) + " bytes, but " + std::to_string(message.size()) +
                                               " were sent");
    if (size > 0) std::memcpy(data, message.data(), size);
  }

  void deliver(int sender, uint32_t tag, std::vector<uint8_t>&& message) {
    if (tag == kTagNotice && sender != rank_) {
      std::lock_guard<std::mutex> lock(noticeHandlerMutex_);
      std::string text(message.begin(), message.end());
      TUTTI_INFO(log::Bootstrap, "%s: %s reports a failure: %s", context().c_str(), describePeer(sender).c_str(), text.c_str());
      if (noticeHandler_) noticeHandler_(sender, text);
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
                      : peer.inMessage          ? "closed in the middle of a message"
                      : peer.saidGoodbye        ? "closed by the peer after its goodbye"
                                                : "closed by the peer";
    if (!orderly)
      TUTTI_WARN("%s: dropped connection from %s: %s", context().c_str(), peer.connection.remote().toString().c_str(),
                 why.c_str());
    if (peer.sender < 0) return;
    markPeerGone(peer.sender, "the connection from rank " + std::to_string(peer.sender) + " ended: " + why);
    // A stall is a live but stuck peer: TUTTI_TIMEOUT is the bound for those.
    if (peer.saidGoodbye || kind == DropKind::Stalled || stopping_.load(std::memory_order_acquire)) return;
    if (kind == DropKind::Refused) reportPeerLost(peer.sender, "its bootstrap connection failed: " + why);
    else if (peer.connection.closeError() != 0)
      reportPeerLost(peer.sender, "its process ended: the bootstrap connection was reset without a goodbye (" +
                                      errnoText(peer.connection.closeError()) + ")");
    else
      reportPeerLost(peer.sender, "its process ended: the bootstrap connection closed without a goodbye");
  }

  void reportPeerLost(int peer, const std::string& reason) {
    TUTTI_INFO(log::Bootstrap, "%s: %s is gone: %s", context().c_str(), describePeer(peer).c_str(), reason.c_str());
    std::lock_guard<std::mutex> lock(noticeHandlerMutex_);
    if (peerLostHandler_) peerLostHandler_(peer, reason);
  }

  void serveListener() {
    FramePolicy framePolicy(secret_);
    framePolicy.allow(kData, kMaxDataFrameBytes).allow(kDataPart, kMaxDataFrameBytes);
    double handshake = handshakeSeconds(timeoutSeconds_);
    std::vector<std::unique_ptr<PeerConnection>> connections;
    const std::string name = context();
    ServeScratch scratch;
    while (!stopping_.load(std::memory_order_acquire)) {
      serveConnectionsOnce(listener_, wakeup_.get(), connections, framePolicy, handshake, name, scratch,
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

  Socket listener_;
  SocketAddress listenerAddress_;
  std::vector<SocketAddress> peers_;  // every rank's listener, once joined

  std::mutex inboxMutex_;
  std::condition_variable inboxChanged_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<uint8_t>>> inbox_;
  std::vector<std::string> peerGone_;  // non-empty: why that peer's connection ended
  std::string listenerFailure_;

  std::vector<Link> links_;  // by peer

  std::mutex noticeHandlerMutex_;
  std::function<void(int, const std::string&)> noticeHandler_;
  std::function<void(int, const std::string&)> peerLostHandler_;  // under noticeHandlerMutex_
  std::mutex noticeMutex_;
  std::condition_variable noticeDoneChanged_;
  bool noticeDone_ = false;
  std::atomic<bool> noticeStop_{false};
  std::thread noticeThread_;

  std::unique_ptr<WakeupEvent> wakeup_;
  std::atomic<bool> stopping_{false};
  std::thread listenerThread_;  // last: started after, and joined before, everything it uses
};

}  // namespace

void bootstrapGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclGetUniqueId: uniqueId is null");
  UniqueIdContents contents;
  std::string commId = tunables::kCommId.get();
  if (!commId.empty()) {
    try {
      contents.root = SocketAddress::parse(commId);
    } catch (const Error& error) {
      throw Error(ErrorCode::InvalidUsage, "NCCL_COMM_ID=" + commId + ": " + error.message());
    }
    if (contents.root.port() == 0)
      throw Error(ErrorCode::InvalidUsage, "NCCL_COMM_ID=" + commId + ": the port must not be 0");
    contents.secret = kCommIdSecret;
    contents.fromCommId = true;
    encodeUniqueId(contents, id);
    return;
  }
  bootstrapNewUniqueId(id);
}

void bootstrapNewUniqueId(ncclUniqueId* id) {
  if (id == nullptr) throw Error(ErrorCode::InvalidArgument, "bootstrap: the unique id to fill is null");
  UniqueIdContents contents;
  double timeoutSeconds = configuredTimeoutSeconds();
  NetworkInterface interface = findNetworkInterfaces().front();
  Socket listener = Socket::listen(interface.address);
  contents.root = listener.localAddress();
  contents.secret = randomSecret();
  startRoot(std::move(listener), contents.secret, timeoutSeconds);
  encodeUniqueId(contents, id);
}

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
  if (options.timeoutSeconds < 0)
    throw Error(ErrorCode::InvalidArgument, "bootstrap: negative timeout");
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
                                                     contents[0].secret);
  std::string listenerAddress = bootstrap->startListening(findInterfaceToReach(contents[block].root));
  if (options.onListening) options.onListening(listenerAddress);
  bootstrap->join(contents, deadline);
  return bootstrap;
}

}  // namespace tutti
