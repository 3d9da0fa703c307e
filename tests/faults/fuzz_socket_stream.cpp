// libFuzzer target: bytes from the network into the Socket net backend's receive side
// (transports/net/socket: a message is an 8-byte length then the payload; ~0 is the goodbye). A
// real listener accepts a raw connection that presents the right hello (the input cannot guess
// the nonce), then the input's bytes arrive and receives are posted and tested until each
// completes or fails. A refusal is a tutti::Error; a crash, a sanitizer report, another
// exception, or a receive still pending after its stream ended (a hang) is a finding.
//
// The first input byte picks the receive buffers' size (a length above it must be refused).
// Built with clang -fsanitize=fuzzer,address by tests/faults/fuzz.sh.
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/socket.h"
#include "transports/net/socket/socket_backend.h"

using namespace tutti;
using namespace tutti::transport::net;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_NTHREADS", "1", 1);  // one socket per connection: the hello says index 0 of 1
  setenv("NCCL_NSOCKS_PERTHREAD", "1", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static NetBackend* backend = makeSocketBackend().release();
  if (size < 1 || size > 16384) return 0;               // stays inside the socket buffers
  const size_t capacity = size_t(1) << (data[0] % 14);  // 1 B .. 8 KiB
  NetHandle handle{};
  std::unique_ptr<NetListenComm> listener = backend->listen(0, &handle);
  SocketHandleContents contents = readSocketHandle(handle);
  SteadyTime deadline = SteadyClock::now() + std::chrono::seconds(5);
  Socket writer = Socket::connect(contents.address, deadline, nullptr);
  SocketHello hello{kSocketHelloMagic, contents.nonce, 0, 1};
  writer.sendAll(&hello, sizeof hello, deadline, nullptr);
  std::unique_ptr<NetRecvComm> recv = listener->accept(deadline, nullptr);
  if (size > 1) writer.sendAll(data + 1, size - 1, deadline, nullptr);
  ::shutdown(writer.fd(), SHUT_WR);  // the stream ends here

  // What must happen, from the bytes alone: each receive completes with the next message, fails
  // (a length above its capacity, or the stream ends inside a message), or, after the peer's
  // goodbye, stays pending (the executor's TUTTI_TIMEOUT bounds that wait, not the backend).
  const uint8_t* stream = data + 1;
  const size_t streamBytes = size - 1;
  size_t at = 0;
  enum { Completes, Fails, Pending } expected = Completes;
  int i = 0;
  try {
    for (; i < 4; i++) {
      uint64_t length = 0;
      if (streamBytes - at < sizeof length) {
        expected = Fails;
      } else {
        std::memcpy(&length, stream + at, sizeof length);
        expected = length == ~uint64_t(0)                               ? Pending
                   : length > capacity || streamBytes - at - 8 < length ? Fails
                                                                        : Completes;
      }
      std::vector<char> buffer(capacity);
      MemoryRegistration registration = recv->registerMemory(buffer.data(), buffer.size());
      NetRequest* request = recv->irecv(buffer.data(), buffer.size(), 0, registration);
      size_t bytes = 0;
      SteadyTime until =
          SteadyClock::now() + (expected == Pending ? std::chrono::milliseconds(20) : std::chrono::seconds(5));
      bool done = false;
      while (!(done = recv->test(request, &bytes)) && SteadyClock::now() < until) {
      }
      if (expected == Pending && !done) break;  // as it must
      if (expected != Completes || !done) {
        std::fprintf(stderr, "receive %d of capacity %zu: %s where the stream says it %s\n", i, capacity,
                     done ? "completed" : "is still pending 5 s after its stream ended",
                     expected == Pending ? "stays pending (goodbye)"
                     : expected == Fails ? "fails"
                                         : "completes");
        std::abort();
      }
      if (bytes != length || std::memcmp(buffer.data(), stream + at + 8, length) != 0) {
        std::fprintf(stderr, "receive %d completed with %zu bytes where the stream holds %llu, or other bytes\n", i,
                     bytes, static_cast<unsigned long long>(length));
        std::abort();
      }
      recv->deregisterMemory(registration);
      at += 8 + length;
    }
  } catch (const Error& e) {
    // Refused: what must happen to bad bytes, or a stream that ends inside a message; but not to
    // a receive whose whole message arrived.
    if (expected == Completes) {
      std::fprintf(stderr, "receive %d failed although its whole message arrived: %s\n", i, e.what());
      std::abort();
    }
  }
  return 0;
}
