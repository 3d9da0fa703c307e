// libFuzzer target: bytes from the network through the bootstrap's frame reader, as the root and
// the ranks' listeners read them (bootstrap/wire: readFrame and checkFrameHeader over a
// real loopback TCP connection), then through the decoders of what the frames carry (error
// text, address tables, registrations). A refused frame or payload is a tutti::Error; anything
// else (a crash, a sanitizer report, another exception, a hang) is a finding.
//
// The first input byte picks the listener's policy and whether the first header gets the right
// magic and secret stamped in (a fuzzer cannot guess a 128-bit secret; without it every frame
// stops at the secret check). Built with clang -fsanitize=fuzzer,address by tests/faults/fuzz.sh.
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "base/socket_address.h"
#include "bootstrap/wire.h"

using namespace tutti;
using namespace tutti::bootstrap::wire;

namespace {

const Secret kSecret = {0x0123456789abcdefull, 0xfedcba9876543210ull};

struct Loopback {
  Socket listener = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
};

FramePolicy policyFor(uint8_t which) {
  FramePolicy policy(kSecret);
  switch (which % 3) {
    case 0:  // the bootstrap root's listener
      policy.allow(kRegister, sizeof(RegistrationPayload))
          .allow(kBlockReport, tablePayloadBytes(4096))
          .allow(kBlockFailed, kMaxErrorBytes);
      break;
    case 1:  // a rank answered by its root
      policy.allow(kTable, tablePayloadBytes(64)).allow(kError, kMaxErrorBytes);
      break;
    default:  // a rank's listener: messages from other ranks
      policy.allow(kData, kMaxDataFrameBytes).allow(kDataPart, kMaxDataFrameBytes);
      break;
  }
  return policy;
}

void decode(const Frame& frame, const SocketAddress& from) {
  const std::vector<uint8_t>& p = frame.payload;
  switch (frame.header.type) {
    case kError:
    case kBlockFailed: (void)errorFromPayload(p, from).message().size(); break;
    case kTable:
      if (p.size() >= 8) {
        int32_t count = 0;
        std::memcpy(&count, p.data(), sizeof count);
        for (size_t i = 0; count > 0 && i < size_t(count) && 8 + (i + 1) * SocketAddress::kWireBytes <= p.size(); i++)
          (void)SocketAddress::fromWire(p.data() + 8 + i * SocketAddress::kWireBytes).toString();
      }
      break;
    case kRegister:
      if (p.size() == sizeof(RegistrationPayload)) {
        RegistrationPayload r;
        std::memcpy(&r, p.data(), sizeof r);
        (void)printable(reinterpret_cast<const uint8_t*>(r.host), strnlen(r.host, sizeof r.host));
        (void)SocketAddress::fromWire(r.listener).toString();
        (void)SocketAddress::fromWire(r.rootZero).toString();
        if (r.nIds > 0 && r.nranks > 0 && r.nIds <= r.nranks && r.rank >= 0 && r.rank < r.nranks)
          (void)blockSize(blockOfRank(r.rank, r.nranks, r.nIds), r.nranks, r.nIds);
      }
      break;
    default: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Loopback* loopback = new Loopback();  // one listener for the whole run
  if (size < 1 || size > 16384) return 0;      // stays inside the socket buffers: no writer thread needed
  const uint8_t mode = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);
  if ((mode & 0x80) && bytes.size() >= sizeof(FrameHeader)) {
    FrameHeader header;
    std::memcpy(&header, bytes.data(), sizeof header);
    header.magic = kFrameMagic;
    header.secret[0] = kSecret[0];
    header.secret[1] = kSecret[1];
    std::memcpy(bytes.data(), &header, sizeof header);
  }
  SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(5);
  Socket writer = Socket::connect(loopback->listener.localAddress(), deadline, nullptr);
  Socket reader = loopback->listener.accept(deadline, nullptr);
  if (!bytes.empty()) writer.sendAll(bytes.data(), bytes.size(), deadline, nullptr);
  ::shutdown(writer.fd(), SHUT_WR);  // the reader sees the end instead of waiting for more
  FramePolicy policy = policyFor(mode & 0x7f);
  try {
    for (int frames = 0; frames < 64; frames++)
      decode(readFrame(reader, policy, deadline, nullptr), reader.peerAddress());
  } catch (const Error&) {
    // refused: what must happen to bad bytes
  }
  return 0;
}
