// One connection through a net backend, driven by hand: what the tests of each backend (Socket,
// the plugin adapter) share.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "transports/net/net.h"

namespace tutti_test {

struct NetPair {
  std::unique_ptr<tutti::transport::net::NetSendComm> send;
  std::unique_ptr<tutti::transport::net::NetRecvComm> recv;
};

// Listens, connects and accepts on device 0 (10 s at most).
NetPair connectNetPair(tutti::transport::net::NetBackend& backend);

// Sends `out` and receives it into `in` (whose size is the receive's capacity), driving both
// sides until both complete; FAILs after 10 s. Returns the size the receive reported.
size_t exchangeOverNet(NetPair& pair, const std::vector<char>& out, std::vector<char>& in,
                       tutti::transport::net::MemoryRegistration sendRegistration = {},
                       tutti::transport::net::MemoryRegistration recvRegistration = {});
// The same between raw buffers (memory that is no vector's: a mapping standing for a device's).
size_t exchangeOverNet(NetPair& pair, const void* out, size_t outBytes, void* in, size_t capacity,
                       tutti::transport::net::MemoryRegistration sendRegistration = {},
                       tutti::transport::net::MemoryRegistration recvRegistration = {});

// Calls `step` (which tests requests) until it throws, for `limit` at most: the error, or nothing.
std::optional<tutti::Error> firstErrorWithin(const std::function<void()>& step,
                                             std::chrono::seconds limit = std::chrono::seconds(10));

// The message of the tutti::Error that `f` throws; "" when it throws none.
std::string errorOf(const std::function<void()>& f);

// `bytes` pseudo-random bytes from `seed`.
std::vector<char> randomBytes(size_t bytes, uint32_t seed);

// A memfd of `pages` pages and one mapping of it: memory reached by its dmabuf descriptor, as a
// device's is (the emulated device's is such a memfd), whose mapping is the "device address". The
// verbs stand-in reaches the bytes only through its own mapping of the descriptor.
struct MemfdMemory {
  int fd = -1;
  char* data = nullptr;
  size_t bytes = 0;
  explicit MemfdMemory(size_t pages);
  ~MemfdMemory();
  MemfdMemory(const MemfdMemory&) = delete;
  MemfdMemory& operator=(const MemfdMemory&) = delete;
};

}  // namespace tutti_test
