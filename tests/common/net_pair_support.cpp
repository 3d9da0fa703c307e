// One connection through a net backend, driven by hand (see net_pair_support.h).
#include "tests/common/net_pair_support.h"

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>

#include "base/clock.h"

namespace tutti_test {

using namespace tutti::transport::net;

MemfdMemory::MemfdMemory(size_t pages) : bytes(pages * size_t(sysconf(_SC_PAGESIZE))) {
  fd = memfd_create("dmabuf-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, off_t(bytes)) == 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  data = static_cast<char*>(p);
}

MemfdMemory::~MemfdMemory() {
  munmap(data, bytes);
  close(fd);
}

NetPair connectNetPair(NetBackend& backend) {
  NetHandle handle{};
  auto listener = backend.listen(0, &handle);
  std::atomic<bool> abort{false};
  auto deadline = tutti::deadlineAfter(10);
  NetPair pair;
  pair.send = backend.connect(0, handle, deadline, &abort);
  pair.recv = listener->accept(deadline, &abort);
  return pair;
}

size_t exchangeOverNet(NetPair& pair, const std::vector<char>& out, std::vector<char>& in,
                       MemoryRegistration sendRegistration, MemoryRegistration recvRegistration) {
  return exchangeOverNet(pair, out.data(), out.size(), in.data(), in.size(), sendRegistration, recvRegistration);
}

size_t exchangeOverNet(NetPair& pair, const void* out, size_t outBytes, void* in, size_t capacity,
                       MemoryRegistration sendRegistration, MemoryRegistration recvRegistration) {
  NetRequest* s = nullptr;
  NetRequest* r = nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s == nullptr) s = pair.send->isend(out, outBytes, 0, sendRegistration);
  while (r == nullptr) r = pair.recv->irecv(in, capacity, 0, recvRegistration);
  bool sent = false, received = false;
  size_t got = 0;
  while (!(sent && received)) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("the exchange did not complete within 10 s");
    if (!sent) sent = pair.send->test(s, nullptr);
    if (!received) received = pair.recv->test(r, &got);
  }
  return got;
}

std::vector<char> randomBytes(size_t bytes, uint32_t seed) {
  std::vector<char> data(bytes);
  std::mt19937 random(seed);
  for (char& c : data) c = char(random());
  return data;
}

std::optional<tutti::Error> firstErrorWithin(const std::function<void()>& step, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      step();
    } catch (const tutti::Error& e) {
      return e;
    }
  }
  return std::nullopt;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const tutti::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tutti_test
