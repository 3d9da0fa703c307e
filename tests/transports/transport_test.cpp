// The transport interface, run over every transport: a pair of ranks in this process connects
// through offer / attach / complete and moves slots through the FIFO as executors do. Then the
// registry's choice per locality and variable, and FIFOs in memory the host may not touch.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "tests/common/env_support.h"
#include "tests/common/transport_context_support.h"
#include "transports/descriptor_channel.h"
#include "transports/registry.h"

namespace tutti::transport {
namespace {

constexpr transport::FifoShape kShape{4, 4096};

// Memory the host pretends not to reach: plain memory underneath, but every header write and read
// the transports make goes through copyIn / copyOut, which count. Host memory it is asked to map
// gets a second address of the same pages (as a GPU may use another address for mapped host
// memory), so a transport that handed the executor the host's address would be caught.
class FakeDeviceMemory final : public kern::DeviceMemory {
 public:
  const char* name() const override { return "fake-device"; }
  kern::MemorySpace memorySpace() const override { return kern::MemorySpace::Device; }
  void* allocate(size_t bytes, const std::string&) override {
    void* p = std::aligned_alloc(kern::kFifoSlotAlign,
                                 (bytes + kern::kFifoSlotAlign - 1) / kern::kFifoSlotAlign * kern::kFifoSlotAlign);
    std::memset(p, 0, bytes);
    std::lock_guard<std::mutex> lock(mutex);
    live++;
    return p;
  }
  void release(void* memory) override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      live--;
      if (auto found = shared.find(memory); found != shared.end()) {
        munmap(memory, found->second);
        shared.erase(found);
        return;
      }
    }
    std::free(memory);
  }
  // Exported as CUDA exports a GPU allocation: a descriptor (here a memfd) that another process
  // maps at an address of its own.
  bool exportsMemory() const override { return true; }
  // byHandle: the handle travels as bytes (a shared-memory object's name, as CUDA's legacy IPC
  // handle does), not as a descriptor.
  void* allocateExportable(size_t bytes, const std::string& what, kern::ExportHandle* handle) override {
    std::string name;
    int fd = -1;
    if (byHandle) {
      name = "/tutti-test-ipc-" + std::to_string(getpid()) + "-" + std::to_string(exported);
      fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      std::memcpy(handle->bytes, name.data(), name.size());
    } else {
      fd = memfd_create("fake-device", MFD_CLOEXEC);
    }
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, off_t(bytes)) == 0);
    void* p = mapShared(fd, bytes, what);
    if (byHandle) {
      close(fd);
      names.push_back(name);
    } else {
      handle->fd = fd;
    }
    std::lock_guard<std::mutex> lock(mutex);
    live++;
    exported++;
    return p;
  }
  void* importExported(const kern::ExportHandle& handle, size_t bytes, const std::string& what) override {
    int fd = handle.fd;
    if (fd < 0) fd = shm_open(reinterpret_cast<const char*>(handle.bytes), O_RDWR, 0);
    REQUIRE(fd >= 0);
    void* p = mapShared(fd, bytes, what);
    if (handle.fd < 0) close(fd);
    std::lock_guard<std::mutex> lock(mutex);
    imported++;
    return p;
  }
  void releaseImported(void* memory) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = shared.find(memory);
    REQUIRE(found != shared.end());
    munmap(memory, found->second);
    shared.erase(found);
    imported--;
  }
  void* mapShared(int fd, size_t bytes, const std::string& what) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) FAIL(what << ": mmap: " << std::strerror(errno));
    std::lock_guard<std::mutex> lock(mutex);
    shared[p] = bytes;
    return p;
  }
  void copyIn(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    copiesIn++;
  }
  void copyOut(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    copiesOut++;
  }
  // A counter the executor touches at the same time: one 8-byte copy each way, counted as such,
  // made atomic as the executor's own accesses are.
  uint64_t loadWord(const uint64_t* word) override {
    copiesOut++;
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
  }
  void storeWord(uint64_t* word, uint64_t value) override {
    copiesIn++;
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
  }
  // The copy engine's part (NCCL_P2P_USE_CUDA_MEMCPY).
  void copyAcross(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    copiesAcross++;
  }
  void* mapHostMemory(void* host, size_t bytes, const std::string& what) override {
    void* alias = mremap(host, 0, bytes, MREMAP_MAYMOVE);  // shared pages only, as the transports' are
    if (alias == MAP_FAILED) FAIL(what << ": mremap of " << bytes << " bytes: " << std::strerror(errno));
    std::lock_guard<std::mutex> lock(mutex);
    mapped[host] = {alias, bytes};
    return alias;
  }
  void unmapHostMemory(void* host) override {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = mapped.find(host);
    if (found == mapped.end()) {
      unmappedUnknown++;
      return;
    }
    munmap(found->second.first, found->second.second);
    mapped.erase(found);
  }
  bool isMapping(const void* p) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [host, alias] : mapped)
      if (alias.first == p) return true;
    return false;
  }
  std::mutex mutex;
  int live = 0;
  std::unordered_map<void*, std::pair<void*, size_t>> mapped;  // host -> its second address
  std::unordered_map<void*, size_t> shared;                    // exported and imported mappings
  int exported = 0, imported = 0;
  bool byHandle = false;
  std::vector<std::string> names;  // shared-memory objects made for handles
  ~FakeDeviceMemory() {
    for (const std::string& name : names) shm_unlink(name.c_str());
  }
  int unmappedUnknown = 0;
  std::atomic<int> copiesIn{0}, copiesOut{0}, copiesAcross{0};
};

