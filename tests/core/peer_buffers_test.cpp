// PeerBuffers (runtime/comm/peer_buffers.h) on a hand-made communicator: three ranks by identity (this
// one, a rank of this host in another process, a rank of another host) and a backend that records
// what it is asked to import and release. What is tested is PeerBuffers' own part: whether it maps
// at all, its answers to a peer's map and unmap questions (one import per allocation, counted
// references, every refusal said), and the table it keeps. The bootstrap's questions themselves
// are the bootstrap's tests'.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kernels/host/host_backend.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/peer_buffers.h"
#include "tests/common/env_support.h"

namespace {

namespace kern = tutti::kern;
using tutti::Error;
using tutti::ErrorCode;
using tutti::PeerBuffers;

// A backend whose memory is the host's, that says whether it exports user buffers and records the
// imports it is asked for. Each import is at a new made-up address, never dereferenced.
class RecordingBackend : public kern::host::HostMemoryBackend {
 public:
  bool exports = true;
  bool failImports = false;
  bool failExports = true;
  struct Import {
    std::vector<uint8_t> handle;
    size_t bytes;
    uintptr_t base;
  };
  std::vector<Import> imports;
  std::vector<uintptr_t> released;
  int exportCalls = 0;

  RecordingBackend() : kern::host::HostMemoryBackend(kern::BackendOptions{}) {}
  const char* name() const override { return "recording"; }
  bool readsPeerBuffers() const override { return false; }
  void abort() override {}
  bool exportsUserBuffers() const override { return exports; }
  kern::UserBufferExport exportUserBuffer(const void*, size_t, const std::string& what) override {
    exportCalls++;
    if (failExports) throw Error(ErrorCode::InvalidUsage, what + ": not from ncclMemAlloc");
    return {};
  }
  void* importExported(const kern::ExportHandle& handle, size_t bytes, const std::string& what) override {
    if (failImports) throw Error(ErrorCode::System, what + ": the driver refused the handle");
    const uintptr_t base = 0x10000000u * (imports.size() + 1);
    imports.push_back(
        Import{std::vector<uint8_t>(handle.bytes, handle.bytes + kern::ExportHandle::kBytes), bytes, base});
    return reinterpret_cast<void*>(base);
  }
  void releaseImported(void* p) override { released.push_back(reinterpret_cast<uintptr_t>(p)); }

 protected:
  void run(std::span<kern::Launch* const>) override {}  // nothing here launches
};

constexpr int kOtherProcess = 1;  // a rank of this host in another process
constexpr int kOtherHost = 2;
constexpr int32_t kPeerPid = 4242;

// Rank 0 of 3; `sameProcess`: rank 1 is a thread of this process instead.
struct Fixture {
  ncclComm comm;
  std::shared_ptr<RecordingBackend> backend = std::make_shared<RecordingBackend>();
  explicit Fixture(bool sameProcess = false) {
    comm.identity.rank = 0;
    comm.identity.nranks = 3;
    comm.identity.peers.resize(3);
    auto set = [&](int r, uint64_t host, uint64_t process, int32_t pid) {
      tutti::RankInfo& p = comm.identity.peers[size_t(r)];
      std::memset(&p, 0, sizeof p);
      p.hostHash = host;
      p.processToken = process;
      p.pid = pid;
      std::snprintf(p.hostname, sizeof p.hostname, "host-%d", int(host));
    };
    set(0, 1, 10, int32_t(getpid()));
    set(kOtherProcess, 1, sameProcess ? 10 : 11, kPeerPid);
    set(kOtherHost, 2, 12, 5151);
    comm.identity.peersKnown = true;
    comm.executor.backend = backend;
  }
};

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string text;
  char two[3];
  for (uint8_t b : bytes) {
    std::snprintf(two, sizeof two, "%02x", b);
    text += two;
  }
  return text;
}

std::vector<uint8_t> handleBytes(uint8_t seed) {
  std::vector<uint8_t> bytes(kern::ExportHandle::kBytes);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = uint8_t(seed + 7 * i);
  return bytes;
}

// A peer's map question, written out field by field as the header's protocol says: registration
// id, the asker's allocation number and size, the registration's offset and size in it, the
// owner's pid, then the handle (legacy path: server "-") and no descriptor tokens.
std::string mapQuestion(uint64_t id, uint64_t allocation, uint64_t allocationBytes, uint64_t offset, uint64_t bytes,
                        int pid, const std::string& handleHex) {
  return "tutti-map-buffer " + std::to_string(id) + " " + std::to_string(allocation) + " " +
         std::to_string(allocationBytes) + " " + std::to_string(offset) + " " + std::to_string(bytes) + " " +
         std::to_string(pid) + " - " + handleHex + " 0";
}

