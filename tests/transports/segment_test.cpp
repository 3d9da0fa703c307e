// Tests of shared segments: in-process hand-over, POSIX shm across fork(), cleanup of names, errors.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/host_identity.h"
#include "transports/segment.h"

using tutti::Error;
using tutti::ErrorCode;
using tutti::transport::Segment;
using tutti::transport::SegmentDescriptor;

namespace {

// The error a call throws; fails the test when it throws nothing.
std::optional<Error> errorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  FAIL_CHECK("no tutti::Error was thrown");
  return std::nullopt;
}

// Whether a POSIX shm name exists, asked the way the library asks (not by listing /dev/shm).
bool shmNameExists(const char* name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  REQUIRE(errno == ENOENT);
  return false;
}

uint8_t patternByte(size_t i, uint8_t seed) { return static_cast<uint8_t>(i * 31 + seed + (i >> 12)); }

void writePattern(void* base, size_t bytes, uint8_t seed) {
  auto* p = static_cast<uint8_t*>(base);
  for (size_t i = 0; i < bytes; ++i) p[i] = patternByte(i, seed);
}

bool hasPattern(const void* base, size_t bytes, uint8_t seed) {
  const auto* p = static_cast<const uint8_t*>(base);
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != patternByte(i, seed)) return false;
  return true;
}

bool isZero(const void* base, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(base);
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != 0) return false;
  return true;
}

// A pipe whose reads wait at most a few seconds, so a dead peer fails the test instead of hanging it.
class Pipe {
 public:
  Pipe() { REQUIRE(pipe(fds_) == 0); }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  void closeRead() {
    if (fds_[0] >= 0) close(std::exchange(fds_[0], -1));
  }
  void closeWrite() {
    if (fds_[1] >= 0) close(std::exchange(fds_[1], -1));
  }
  bool write(const void* data, size_t bytes) { return ::write(fds_[1], data, bytes) == static_cast<ssize_t>(bytes); }
  // True when all `bytes` arrived before the deadline.
  bool read(void* data, size_t bytes, int timeoutMs = 20000) {
    auto* out = static_cast<char*>(data);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (bytes > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd poller{fds_[0], POLLIN, 0};
      if (poll(&poller, 1, static_cast<int>(left.count())) <= 0) continue;
      ssize_t got = ::read(fds_[0], out, bytes);
      if (got <= 0) return false;
      out += got;
      bytes -= static_cast<size_t>(got);
    }
    return true;
  }

 private:
  int fds_[2] = {-1, -1};
};

// Runs `body` in a fork()ed child; its return value is the child's exit status. Exceptions
// become status 100 (none may leave the child).
pid_t forkChild(const std::function<int()>& body) {
  std::fflush(stdout);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 100;
    try {
      status = body();
    } catch (...) {
    }
    _exit(status);
  }
  return child;
}

// The child's exit status; kills it if it does not end within 20 s.
int waitChild(pid_t child) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("segment: in-process create and attach share zeroed, aligned memory, either side may go first", "[segment]") {
  for (bool creatorGoesFirst : {true, false}) {
    INFO("creator destroyed first: " << creatorGoesFirst);
    constexpr size_t kBytes = 3 * 4096 + 100;
    SegmentDescriptor descriptor;
    std::memset(&descriptor, 0xab, sizeof descriptor);
    std::unique_ptr<Segment> creator = tutti::transport::createSegment(kBytes, true, &descriptor, "test");
    CHECK(descriptor.kind == 2);
    CHECK(descriptor.bytes == kBytes);
    CHECK(descriptor.ownerPid == uint64_t(getpid()));
    CHECK(descriptor.flags == 0);
    CHECK(descriptor.name[0] == '\0');
    REQUIRE(creator->bytes() == kBytes);
    CHECK(reinterpret_cast<uintptr_t>(creator->base()) % 4096 == 0);
    CHECK(isZero(creator->base(), kBytes));

    std::unique_ptr<Segment> attacher = tutti::transport::attachSegment(descriptor, "test attach");
    REQUIRE(attacher->bytes() == kBytes);
    CHECK(attacher->base() == creator->base());
    writePattern(creator->base(), kBytes, 1);
    CHECK(hasPattern(attacher->base(), kBytes, 1));

    // The memory stays valid for whichever side remains.
    std::unique_ptr<Segment>& survivor = creatorGoesFirst ? attacher : creator;
    (creatorGoesFirst ? creator : attacher).reset();
    writePattern(survivor->base(), kBytes, 2);
    CHECK(hasPattern(survivor->base(), kBytes, 2));

    // Single attach: the entry left the table when it was attached.
    auto again = errorOf([&] { tutti::transport::attachSegment(descriptor, "second attach"); });
    REQUIRE(again);
    CHECK(again->code() == ErrorCode::Remote);
    CHECK(again->message().starts_with("second attach: in-process segment "));
  }
}

