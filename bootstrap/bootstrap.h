// The bootstrap: the out-of-band TCP network that ranks use during init (and to set up
// connections later) before any transport exists.
//
// ncclGetUniqueId starts a root listener in the calling process and packs its address, a magic
// number and a random secret into the 128-byte ncclUniqueId. Every rank connects to a root,
// registers its own listener, and learns every other rank's listener address; after that, ranks
// talk to each other directly. Every message is framed (magic, type, tag, length, secret) and
// bounded in size; a connection without the secret is dropped and logged. Every wait has a
// deadline (TUTTI_BOOTSTRAP_TIMEOUT) and polls an abort flag. The wire format is in
// wire.h and id.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/questions.h"
#include "nccl.h"

namespace tutti::bootstrap {

// Fills id: a fresh root listener in this process, or the one NCCL_COMM_ID names (then the
// root is started by the rank-0 process at init if the address is local).
void getUniqueId(ncclUniqueId* id);
// Fills id with a fresh root listener in this process and a random secret, whatever NCCL_COMM_ID says: for the
// communicators a library call makes from another one (ncclCommSplit), whose ranks must not meet at the user's fixed
// root, where every such communicator would share one address and one secret.
void newUniqueId(ncclUniqueId* id);

struct BootstrapOptions {
  double timeoutSeconds = 0;                     // 0: take TUTTI_BOOTSTRAP_TIMEOUT
  const std::atomic<bool>* abortFlag = nullptr;  // polled by every wait; set means stop now
  // Called (on the creating thread) once this rank's listener is open, with its "host:port",
  // before the rank registers with its root. Tests use it to probe a listener during init.
  std::function<void(const std::string& listenerAddress)> onListening;
  // Messages to ranks that are threads of this process go straight to their inboxes; false:
  // through the sockets as for any other rank (tests of the socket path).
  bool sameProcessShortcut = true;
};

class Bootstrap {
 public:
  // Joins the job named by ids (nIds >= 1 roots, as ncclCommInitRankScalable allows; ranks are
  // spread over roots in contiguous blocks). Blocks until every rank has joined or the deadline
  // passes; the error then names the ranks that never arrived.
  static std::unique_ptr<Bootstrap> create(const ncclUniqueId* ids, int nIds, int rank, int nranks,
                                           const BootstrapOptions& options);
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;

  // In place: data holds nranks slots of bytesPerRank; slot rank() is ours. O(log n) rounds.
  virtual void allGather(void* data, size_t bytesPerRank) = 0;
  // In place, blocks of any size: data holds every rank's block back to back in rank order,
  // sizes[r] bytes for rank r (the same table on every rank). A rank receives only the bytes
  // there are, so ranks with nothing to say cost nothing. O(log n) rounds.
  virtual void allGatherV(void* data, const std::vector<size_t>& sizes) = 0;
  virtual void barrier() = 0;

  // Point to point, matched by (peer, tag) in order; recv needs the exact size that was sent.
  // send may return before the peer receives. Tags below 1000 are reserved for the bootstrap.
  // recv waits timeoutSeconds (0: TUTTI_BOOTSTRAP_TIMEOUT, or the timeout given at create).
  virtual void send(int peer, uint32_t tag, const void* data, size_t size) = 0;
  virtual void recv(int peer, uint32_t tag, void* data, size_t size, double timeoutSeconds = 0) = 0;
  // As recv without waiting, for a caller that polls several things in one loop: true once the
  // message has arrived (and was taken), false while it has not. Throws as recv does when the peer
  // is gone, this rank's listener failed or the abort flag is set.
  virtual bool tryRecv(int peer, uint32_t tag, void* data, size_t size) = 0;

  // As send and recv, for making a communicator out of this one after it failed, was aborted or
  // was revoked (ncclCommShrink): they wait at most timeoutSeconds and watch stop (null: nothing)
  // instead of the abort flag given at create, which is set by then. They go straight to the
  // peer's listener, through no other rank.
  virtual void sendWatching(int peer, uint32_t tag, const void* data, size_t size, double timeoutSeconds,
                            const std::atomic<bool>* stop) = 0;
  virtual void recvWatching(int peer, uint32_t tag, void* data, size_t size, double timeoutSeconds,
                            const std::atomic<bool>* stop) = 0;

  // "host:port" of a rank's bootstrap listener, for error messages.
  virtual std::string peerAddress(int peer) const = 0;

  // Failure notices: a rank whose communicator failed tells every other rank why, so that
  // ranks that do not talk to the failed peer directly stop at once and name the cause instead
  // of waiting for their own timeout. broadcastNotice returns at once: a thread of the
  // bootstrap sends the text to each peer (best effort, a few seconds per peer at most; only
  // the first call sends). The handler runs on the listener thread for each notice received;
  // setting an empty handler waits for a running call to finish, so its captures may then go.
  virtual void broadcastNotice(const std::string& text) = 0;
  // Waits (a few seconds at most) until a notice being sent has gone to every peer.
  virtual void flushNotices() = 0;
  virtual void setNoticeHandler(std::function<void(int sender, const std::string& text)> handler) = 0;

  // Departures: an orderly close (the destructor) first sends every peer it has a connection to
  // a goodbye. A connection from a rank that ends without one, while this bootstrap is not
  // closing, means that rank's process ended (the kernel closed its sockets): the handler runs on
  // the listener thread with the rank and why ("its process ended: ..." or the OS error). Each
  // rank's ring neighbours (rank +- 1) hold a connection from it once a barrier and an allGather
  // have run. Setting an empty handler waits for a running call to finish.
  virtual void setPeerLostHandler(std::function<void(int peer, const std::string& reason)> handler) = 0;

  // Questions: asks each of peers a short question and returns their answers (one PeerAnswer per
  // peer, in order) within timeoutSeconds. A peer answers through its answerer, on a thread of its
  // bootstrap; a peer that is stopped or hung gives NoAnswer by the deadline, one that cannot be
  // reached (its process is gone) Unreachable with the error. For diagnosis after a failure: it
  // watches no abort flag. Setting an empty answerer waits for a running call to finish.
  virtual std::vector<PeerAnswer> ask(const std::vector<int>& peers, const std::string& question,
                                      double timeoutSeconds) = 0;
  virtual void setAnswerer(std::function<std::string(int asker, const std::string& question)> answerer) = 0;
};

}  // namespace tutti::bootstrap