transport::Transport& byName(std::vector<std::unique_ptr<transport::Transport>>& transports, const std::string& name) {
  for (auto& t : transports)
    if (t->name().rfind(name, 0) == 0) return *t;
  FAIL("no transport named " << name);
  throw;
}

// A connection to `peer` as setup asks for it; the peer's worker bells are `peerBells`.
transport::ConnectionRequest requestTo(int peer, const std::string& description, kern::Bell* peerBells,
                                       kern::Bell* workerBell = nullptr) {
  transport::ConnectionRequest r;
  r.peer = peer;
  r.channel = 0;
  r.description = description;
  r.workerBell = workerBell;
  r.peerBells = peerBells;
  return r;
}

// Rank 0 sends to rank 1 through one transport, each rank with its own context, transports,
// worker bells and control-block bells, as two communicators of one job would.
struct TransportPair {
  tutti_test::TestTransportContext contexts[2];
  kern::Bell bells[2][2];  // [rank][worker]: each rank's control block, which outlives its proxy
  std::vector<std::unique_ptr<transport::Transport>> transports[2];
  std::unique_ptr<transport::Connection> send, recv;

  // `peers`: the pair as canConnect would see it, for the modes that depend on it (read mode).
  TransportPair(const std::string& name, std::shared_ptr<kern::DeviceMemory> memory = transport::hostFifoMemory(),
                transport::PeerPair peers = {})
      : contexts{{0, 2, kShape, memory}, {1, 2, kShape, memory}}, peers_(peers) {
    for (int r = 0; r < 2; r++) transports[r] = transport::makeTransports(contexts[r]);
    transport::Transport& sender = byName(transports[0], name);
    transport::Transport& receiver = byName(transports[1], name);
    receiver.open();
    sender.open();
    transport::ConnectionOffer offer{};
    auto receiving = receiver.offer(request(1, 0), &offer);
    auto sending = sender.attach(request(0, 1), offer, deadlineAfter(10));
    // The steps, interleaved, as connection setup polls them.
    waitUntil(
        [&] {
          if (!send) send = sending->poll(deadlineAfter(10));
          if (!recv) recv = receiving->poll(deadlineAfter(10));
          return send && recv;
        },
        "the connection's attach and complete");
  }

  transport::ConnectionRequest request(int rank, int peer) {
    transport::ConnectionRequest r =
        requestTo(peer, "test connection of rank " + std::to_string(rank), bells[peer], &bells[rank][0]);
    r.pair = peers_;
    return r;
  }
  transport::PeerPair peers_;