TEST_CASE("segment: an in-process segment that nobody attached is gone once sealed or destroyed", "[segment]") {
  SegmentDescriptor sealedDescriptor{}, destroyedDescriptor{};
  auto sealed = tutti::transport::createSegment(64, true, &sealedDescriptor, "test");
  sealed->seal();
  sealed->seal();  // idempotent
  CHECK(errorOf([&] { tutti::transport::attachSegment(sealedDescriptor, "test"); })->code() == ErrorCode::Remote);
  std::memset(sealed->base(), 7, 64);  // still the creator's memory

  tutti::transport::createSegment(64, true, &destroyedDescriptor, "test").reset();
  CHECK(errorOf([&] { tutti::transport::attachSegment(destroyedDescriptor, "test"); })->code() == ErrorCode::Remote);
}

TEST_CASE("segment: a multi-attach in-process segment serves every attacher until sealed", "[segment]") {
  SegmentDescriptor descriptor{};
  auto creator =
      tutti::transport::createSegment(4096, true, &descriptor, "control block", tutti::transport::kSegmentMultiAttach);
  CHECK(descriptor.flags == tutti::transport::kSegmentMultiAttach);
  std::vector<std::unique_ptr<Segment>> attachers;
  for (int i = 0; i < 3; ++i) attachers.push_back(tutti::transport::attachSegment(descriptor, "peer"));
  writePattern(creator->base(), 4096, 9);
  for (auto& attacher : attachers) CHECK(hasPattern(attacher->base(), 4096, 9));
  creator->seal();
  CHECK(errorOf([&] { tutti::transport::attachSegment(descriptor, "late peer"); })->code() == ErrorCode::Remote);
  creator.reset();
  for (auto& attacher : attachers) CHECK(hasPattern(attacher->base(), 4096, 9));
}

TEST_CASE("segment: POSIX shm created here, attached by a forked child", "[segment]") {
  constexpr size_t kBytes = (1 << 20) + 123;
  SegmentDescriptor descriptor{};
  auto creator = tutti::transport::createSegment(kBytes, false, &descriptor, "test");
  CHECK(descriptor.kind == 1);
  CHECK(descriptor.bytes == kBytes);
  CHECK(std::string(descriptor.name).starts_with("/tutti-" + std::to_string(getpid()) + "-"));
  CHECK(shmNameExists(descriptor.name));
  CHECK(isZero(creator->base(), kBytes));
  writePattern(creator->base(), kBytes / 2, 3);

  Pipe done;
  pid_t child = forkChild([&] {
    auto attached = tutti::transport::attachSegment(descriptor, "child attach");
    if (attached->bytes() != kBytes) return 1;
    if (!hasPattern(attached->base(), kBytes / 2, 3)) return 2;
    // Both sides have mapped it: the name must be gone already.
    if (shm_open(descriptor.name, O_RDONLY, 0) >= 0 || errno != ENOENT) return 3;
    writePattern(static_cast<char*>(attached->base()) + kBytes / 2, kBytes - kBytes / 2, 4);
    char ok = 'k';
    return done.write(&ok, 1) ? 0 : 4;
  });
  char signal = 0;
  bool signalled = done.read(&signal, 1);
  CHECK(waitChild(child) == 0);
  REQUIRE(signalled);
  CHECK(hasPattern(static_cast<char*>(creator->base()) + kBytes / 2, kBytes - kBytes / 2, 4));
  CHECK_FALSE(shmNameExists(descriptor.name));
}

