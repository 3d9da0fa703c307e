// Each backend against its traits: the registry's entry for a name is the one source of a
// backend's traits (the runtime reads them before any backend is made, so that the ranks agree at
// init), a backend made from the registry answers the same, and what the traits promise holds for
// the backend's own memory. A backend registered from outside takes the traits it was registered
// with, whatever its implementation would say.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/host/host_backend.h"

namespace {

using tutti::kern::BackendOptions;
using tutti::kern::BackendTraits;
using tutti::kern::ExecutorBackend;
using tutti::kern::MemorySpace;

void checkSameTraits(const BackendTraits& a, const BackendTraits& b) {
  CHECK(a.llBytes == b.llBytes);
  CHECK(a.mailboxes == b.mailboxes);
  CHECK(a.maxChannels == b.maxChannels);
  CHECK(a.bells == b.bells);
  CHECK(a.readsOtherProcesses == b.readsOtherProcesses);
  CHECK(a.readsDeviceScalars == b.readsDeviceScalars);
  CHECK(a.readsArenaAtRun == b.readsArenaAtRun);
}

// What the traits promise of the made backend, and its memory's round trips.
void checkBackendKeepsItsTraits(const std::string& name) {
  INFO("backend " << name);
  const BackendTraits before = tutti::kern::backendTraits(name);
  BackendOptions options;
  options.workers = 2;
  options.timeoutSeconds = 20;
  std::unique_ptr<ExecutorBackend> backend = tutti::kern::makeExecutorBackend(name, options, "backend traits test");
  REQUIRE(backend != nullptr);
  CHECK(std::string(backend->name()) == name);
  // One source: the registry's answer before the backend existed, the backend's, and the
  // registry's after.
  checkSameTraits(backend->traits(), before);
  checkSameTraits(tutti::kern::backendTraits(name), before);
  const BackendTraits& t = backend->traits();
  CHECK(backend->llBytes() == t.llBytes);
  CHECK(backend->runsMailboxes() == t.mailboxes);
  CHECK(backend->sleepsOnBells() == t.bells);
  CHECK(backend->readsOtherProcesses() == t.readsOtherProcesses);
  CHECK(backend->readsDeviceScalars() == t.readsDeviceScalars);
  CHECK(backend->readsArenaAtRun() == t.readsArenaAtRun);

  // What the traits promise: a cross-memory read and the mailboxes' host thread read user buffers
  // at host addresses; LL is the device executor's (fifo.h), whose waits poll rather than sleep on
  // bells, and its messages fit a slot of LL lines.
  if (t.readsOtherProcesses || t.mailboxes || t.readsArenaAtRun) CHECK(backend->memorySpace() == MemorySpace::Host);
  if (t.llBytes > 0) {
    CHECK_FALSE(t.bells);
    CHECK(t.llBytes <= tutti::kern::kDeviceLLBytes);
  }
  CHECK(t.maxChannels >= 1);
  CHECK(backend->workers() >= 1);

  // Its memory: zero-filled, copies and words round-trip, and host memory is readable in place.
  constexpr size_t kBytes = 4096;
  void* memory = backend->memory().allocate(kBytes, "the traits test's buffer");
  REQUIRE(memory != nullptr);
  std::vector<unsigned char> out(kBytes, 0xee), in(kBytes);
  backend->memory().copyOut(out.data(), memory, kBytes);
  CHECK(out == std::vector<unsigned char>(kBytes, 0));
  for (size_t i = 0; i < kBytes; i++) in[i] = static_cast<unsigned char>(i * 7 + 3);
  backend->memory().copyIn(memory, in.data(), kBytes);
  backend->memory().copyOut(out.data(), memory, kBytes);
  CHECK(out == in);
  if (backend->memorySpace() == MemorySpace::Host) CHECK(std::memcmp(memory, in.data(), kBytes) == 0);
  auto* word = static_cast<uint64_t*>(memory) + 8;
  backend->memory().storeWord(word, 0x0123456789abcdefull);
  CHECK(backend->memory().loadWord(word) == 0x0123456789abcdefull);
  backend->memory().release(memory);
}

}  // namespace

TEST_CASE("backend traits: the host backend keeps what its registry entry says", "[seams][traits]") {
  checkBackendKeepsItsTraits("host");
}

#if defined(TUTTI_HAVE_CUDA)
TEST_CASE("backend traits: the emulated device keeps what its registry entry says", "[seams][traits]") {
  checkBackendKeepsItsTraits("emulated");
}
#endif

TEST_CASE("backend traits: a registered backend takes its registered traits, and an unknown name the defaults",
          "[seams][traits]") {
  // The host executor's implementation under another name and other traits: what the runtime
  // reads is the registration, not what the implementation would answer.
  const BackendTraits registered{.llBytes = 0,
                                 .mailboxes = false,
                                 .maxChannels = 3,
                                 .bells = true,
                                 .readsOtherProcesses = false,
                                 .readsDeviceScalars = true};
  tutti::kern::registerBackend(tutti::kern::BackendRegistration{
      "traits-test",
      [](const BackendOptions& o, const std::string&) { return tutti::kern::host::makeHostBackend(o); },
      {},
      nullptr,
      nullptr,
      registered});
  checkSameTraits(tutti::kern::backendTraits("traits-test"), registered);
  std::unique_ptr<ExecutorBackend> made =
      tutti::kern::makeExecutorBackend("traits-test", BackendOptions{}, "backend traits test");
  REQUIRE(made != nullptr);
  checkSameTraits(made->traits(), registered);
  CHECK_FALSE(made->runsMailboxes());
  CHECK(made->traits().maxChannels == 3);

  checkSameTraits(tutti::kern::backendTraits("no-such-backend"), BackendTraits{});
}