  // Rank 0 writes slot n and publishes it; rank 1 waits for it (at most 10 s), checks and frees
  // it; rank 0 waits until it is free again.
  void move(uint64_t n) {
    kern::FifoHeader* out = send->fifo();
    kern::FifoHeader* in = recv->fifo();
    auto* slot = reinterpret_cast<unsigned char*>(kern::fifoSlot(out, send->simpleSlots(), n));
    std::memset(slot, int(n & 0xff), 100 + size_t(n));
    out->sizes[n % out->nsteps] = 100 + n;
    kern::fifoStoreRelease(&out->head, n + 1);
    if (kern::Bell* bell = send->bellFor(0)) kern::ringBell(bell);
    waitUntil([&] { return kern::fifoLoadAcquire(&in->head) > n; }, "slot " + std::to_string(n) + " to arrive");
    REQUIRE(in->sizes[n % in->nsteps] == 100 + n);
    const auto* got = reinterpret_cast<const unsigned char*>(kern::fifoSlot(in, recv->simpleSlots(), n));
    for (size_t i = 0; i < 100 + n; i++) REQUIRE(got[i] == (n & 0xff));
    kern::fifoStoreRelease(&in->tail, n + 1);
    if (kern::Bell* bell = recv->bellFor(0)) kern::ringBell(bell);
    waitUntil([&] { return kern::fifoLoadAcquire(&out->tail) > n; }, "slot " + std::to_string(n) + " to be freed");
  }

