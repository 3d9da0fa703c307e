// The bootstrap: the out-of-band TCP network that ranks use during init (and to set up
// connections later) before any transport exists.
//
// ncclGetUniqueId starts a root listener in the calling process and packs its address, a magic
// number and a random secret into the 128-byte ncclUniqueId. Every rank connects to a root,
// registers its own listener, and learns every other rank's listener address; after that, ranks
// talk to each other directly. Every message is framed (magic, type, tag, length, secret) and
// bounded in size; a connection without the secret is dropped and logged. Every wait has a
// deadline (TUTTI_BOOTSTRAP_TIMEOUT) and polls an abort flag.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/socket_address.h"
#include "nccl.h"

namespace tutti {

// Fills id: a fresh root listener in this process, or the one NCCL_COMM_ID names (then the
// root is started by the rank-0 process at init if the address is local).
void bootstrapGetUniqueId(ncclUniqueId* id);
// Fills id with a fresh root listener in this process and a random secret, whatever NCCL_COMM_ID says: for the
// communicators a library call makes from another one (ncclCommSplit), whose ranks must not meet at the user's fixed
// root, where every such communicator would share one address and one secret.
void bootstrapNewUniqueId(ncclUniqueId* id);

struct BootstrapOptions {
  double timeoutSeconds = 0;                     // 0: take TUTTI_BOOTSTRAP_TIMEOUT
  const std::atomic<bool>* abortFlag = nullptr;  // polled by every wait; set means stop now
  // Called (on the creating thread) once this rank's listener is open, with its "host:port",
  // before the rank registers with its root. Tests use it to probe a listener during init.
  std::function<void(const std::string& listenerAddress)> onListening;
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
  virtual void barrier() = 0;

  // Point to point, matched by (peer, tag) in order; recv needs the exact size that was sent.
  // send may return before the peer receives. Tags below 1000 are reserved for the bootstrap.
  // recv waits timeoutSeconds (0: TUTTI_BOOTSTRAP_TIMEOUT, or the timeout given at create).
  virtual void send(int peer, uint32_t tag, const void* data, size_t size) = 0;
  virtual void recv(int peer, uint32_t tag, void* data, size_t size, double timeoutSeconds = 0) = 0;

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
};

// The bootstrap's wire format, public so that tests and fuzzers can speak it. Integers are in the
// host's byte order (all supported hosts are little-endian); addresses use SocketAddress's wire form.
namespace bootstrap_wire {

inline constexpr uint64_t kUniqueIdMagic = 0x3144494954545554ull;  // "TUTTIID1"
inline constexpr uint64_t kFrameMagic = 0x314d524654545554ull;     // "TUTTFRM1"

// The secret carried by ids made from NCCL_COMM_ID. A fixed address has no channel to hand out a
// random secret, so such jobs run with this well-known value: frames are still checked for shape
// and size, but anyone who can reach the root can join. Use ncclGetUniqueId for a real secret.
inline constexpr std::array<uint64_t, 2> kCommIdSecret = {0x4e4f2d5345435245ull, 0x542d434f4d4d4944ull};

enum FrameType : uint32_t {
  kRegister = 1,     // rank -> its root: RegistrationPayload
  kTable = 2,        // root -> rank, root 0 -> root b: int32 nranks, int32 0, nranks wire addresses
  kError = 3,        // root -> rank, root 0 -> root b: uint32 ErrorCode, then the message text
  kBlockReport = 4,  // root b -> root 0: BlockReportHeader, then count wire addresses
  kBlockFailed = 5,  // root b -> root 0: like kError, why block b cannot complete
  kData = 6,         // rank -> rank: the last (or only) piece of one message, tag in the header
  kDataPart = 7,     // rank -> rank: a piece of a message that continues in the next frame
};

struct FrameHeader {
  uint64_t magic;
  uint32_t type;
  uint32_t tag;
  int32_t senderRank;  // -1 for a root
  uint32_t reserved;
  uint64_t payloadBytes;
  uint64_t secret[2];
};
static_assert(sizeof(FrameHeader) == 48);

struct RegistrationPayload {
  int32_t rank;
  int32_t nranks;
  int32_t nIds;
  int32_t block;        // which root this is: ranks go to roots in contiguous blocks
  uint32_t remainingMs;  // of the rank's deadline when it sent this
  uint32_t timeoutMs;    // the whole bootstrap timeout, for messages
  uint32_t pid;
  uint32_t reserved;
  uint8_t listener[SocketAddress::kWireBytes];
  uint8_t rootZero[SocketAddress::kWireBytes];  // where block roots send their block (nIds > 1)
  uint64_t rootZeroSecret[2];
  char host[64];
};

struct BlockReportHeader {
  int32_t block;
  int32_t nranks;
  int32_t nIds;
  int32_t count;
  uint32_t remainingMs;
  uint32_t timeoutMs;
};

// The tag of the empty kData frame that an orderly close sends on each of its connections.
inline constexpr uint32_t kTagGoodbye = 901;

// Largest payloads accepted, checked before anything is allocated.
inline constexpr uint64_t kMaxDataFrameBytes = 64ull << 20;
inline constexpr uint64_t kMaxErrorBytes = 16ull << 10;

// What an ncclUniqueId made by bootstrapGetUniqueId holds. Throws InvalidArgument when the bytes
// are not such an id.
struct UniqueIdContents {
  SocketAddress root;
  std::array<uint64_t, 2> secret{};
  bool fromCommId = false;  // made from NCCL_COMM_ID: rank 0's process starts the root
};
UniqueIdContents decodeUniqueId(const ncclUniqueId& id);
void encodeUniqueId(const UniqueIdContents& contents, ncclUniqueId* id);

// "3, 7-12" (long lists end in "... and N more"): for "ranks ... never arrived" messages.
std::string formatRankList(const std::vector<int>& ranks);

// Ranks are spread over nIds roots in contiguous blocks, the first nranks % nIds one larger.
int blockOfRank(int rank, int nranks, int nIds);
int firstRankOfBlock(int block, int nranks, int nIds);
int blockSize(int block, int nranks, int nIds);

}  // namespace bootstrap_wire

}  // namespace tutti
