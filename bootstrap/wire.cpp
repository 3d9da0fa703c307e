// The bootstrap's frames: building, checking, sending and reading them, and their payloads.
#include "bootstrap/wire.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/tunables.h"

namespace tutti::bootstrap::wire {

namespace {

// Small frames go out in one send.
constexpr size_t kCoalesceBytes = 4096;

}  // namespace

std::string formatRankList(const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  constexpr size_t kMaxRanges = 16;
  std::string text;
  size_t ranges = 0;
  size_t i = 0;
  while (i < sorted.size()) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (ranges == kMaxRanges) {
      text += ", ... and " + std::to_string(sorted.size() - i) + " more";
      break;
    }
    if (!text.empty()) text += ", ";
    text += std::to_string(sorted[i]);
    if (j > i) text += "-" + std::to_string(sorted[j]);
    ++ranges;
    i = j + 1;
  }
  return text;
}

int blockOfRank(int rank, int nranks, int nIds) {
  int base = nranks / nIds;
  int larger = nranks % nIds;  // the first `larger` blocks hold base + 1 ranks
  int inLarger = larger * (base + 1);
  return rank < inLarger ? rank / (base + 1) : larger + (rank - inLarger) / base;
}

int firstRankOfBlock(int block, int nranks, int nIds) {
  int base = nranks / nIds;
  int larger = nranks % nIds;
  return block * base + std::min(block, larger);
}

int blockSize(int block, int nranks, int nIds) { return nranks / nIds + (block < nranks % nIds ? 1 : 0); }

FrameHeader makeFrameHeader(uint32_t type, uint32_t tag, int32_t sender, const Secret& secret, uint64_t payloadBytes) {
  FrameHeader header{};
  header.magic = kFrameMagic;
  header.type = type;
  header.tag = tag;
  header.senderRank = sender;
  header.payloadBytes = payloadBytes;
  header.secret[0] = secret[0];
  header.secret[1] = secret[1];
  return header;
}

std::string checkFrameHeader(const FrameHeader& header, const FramePolicy& policy) {
  if (header.magic != kFrameMagic) {
    char text[64];
    std::snprintf(text, sizeof text, "bad magic 0x%016llx", static_cast<unsigned long long>(header.magic));
    return text;
  }
  // Compared without an early exit, so timing tells nothing about the secret.
  uint64_t difference = (header.secret[0] ^ policy.secret[0]) | (header.secret[1] ^ policy.secret[1]);
  if (difference != 0) return "wrong secret";
  if (header.type >= policy.maxPayload.size() || policy.maxPayload[header.type] < 0)
    return "frame type " + std::to_string(header.type) + " is not expected here";
  if (header.payloadBytes > static_cast<uint64_t>(policy.maxPayload[header.type]))
    return "frame of type " + std::to_string(header.type) + " announces " + std::to_string(header.payloadBytes) +
           " bytes, more than the " + std::to_string(policy.maxPayload[header.type]) + " allowed";
  return {};
}

void sendFrame(Socket& socket, uint32_t type, uint32_t tag, int32_t sender, const Secret& secret, const void* payload,
               size_t size, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  FrameHeader header = makeFrameHeader(type, tag, sender, secret, size);
  if (size <= kCoalesceBytes) {
    uint8_t buffer[sizeof(FrameHeader) + kCoalesceBytes];
    std::memcpy(buffer, &header, sizeof header);
    if (size > 0) std::memcpy(buffer + sizeof header, payload, size);
    socket.sendAll(buffer, sizeof header + size, deadline, abortFlag);
  } else {
    socket.sendAll(&header, sizeof header, deadline, abortFlag);
    socket.sendAll(payload, size, deadline, abortFlag);
  }
}

Frame readFrame(Socket& socket, const FramePolicy& policy, SteadyTime deadline, const std::atomic<bool>* abortFlag) {
  Frame frame;
  socket.recvAll(&frame.header, sizeof frame.header, deadline, abortFlag);
  std::string problem = checkFrameHeader(frame.header, policy);
  if (!problem.empty())
    throw Error(ErrorCode::Remote, "bad frame from " + socket.peerAddress().toString() + ": " + problem);
  frame.payload.resize(frame.header.payloadBytes);
  socket.recvAll(frame.payload.data(), frame.payload.size(), deadline, abortFlag);
  return frame;
}