  template <typename Condition>
  static void waitUntil(Condition done, const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) FAIL("waited 10 s for " << what);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

TEST_CASE("transport: every transport connects a pair and moves slots through its FIFO", "[transport]") {
  for (const char* name : {"local", "shm", "net"}) {
    SECTION(name) {
      TransportPair pair(name);
      CHECK(pair.send->transport().rfind(name, 0) == 0);
      CHECK(pair.recv->transport() == pair.send->transport());
      for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
      // Memory transports wake the peer's worker; the network's, its proxy.
      if (std::string(name) == "net") {
        CHECK(pair.send->bellFor(1) == pair.send->bellFor(0));
        CHECK(byName(pair.transports[0], "net").proxy() != nullptr);
      } else {
        CHECK(pair.send->bellFor(1) == &pair.bells[1][1]);
        CHECK(pair.recv->bellFor(0) == &pair.bells[0][0]);
      }
      CHECK_FALSE(pair.contexts[0].failed());
      CHECK_FALSE(pair.contexts[1].failed());
    }
  }
}

TEST_CASE("transport: the registry picks the nearest transport each locality and variable allow", "[transport]") {
  tutti_test::TestTransportContext context(0, 2, kShape);
  auto transports = transport::makeTransports(context);
  auto chosen = [&](transport::Locality locality) {
    std::string whyNot;
    transport::Transport* t = transport::chooseTransport(transports, locality, &whyNot);
    return t != nullptr ? t->name() : "none: " + whyNot;
  };
  CHECK(chosen(transport::Locality::SameProcess) == "local");
  CHECK(chosen(transport::Locality::SameHost) == "shm");
  CHECK(chosen(transport::Locality::OtherHost) == "net");
  {
    tutti_test::ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
    CHECK(chosen(transport::Locality::SameProcess) == "shm");
    tutti_test::ScopedEnv shm("NCCL_SHM_DISABLE", "1");
    CHECK(chosen(transport::Locality::SameProcess) == "net");
    CHECK(chosen(transport::Locality::SameHost) == "net");
  }
}

TEST_CASE("transport: FIFOs the host cannot touch connect at every locality, as host memory FIFOs do", "[transport]") {
  auto memory = std::make_shared<FakeDeviceMemory>();
  tutti_test::TestTransportContext context(0, 2, kShape, memory);
  auto transports = transport::makeTransports(context);
  std::string whyNot;
  auto chosen = [&](transport::Locality locality) {
    transport::Transport* t = transport::chooseTransport(transports, locality, &whyNot);
    return t != nullptr ? t->name() : "none";
  };
  CHECK(chosen(transport::Locality::SameProcess) == "local");
  CHECK(chosen(transport::Locality::SameHost) == "p2p");  // memory the peer process maps
  CHECK(chosen(transport::Locality::OtherHost) == "net");
  {
    tutti_test::ScopedEnv level("NCCL_P2P_LEVEL", "LOC");
    CHECK(chosen(transport::Locality::SameHost) == "shm");
  }
  tutti_test::ScopedEnv p2p("NCCL_P2P_DISABLE", "1");
  CHECK(chosen(transport::Locality::SameProcess) == "shm");
  CHECK(chosen(transport::Locality::SameHost) == "shm");
  tutti_test::ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  CHECK(chosen(transport::Locality::SameProcess) == "net");
  CHECK(chosen(transport::Locality::SameHost) == "net");
}

TEST_CASE("transport: shm and net FIFOs for memory the host cannot touch stay host memory, mapped for the executor",
          "[transport]") {
  for (const char* name : {"shm", "net"}) {
    SECTION(name) {
      auto memory = std::make_shared<FakeDeviceMemory>();
      {
        TransportPair pair(name, memory);
        // The executor's addresses are the mappings, not the host's own: every slot below is
        // written and read through them, and arrives.
        CHECK(memory->isMapping(pair.send->fifo()));
        CHECK(memory->isMapping(pair.recv->fifo()));
        CHECK(memory->mapped.size() == 2);
        CHECK(pair.recv->fifo()->magic == kern::kFifoMagic);
        for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
        // Nothing of the device's own memory was needed: no allocation, no copies.
        CHECK(memory->live == 0);
        CHECK(memory->copiesIn.load() == 0);
        CHECK(memory->copiesOut.load() == 0);
        if (std::string(name) == "shm") {  // a proxy's FIFOs go with the proxy
          pair.send.reset();
          CHECK(memory->mapped.size() == 1);
        }
      }
      // Every mapping ended with its connection, and none was ended twice or unknown.
      CHECK(memory->mapped.empty());
      CHECK(memory->unmappedUnknown == 0);
    }
  }
}

TEST_CASE("transport: a local FIFO in memory the host cannot touch is set up by copies, the handshake kept apart",
          "[transport]") {
  auto memory = std::make_shared<FakeDeviceMemory>();
  {
    TransportPair pair("local", memory);
    // The receiver wrote the header by one copy in; the sender checked it by one copy out.
    CHECK(memory->copiesIn.load() == 1);
    CHECK(memory->copiesOut.load() == 1);
    CHECK(pair.send->fifo() == pair.recv->fifo());
    CHECK(pair.recv->fifo()->magic == kern::kFifoMagic);
    // "The sender attached" is not in the FIFO, where a host could not read it.
    CHECK(pair.recv->fifo()->attached == 0);
    CHECK(memory->live == 1);
    pair.recv.reset();  // either side may go first: the FIFO stays while the other holds it
    CHECK(memory->live == 1);
  }
  CHECK(memory->live == 0);
}

TEST_CASE(
    "transport: p2p hands the receiver's exported FIFO to the sender by descriptor or handle, and each end releases "
    "its own",
    "[transport]") {
  auto memory = std::make_shared<FakeDeviceMemory>();
  memory->byHandle = GENERATE(false, true);
  INFO((memory->byHandle ? "handle bytes in the offer" : "descriptor over a Unix socket"));
  {
    TransportPair pair("p2p", memory);
    CHECK(pair.send->transport() == "p2p");
    // One allocation, exported by the receiver and mapped again by the sender at another address:
    // the slots below go through the two mappings of the same pages.
    CHECK(memory->exported == 1);
    CHECK(memory->imported == 1);
    CHECK(pair.send->fifo() != pair.recv->fifo());
    for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
    CHECK(pair.send->bellFor(1) == &pair.bells[1][1]);
    pair.send.reset();
    CHECK(memory->imported == 0);
    CHECK(memory->live == 1);
  }
  CHECK(memory->live == 0);
  CHECK(memory->shared.empty());
}

TEST_CASE(
    "transport: p2p read mode: the Simple slots in the sender's exported memory, which the receiver maps, by "
    "descriptor or handle",
    "[transport][p2p]") {
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", "1");
  auto memory = std::make_shared<FakeDeviceMemory>();
  memory->byHandle = GENERATE(false, true);
  INFO((memory->byHandle ? "handle bytes" : "descriptors over a Unix socket"));
  {
    TransportPair pair("p2p", memory);
    // The receiver's FIFO (header and LL slots only) and the sender's slots, each exported by its
    // owner and mapped by the other end at an address of its own.
    CHECK(memory->exported == 2);
    CHECK(memory->imported == 2);
    CHECK(pair.recv->fifo()->slotOffset == 0);
    REQUIRE(pair.send->simpleSlots() != nullptr);
    REQUIRE(pair.recv->simpleSlots() != nullptr);
    CHECK(pair.send->simpleSlots() != pair.recv->simpleSlots());
    // What the sender writes into its own slots, the receiver reads through its mapping of them.
    for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
    pair.send.reset();  // the sender frees its slots and unmaps the FIFO; the receiver's mappings stay
    CHECK(memory->imported == 1);
    CHECK(memory->live == 1);
  }
  CHECK(memory->live == 0);
  CHECK(memory->shared.empty());
}

TEST_CASE(
    "transport: p2p copy mode: the sender writes a staging FIFO, the copy thread carries each slot to the receiver's",
    "[transport][p2p]") {
  tutti_test::ScopedEnv memcpy("NCCL_P2P_USE_CUDA_MEMCPY", "1");
  auto memory = std::make_shared<FakeDeviceMemory>();
  memory->byHandle = GENERATE(false, true);
  INFO((memory->byHandle ? "handle bytes" : "descriptors over a Unix socket"));
  {
    TransportPair pair("p2p", memory);
    // The receiver's FIFO, exported and mapped by the sender; the sender's staging FIFO, its own.
    CHECK(memory->exported == 1);
    CHECK(memory->imported == 1);
    CHECK(memory->live == 2);
    CHECK(pair.send->fifo() != pair.recv->fifo());
    CHECK(pair.send->simpleSlots() == nullptr);
    CHECK(pair.recv->simpleSlots() == nullptr);
    for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
    CHECK(pair.send->copiedByEngine() == 3 * kShape.nsteps);
    CHECK(pair.recv->copiedByEngine() == 0);
    CHECK(memory->copiesAcross >= int(3 * kShape.nsteps));
    pair.send.reset();  // the staging FIFO freed, the receiver's unmapped
    CHECK(memory->imported == 0);
    CHECK(memory->live == 1);
  }
  CHECK(memory->live == 0);
  CHECK(memory->shared.empty());
}

TEST_CASE(
    "transport: local read mode: rank threads on GPUs NVLink apart hand the sender's Simple slots over in the process",
    "[transport][p2p]") {
  tutti_test::ScopedEnv read("NCCL_P2P_READ_ENABLE", GENERATE(as<const char*>(), "1", "0"));
  const bool reads = std::string(std::getenv("NCCL_P2P_READ_ENABLE")) == "1";
  INFO("NCCL_P2P_READ_ENABLE=" << (reads ? "1" : "0"));
  auto memory = std::make_shared<FakeDeviceMemory>();
  transport::PeerPair peers;
  peers.locality = transport::Locality::SameProcess;
  peers.ranks[0] = 0;
  peers.ranks[1] = 1;
  peers.gpus.known = true;
  peers.gpus.path = topo::PathType::NVL;
  {
    TransportPair pair("local", memory, peers);
    CHECK(pair.send->transport() == "local");
    CHECK(memory->live == (reads ? 2 : 1));  // the FIFO, and in read mode the sender's slots
    CHECK((pair.recv->fifo()->slotOffset == 0) == reads);
    CHECK((pair.recv->simpleSlots() != nullptr) == reads);
    // One address space: both ends reach the same slots.
    CHECK(pair.send->simpleSlots() == pair.recv->simpleSlots());
    for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
  }
  CHECK(memory->live == 0);
}

TEST_CASE("transport: local copy mode: rank threads on GPUs write a staging FIFO, the copy thread fills the receiver's",
          "[transport][p2p]") {
  tutti_test::ScopedEnv memcpy("NCCL_P2P_USE_CUDA_MEMCPY", "1");
  auto memory = std::make_shared<FakeDeviceMemory>();
  transport::PeerPair peers;
  peers.locality = transport::Locality::SameProcess;
  peers.ranks[1] = 1;
  peers.ranks[0] = 0;
  peers.gpus.known = true;
  peers.gpus.path = topo::PathType::NVL;
  {
    TransportPair pair("local", memory, peers);
    CHECK(memory->live == 2);  // the receiver's FIFO and the sender's staging FIFO
    CHECK(pair.send->fifo() != pair.recv->fifo());
    // The executor's stores no longer reach the receiver, so neither may addresses.
    CHECK(!pair.send->sharesAddressSpace());
    CHECK(!pair.recv->sharesAddressSpace());
    for (uint64_t n = 0; n < 3 * kShape.nsteps; n++) pair.move(n);
    CHECK(pair.send->copiedByEngine() == 3 * kShape.nsteps);
  }
  CHECK(memory->live == 0);
}

TEST_CASE("transport: a p2p offer is refused to a process it was not made for, and to a second taker",
          "[transport][faults]") {
  transport::DescriptorServer server("test server");
  const int fd = memfd_create("offered", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  const uint64_t forOther = server.offer(fd, getpid() + 1);
  std::atomic<bool> abort{false};
  try {
    takeDescriptor(server.name(), getpid(), forOther, deadlineAfter(5), &abort, "taking another's handle");
    FAIL("a handle offered to another pid was handed over");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("refused FIFO handle") != std::string::npos);
  }
  const uint64_t forUs = server.offer(fd, getpid());
  close(fd);
  {
    transport::TakenDescriptor taken =
        takeDescriptor(server.name(), getpid(), forUs, deadlineAfter(5), &abort, "taking our handle");
    CHECK(taken.fd() >= 0);
    taken.confirm();
  }
  TransportPair::waitUntil([&] { return server.state(forUs) == transport::DescriptorServer::State::Confirmed; },
                           "the confirmation");
  CHECK_THROWS_WITH(takeDescriptor(server.name(), getpid(), forUs, deadlineAfter(5), &abort, "taking it twice"),
                    Catch::Contains("refused FIFO handle"));
  // A server of another pid than the peer's is not trusted.
  CHECK_THROWS_WITH(takeDescriptor(server.name(), getpid() + 1, forUs, deadlineAfter(5), &abort, "asking an impostor"),
                    Catch::Contains("belongs to process"));
  // A taker that hangs up before it confirms is reported to the offerer.
  const int other = memfd_create("unconfirmed", MFD_CLOEXEC);
  const uint64_t unconfirmed = server.offer(other, getpid());
  close(other);
  {
    transport::TakenDescriptor dropped =
        takeDescriptor(server.name(), getpid(), unconfirmed, deadlineAfter(5), &abort, "dropping it");
  }
  TransportPair::waitUntil([&] { return server.state(unconfirmed) == transport::DescriptorServer::State::Refused; },
                           "the refusal");
  CHECK(server.refusal(unconfirmed).find("hung up") != std::string::npos);
}

TEST_CASE("transport: a receiver's step returns at once while its sender has not attached", "[transport][faults]") {
  for (const char* name : {"local", "shm", "net"}) {
    SECTION(name) {
      tutti_test::TestTransportContext context(1, 2, kShape);
      auto transports = transport::makeTransports(context);
      kern::Bell bells[2];
      transport::ConnectionOffer offer{};
      auto pending = byName(transports, name).offer(requestTo(0, "test connection", bells), &offer);
      // Setup polls every connection in one loop: a step that waited for its peer would hold up
      // the others, among them the one the peer waits for.
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 3; i++) CHECK(pending->poll(deadlineAfter(10)) == nullptr);
      CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    }
  }
}

TEST_CASE("transport: a local offer whose receiver is gone cannot be attached", "[transport][faults]") {
  tutti_test::TestTransportContext receiver(1, 2, kShape), sender(0, 2, kShape);
  auto receiving = transport::makeTransports(receiver), sending = transport::makeTransports(sender);
  kern::Bell bells[2];
  transport::ConnectionOffer offer{};
  byName(receiving, "local").offer(requestTo(0, "connection from rank 0 to rank 1", bells), &offer).reset();
  try {
    byName(sending, "local").attach(requestTo(1, "connection from rank 0 to rank 1", bells), offer, deadlineAfter(1));
    FAIL("attached to a FIFO whose receiver is gone");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Remote);
    CHECK(std::string(e.what()).find("FIFO of the connection from rank 0 to rank 1: in-process segment") == 0);
    CHECK(std::string(e.what()).find("is gone") != std::string::npos);
  }
}

}  // namespace
}  // namespace tutti::transport