TEST_CASE("segment: POSIX shm created by a forked child, attached here, process tokens differ", "[segment]") {
  constexpr size_t kBytes = 64 * 1024;
  struct Message {
    SegmentDescriptor descriptor;
    uint64_t processToken;
  };
  uint64_t parentToken = tutti::processToken();
  CHECK(tutti::processToken() == parentToken);
  Pipe toParent, toChild;
  pid_t child = forkChild([&] {
    Message message{};
    auto created = tutti::transport::createSegment(kBytes, false, &message.descriptor, "child create");
    writePattern(created->base(), kBytes, 5);
    message.processToken = tutti::processToken();
    if (!toParent.write(&message, sizeof message)) return 1;
    char attached = 0;
    if (!toChild.read(&attached, 1)) return 2;
    return hasPattern(created->base(), kBytes, 6) ? 0 : 3;  // the parent's answer
  });
  Message message{};
  bool received = toParent.read(&message, sizeof message);
  if (received) {
    CHECK(message.processToken != parentToken);
    CHECK(message.descriptor.ownerPid == uint64_t(child));
    auto attached = tutti::transport::attachSegment(message.descriptor, "parent attach");
    CHECK(hasPattern(attached->base(), kBytes, 5));
    CHECK_FALSE(shmNameExists(message.descriptor.name));
    writePattern(attached->base(), kBytes, 6);
    char ok = 'k';
    toChild.write(&ok, 1);
    CHECK(waitChild(child) == 0);
    // The mapping outlives the process that created it.
    CHECK(hasPattern(attached->base(), kBytes, 6));
  } else {
    waitChild(child);
    FAIL("the child sent no descriptor");
  }
}

TEST_CASE("segment: shm names never outlive their creator, seal unlinks early", "[segment]") {
  SegmentDescriptor descriptor{};
  auto creator = tutti::transport::createSegment(8192, false, &descriptor, "test");
  REQUIRE(shmNameExists(descriptor.name));
  creator.reset();  // nobody attached
  CHECK_FALSE(shmNameExists(descriptor.name));

  SegmentDescriptor sealedDescriptor{};
  auto sealed = tutti::transport::createSegment(8192, false, &sealedDescriptor, "test");
  sealed->seal();
  CHECK_FALSE(shmNameExists(sealedDescriptor.name));
  writePattern(sealed->base(), 8192, 8);  // the mapping stays
  CHECK(hasPattern(sealed->base(), 8192, 8));
  auto late = errorOf([&] { tutti::transport::attachSegment(sealedDescriptor, "late attach"); });
  REQUIRE(late);
  CHECK(late->code() == ErrorCode::System);
  CHECK(late->message().starts_with(std::string("late attach: shm_open ") + sealedDescriptor.name + ": "));
}

TEST_CASE("segment: a multi-attach shm segment keeps its name until sealed", "[segment]") {
  SegmentDescriptor descriptor{};
  auto creator =
      tutti::transport::createSegment(4096, false, &descriptor, "control block", tutti::transport::kSegmentMultiAttach);
  auto first = tutti::transport::attachSegment(descriptor, "peer 1");
  auto second = tutti::transport::attachSegment(descriptor, "peer 2");
  CHECK(shmNameExists(descriptor.name));
  writePattern(first->base(), 4096, 11);
  CHECK(hasPattern(second->base(), 4096, 11));
  CHECK(hasPattern(creator->base(), 4096, 11));
  creator->seal();
  CHECK_FALSE(shmNameExists(descriptor.name));
}