std::vector<uint8_t> errorPayload(ErrorCode code, const std::string& message) {
  std::string text = message.substr(0, kMaxErrorBytes - sizeof(uint32_t));
  std::vector<uint8_t> payload(sizeof(uint32_t) + text.size());
  uint32_t codeValue = static_cast<uint32_t>(code);
  std::memcpy(payload.data(), &codeValue, sizeof codeValue);
  std::memcpy(payload.data() + sizeof codeValue, text.data(), text.size());
  return payload;
}

Error errorFromPayload(const std::vector<uint8_t>& payload, const SocketAddress& from) {
  if (payload.size() < sizeof(uint32_t))
    return Error(ErrorCode::Remote, "malformed error frame from " + from.toString());
  uint32_t codeValue = 0;
  std::memcpy(&codeValue, payload.data(), sizeof codeValue);
  ErrorCode code =
      codeValue <= static_cast<uint32_t>(ErrorCode::Aborted) ? static_cast<ErrorCode>(codeValue) : ErrorCode::Remote;
  return Error(code, printable(payload.data() + sizeof codeValue, payload.size() - sizeof codeValue));
}

std::vector<uint8_t> tablePayload(const std::vector<WireAddress>& table) {
  std::vector<uint8_t> payload(8 + table.size() * SocketAddress::kWireBytes);
  int32_t count = static_cast<int32_t>(table.size());
  std::memcpy(payload.data(), &count, sizeof count);
  for (size_t i = 0; i < table.size(); ++i)
    std::memcpy(payload.data() + 8 + i * SocketAddress::kWireBytes, table[i].data(), SocketAddress::kWireBytes);
  return payload;
}

uint64_t tablePayloadBytes(int nranks) { return 8 + static_cast<uint64_t>(nranks) * SocketAddress::kWireBytes; }

std::vector<int> neighbourRanks(int rank, int nranks) {
  std::vector<int> ranks;
  for (int64_t distance = 1; distance < nranks; distance *= 2)
    ranks.push_back(int((rank - distance % nranks + nranks) % nranks));
  return ranks;
}

std::vector<uint8_t> neighbourTablePayload(const std::vector<WireAddress>& table, int rank) {
  const int nranks = static_cast<int>(table.size());
  std::vector<int> ranks = neighbourRanks(rank, nranks);
  std::vector<uint8_t> payload(8 + ranks.size() * kNeighbourEntryBytes, 0);
  int32_t header[2] = {nranks, static_cast<int32_t>(ranks.size())};
  std::memcpy(payload.data(), header, sizeof header);
  for (size_t i = 0; i < ranks.size(); ++i) {
    uint8_t* entry = payload.data() + 8 + i * kNeighbourEntryBytes;
    int32_t r = ranks[i];
    std::memcpy(entry, &r, sizeof r);
    std::memcpy(entry + 8, table[size_t(r)].data(), SocketAddress::kWireBytes);
  }
  return payload;
}

uint64_t neighbourTablePayloadMaxBytes(int nranks) {
  return 8 + neighbourRanks(0, nranks).size() * kNeighbourEntryBytes;
}

double configuredTimeoutSeconds() {
  int64_t seconds = tunables::kBootstrapTimeout.get();
  if (seconds <= 0)
    throw Error(ErrorCode::InvalidUsage,
                "TUTTI_BOOTSTRAP_TIMEOUT=" + std::to_string(seconds) + ": must be a positive number of seconds");
  return static_cast<double>(seconds);
}

double handshakeSeconds(double timeoutSeconds) { return std::clamp(timeoutSeconds / 4, 1.0, 10.0); }

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

std::string printable(const uint8_t* bytes, size_t size) {
  std::string text(reinterpret_cast<const char*>(bytes), size);
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f) c = '?';
  return text;
}

[[noreturn]] void rethrowWithContext(const Error& error, const std::string& context) {
  throw Error(error.code(), context + ": " + error.message());
}

}  // namespace tutti::bootstrap::wire