uint64_t mappedAt(const std::string& answer) {
  uint64_t address = 0;
  if (std::sscanf(answer.c_str(), "mapped %" SCNx64, &address) != 1) return 0;
  return address;
}

}  // namespace

TEST_CASE(
    "peer buffers: maps with a rank of this host in another process, given the parameter and a backend that exports") {
  Fixture f;
  PeerBuffers buffers(&f.comm);
  CHECK(buffers.active());
  CHECK(buffers.mapsWith(kOtherProcess));
  CHECK_FALSE(buffers.mapsWith(kOtherHost));
  CHECK_FALSE(buffers.mapsWith(0));
  CHECK(buffers.table() == nullptr);  // nothing published yet
}

TEST_CASE("peer buffers: without one of the three it maps nothing, and tells a peer that asks why") {
  struct Case {
    const char* what;
    bool parameter, exports, sameProcess;
    const char* reason;
  };
  const Case c = GENERATE(
      Case{"TUTTI_MAP_REGISTERED=0", false, true, false, "TUTTI_MAP_REGISTERED=0"},
      Case{"a backend that does not export", true, false, false, "its recording backend does not map"},
      Case{"every rank of this host in this process", true, true, true, "no rank of its host is in another process"});
  INFO(c.what);
  tutti_test::ScopedEnv parameter("TUTTI_MAP_REGISTERED", c.parameter ? "1" : "0");
  Fixture f(c.sameProcess);
  f.backend->exports = c.exports;
  PeerBuffers buffers(&f.comm);
  CHECK_FALSE(buffers.active());
  CHECK_FALSE(buffers.mapsWith(kOtherProcess));
  // A peer's question is answered with the reason, and nothing is imported.
  const std::string answer =
      buffers.answer(kOtherProcess, mapQuestion(1, 1, 4096, 0, 4096, kPeerPid, hex(handleBytes(1))));
  CHECK_THAT(answer, Catch::StartsWith("copy: ") && Catch::Contains(c.reason));
  CHECK(f.backend->imports.empty());
  // Publishing does nothing at all: not even an export.
  std::vector<char> buffer(4096);
  buffers.publish(buffer.data(), buffer.data(), buffer.size());
  CHECK(f.backend->exportCalls == 0);
  CHECK(buffers.table() == nullptr);
}

TEST_CASE("peer buffers: the questions it answers are its own two kinds only") {
  CHECK(PeerBuffers::isQuestion("tutti-map-buffer 1 2 3 4 5 6 - ab 0"));
  CHECK(PeerBuffers::isQuestion("tutti-unmap-buffer 3"));
  CHECK_FALSE(PeerBuffers::isQuestion("tutti-wait"));
  CHECK_FALSE(PeerBuffers::isQuestion("map-buffer tutti"));
  CHECK_FALSE(PeerBuffers::isQuestion(""));
}