TEST_CASE("segment: attaching with a wrong name, size or kind fails with context", "[segment]") {
  SegmentDescriptor good{};
  auto creator = tutti::transport::createSegment(8192, false, &good, "test");

  SegmentDescriptor missing = good;
  std::snprintf(missing.name, sizeof missing.name, "/tutti-0-0-doesnotexist");
  auto missingError = errorOf([&] { tutti::transport::attachSegment(missing, "rank 1 attaching rank 0's FIFO"); });
  REQUIRE(missingError);
  CHECK(missingError->code() == ErrorCode::System);
  CHECK(missingError->message() ==
        "rank 1 attaching rank 0's FIFO: shm_open /tutti-0-0-doesnotexist: No such file or directory (errno 2)");

  SegmentDescriptor wrongSize = good;
  wrongSize.bytes = 4096;
  auto sizeError = errorOf([&] { tutti::transport::attachSegment(wrongSize, "ctx"); });
  REQUIRE(sizeError);
  CHECK(sizeError->code() == ErrorCode::Remote);
  CHECK(sizeError->message() == "ctx: " + std::string(good.name) + " has 8192 bytes, the peer's descriptor says 4096");
  CHECK(shmNameExists(good.name));  // a failed attach leaves the segment for the right peer

  SegmentDescriptor foreign = good;
  std::snprintf(foreign.name, sizeof foreign.name, "/../etc/passwd");
  CHECK(errorOf([&] { tutti::transport::attachSegment(foreign, "ctx"); })->code() == ErrorCode::Remote);
  SegmentDescriptor unterminated = good;
  std::memset(unterminated.name, 'a', sizeof unterminated.name);
  CHECK(errorOf([&] { tutti::transport::attachSegment(unterminated, "ctx"); })->code() == ErrorCode::Remote);
  SegmentDescriptor unknownKind = good;
  unknownKind.kind = 7;
  CHECK(errorOf([&] { tutti::transport::attachSegment(unknownKind, "ctx"); })->message() ==
        "ctx: the peer's segment descriptor has unknown kind 7");

  auto attached = tutti::transport::attachSegment(good, "right peer");
  CHECK(attached->bytes() == 8192);

  SegmentDescriptor inProcess{};
  auto local = tutti::transport::createSegment(4096, true, &inProcess, "test");
  SegmentDescriptor otherProcess = inProcess;
  otherProcess.ownerPid += 1;
  CHECK(errorOf([&] { tutti::transport::attachSegment(otherProcess, "ctx"); })->code() == ErrorCode::Internal);
  SegmentDescriptor wrongLocalSize = inProcess;
  wrongLocalSize.bytes = 100;
  CHECK(errorOf([&] { tutti::transport::attachSegment(wrongLocalSize, "ctx"); })->code() == ErrorCode::Remote);

  SegmentDescriptor ignored{};
  CHECK(errorOf([&] { tutti::transport::createSegment(0, false, &ignored, "ctx"); })->code() == ErrorCode::Internal);
}

TEST_CASE("segment: too little free space in /dev/shm is an error with the remedy", "[segment]") {
  CHECK_NOTHROW(tutti::transport::checkShmFreeSpace(4096, 4096, "ctx"));
  CHECK_NOTHROW(tutti::transport::checkShmFreeSpace(uint64_t(1) << 40, 4096, "ctx"));
  auto error =
      errorOf([] { tutti::transport::checkShmFreeSpace(1000, 4194304, "FIFO of rank 0 <- rank 1, channel 0"); });
  REQUIRE(error);
  CHECK(error->code() == ErrorCode::System);
  CHECK(error->message() ==
        "FIFO of rank 0 <- rank 1, channel 0: /dev/shm has 1000 bytes free, the segment needs 4194304 bytes; "
        "enlarge /dev/shm (e.g. `mount -o remount,size=... /dev/shm`, or `--shm-size` for docker) or set "
        "NCCL_SHM_DISABLE=1");
}
