// The bootstrap's wire format (frames, message types, payloads) and blocking reads and writes of
// whole frames; public so that tests and fuzzers can speak it.
//
// Integers are in the host's byte order (all supported hosts are little-endian); addresses use
// SocketAddress's wire form. Every frame starts with {magic, type, tag, sender, length, secret}. A
// frame with a bad magic, a wrong secret, or a type or length not allowed on its connection is
// refused; nothing is allocated for a length that was not checked first.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/socket.h"
#include "base/socket_address.h"

namespace tutti::bootstrap::wire {

using Secret = std::array<uint64_t, 2>;
using WireAddress = std::array<uint8_t, SocketAddress::kWireBytes>;

inline constexpr uint64_t kFrameMagic = 0x314d524654545554ull;  // "TUTTFRM1"

enum FrameType : uint32_t {
  kRegister = 1,     // rank -> its root: RegistrationPayload
  kTable = 2,        // root 0 -> root b: int32 nranks, int32 0, nranks wire addresses;
                     // root -> rank: the rank's neighbours only (neighbourTablePayload)
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
  int32_t block;         // which root this is: ranks go to roots in contiguous blocks
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

// "3, 7-12" (long lists end in "... and N more"): for "ranks ... never arrived" messages.
std::string formatRankList(const std::vector<int>& ranks);

// Ranks are spread over nIds roots in contiguous blocks, the first nranks % nIds one larger.
int blockOfRank(int rank, int nranks, int nIds);
int firstRankOfBlock(int block, int nranks, int nIds);
int blockSize(int block, int nranks, int nIds);

// A header with every field set but `reserved`.
FrameHeader makeFrameHeader(uint32_t type, uint32_t tag, int32_t sender, const Secret& secret, uint64_t payloadBytes);

struct Frame {
  FrameHeader header{};
  std::vector<uint8_t> payload;
};

// Which frame types a connection may carry, and how large each may be.
struct FramePolicy {
  explicit FramePolicy(const Secret& expectedSecret) : secret(expectedSecret) { maxPayload.fill(-1); }
  FramePolicy& allow(uint32_t type, uint64_t maxBytes) {
    maxPayload.at(type) = static_cast<int64_t>(maxBytes);
    return *this;
  }
  Secret secret;
  std::array<int64_t, 8> maxPayload{};  // by type; negative: not accepted here
};

// Empty when the header is acceptable, else why not.
std::string checkFrameHeader(const FrameHeader& header, const FramePolicy& policy);

void sendFrame(Socket& socket, uint32_t type, uint32_t tag, int32_t sender, const Secret& secret, const void* payload,
               size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag);
// Reads one whole frame, waiting until the deadline. A frame the policy refuses is a Remote error.
Frame readFrame(Socket& socket, const FramePolicy& policy, SteadyTime deadline, const std::atomic<bool>* abortFlag);

std::vector<uint8_t> errorPayload(ErrorCode code, const std::string& message);
Error errorFromPayload(const std::vector<uint8_t>& payload, const SocketAddress& from);
std::vector<uint8_t> tablePayload(const std::vector<WireAddress>& table);
uint64_t tablePayloadBytes(int nranks);

// What a root tells a rank: not the whole table (n addresses to each of n ranks, 2.4 GB from one
// root for 100,000 ranks) but the listeners of the ranks it sends to in the first allGather,
// rank - 2^k for every 2^k < nranks; that allGather then gives every rank every address.
// Payload: int32 nranks, int32 count, then count entries of {int32 rank, int32 0, wire address}.
std::vector<int> neighbourRanks(int rank, int nranks);
std::vector<uint8_t> neighbourTablePayload(const std::vector<WireAddress>& table, int rank);
uint64_t neighbourTablePayloadMaxBytes(int nranks);
inline constexpr size_t kNeighbourEntryBytes = 8 + SocketAddress::kWireBytes;

// TUTTI_BOOTSTRAP_TIMEOUT, checked.
double configuredTimeoutSeconds();
// How long a connection may stay silent before its first frame, or in the middle of one.
double handshakeSeconds(double timeoutSeconds);

// For messages: "2.5 s".
std::string secondsText(double seconds);
// Text that came over the wire, made safe to print.
std::string printable(const uint8_t* bytes, size_t size);
[[noreturn]] void rethrowWithContext(const Error& error, const std::string& context);

}  // namespace tutti::bootstrap::wire