TEST_CASE(
    "peer buffers: a peer's allocation is imported once for its registrations, and released with the last of them") {
  Fixture f;
  auto buffers = std::make_unique<PeerBuffers>(&f.comm);
  const std::vector<uint8_t> handleA = handleBytes(3), handleB = handleBytes(90);
  // Registrations 1 and 2 of the peer lie in its allocation 7 (1 MiB), at offsets 0 and 4096.
  const std::string a1 = buffers->answer(kOtherProcess, mapQuestion(1, 7, 1 << 20, 0, 4096, kPeerPid, hex(handleA)));
  const std::string a2 = buffers->answer(kOtherProcess, mapQuestion(2, 7, 1 << 20, 4096, 8192, kPeerPid, hex(handleA)));
  REQUIRE(f.backend->imports.size() == 1);
  const RecordingBackend::Import& import = f.backend->imports[0];
  CHECK(import.handle == handleA);  // the handle as the peer sent it, decoded from hex
  CHECK(import.bytes == size_t(1 << 20));
  CHECK(mappedAt(a1) == import.base);
  CHECK(mappedAt(a2) == import.base + 4096);
  // The same registration asked again (a retry) is answered alike and counted once.
  CHECK(mappedAt(buffers->answer(kOtherProcess, mapQuestion(2, 7, 1 << 20, 4096, 8192, kPeerPid, hex(handleA)))) ==
        import.base + 4096);
  // A new allocation number, or the same number with another size, is another allocation.
  const std::string b = buffers->answer(kOtherProcess, mapQuestion(3, 8, 1 << 16, 0, 64, kPeerPid, hex(handleB)));
  const std::string c = buffers->answer(kOtherProcess, mapQuestion(4, 7, 1 << 21, 0, 64, kPeerPid, hex(handleB)));
  REQUIRE(f.backend->imports.size() == 3);
  CHECK(f.backend->imports[1].handle == handleB);
  CHECK(mappedAt(b) == f.backend->imports[1].base);
  CHECK(mappedAt(c) == f.backend->imports[2].base);

  // Unmapped only by the rank that mapped it, and released with the allocation's last registration.
  CHECK(buffers->answer(kOtherHost, "tutti-unmap-buffer 1") == "not mapped");
  CHECK(buffers->answer(kOtherProcess, "tutti-unmap-buffer 1") == "unmapped");
  CHECK(f.backend->released.empty());
  CHECK(buffers->answer(kOtherProcess, "tutti-unmap-buffer 1") == "not mapped");
  CHECK(buffers->answer(kOtherProcess, "tutti-unmap-buffer 2") == "unmapped");
  REQUIRE(f.backend->released.size() == 1);
  CHECK(f.backend->released[0] == import.base);
  CHECK(buffers->answer(kOtherProcess, "tutti-unmap-buffer 99") == "not mapped");

  // What is still mapped goes with the communicator's PeerBuffers.
  buffers.reset();
  REQUIRE(f.backend->released.size() == 3);
  CHECK(
      ((f.backend->released[1] == f.backend->imports[1].base && f.backend->released[2] == f.backend->imports[2].base) ||
       (f.backend->released[2] == f.backend->imports[1].base && f.backend->released[1] == f.backend->imports[2].base)));
}

TEST_CASE("peer buffers: a map question it cannot serve is answered with why, and nothing is imported") {
  Fixture f;
  PeerBuffers buffers(&f.comm);
  const std::string goodHandle = hex(handleBytes(5));
  struct Case {
    const char* what;
    int asker;
    std::string question;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"malformed", kOtherProcess, "tutti-map-buffer 1 2 three", "copy: the question is malformed"},
      {"another host", kOtherHost, mapQuestion(1, 1, 4096, 0, 4096, 5151, goodHandle),
       "the peer is not a rank of this host in another process"},
      {"another process's pid", kOtherProcess, mapQuestion(1, 1, 4096, 0, 4096, 999, goodHandle),
       "names process 999, not the peer's"},
      {"past the allocation", kOtherProcess, mapQuestion(1, 1, 4096, 4000, 100, kPeerPid, goodHandle),
       "runs past its allocation"},
      {"malformed handle", kOtherProcess, mapQuestion(1, 1, 4096, 0, 4096, kPeerPid, "zz" + goodHandle.substr(2)),
       "the handle is malformed"},
      {"short handle", kOtherProcess, mapQuestion(1, 1, 4096, 0, 4096, kPeerPid, "abcd"), "the handle is malformed"},
      {"a descriptor offered to others only", kOtherProcess,
       "tutti-map-buffer 1 1 4096 0 4096 " + std::to_string(kPeerPid) + " some-server - 1 2 77",
       "no descriptor was offered to this rank"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string answer = buffers.answer(c.asker, c.question);
    CHECK_THAT(answer, Catch::StartsWith("copy: ") && Catch::Contains(c.reason));
  }
  CHECK(f.backend->imports.empty());
  // The backend's refusal is the answer's reason.
  f.backend->failImports = true;
  CHECK_THAT(buffers.answer(kOtherProcess, mapQuestion(1, 1, 4096, 0, 4096, kPeerPid, goodHandle)),
             Catch::StartsWith("copy: ") && Catch::Contains("the driver refused the handle") &&
                 Catch::Contains("mapping registered buffer 1 of rank 1 (host-1 pid 4242)"));
  // A refused mapping leaves nothing to unmap.
  CHECK(buffers.answer(kOtherProcess, "tutti-unmap-buffer 1") == "not mapped");
}

TEST_CASE("peer buffers: a registration that cannot be exported is copied, and leaves no table") {
  Fixture f;
  PeerBuffers buffers(&f.comm);
  REQUIRE(buffers.active());
  std::vector<char> buffer(4096);
  buffers.publish(buffer.data(), buffer.data(), buffer.size());  // the backend refuses to export it
  CHECK(f.backend->exportCalls == 1);
  CHECK(buffers.table() == nullptr);
  buffers.withdraw(buffer.data());  // nobody mapped it: nobody is asked
  buffers.withdraw(&f);             // never published: nothing to do
  CHECK(f.backend->released.empty());
}
