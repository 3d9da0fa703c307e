// Shared segments: POSIX shared memory between processes, a process-wide table between threads.
//
// Decisions:
// - Pages are faulted in when a segment is created or attached (MAP_POPULATE), and then written
//   once from this process (base/pages.h), not on the hot path: on small virtual machines a
//   first touch costs far more than the copy it precedes, and MAP_POPULATE alone does not pay it
//   (each of a 2-rank all-reduce's first 8 calls at 256 KiB ran 0.4 ms slower, one per FIFO slot).
// - /dev/shm's free space is checked with statvfs and then reserved with fallocate, so a full
//   /dev/shm is an error with a remedy, never a SIGBUS when the FIFO is first written.
// - Names are "/tutti-<pid>-<counter>-<random>" and created with O_EXCL; whoever maps a
//   single-attach segment second unlinks its name, and the creator unlinks it when sealed or
//   destroyed, so a peer that never attaches leaves nothing behind in /dev/shm.
#include "transports/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/error.h"
#include "base/host_identity.h"
#include "base/log.h"
#include "base/pages.h"
#include "base/random.h"
#include "transports/token_table.h"

namespace tutti::transport {

namespace {

constexpr uint32_t kKindShm = 1;
constexpr uint32_t kKindInProcess = 2;
constexpr const char* kShmDirectory = "/dev/shm";  // where glibc's shm_open puts names
constexpr const char* kNamePrefix = "/tutti-";

// munmap()s on destruction.
class Mapping {
 public:
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept : base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  void* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  void* base_;
  size_t bytes_;
};

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

void unlinkShmName(const std::string& name) {
  if (shm_unlink(name.c_str()) != 0 && errno != ENOENT)
    TUTTI_WARN("shm_unlink %s: %s (errno %d); the name stays in %s", name.c_str(), std::strerror(errno), errno,
               kShmDirectory);
}

// Unlinks the name when destroyed unless released: covers every error path between shm_open
// and the segment object that takes the name over.
class ShmName {
 public:
  explicit ShmName(std::string name) : name_(std::move(name)) {}
  ShmName(const ShmName&) = delete;
  ShmName& operator=(const ShmName&) = delete;
  ~ShmName() {
    if (!name_.empty()) unlinkShmName(name_);
  }
  const std::string& name() const { return name_; }
  std::string release() { return std::exchange(name_, std::string()); }

 private:
  std::string name_;
};

class ShmSegment final : public Segment {
 public:
  // `ownedName`: the creator's name, unlinked when sealed; empty for an attacher.
  ShmSegment(Mapping mapping, std::string ownedName) : mapping_(std::move(mapping)), ownedName_(std::move(ownedName)) {}
  ~ShmSegment() override { seal(); }
  void* base() const override { return mapping_.base(); }
  size_t bytes() const override { return mapping_.bytes(); }
  void seal() override {
    if (!ownedName_.empty()) unlinkShmName(std::exchange(ownedName_, std::string()));
  }

 private:
  Mapping mapping_;
  std::string ownedName_;
};

// The in-process table: token -> memory, until the (single) attacher or the creator's seal()
// takes the entry out.
using SegmentTable = TokenTable<Mapping>;

class InProcessSegment final : public Segment {
 public:
  // `ownedToken`: the creator's table entry, removed when sealed; 0 for an attacher.
  InProcessSegment(std::shared_ptr<Mapping> memory, uint64_t ownedToken)
      : memory_(std::move(memory)), ownedToken_(ownedToken) {}
  ~InProcessSegment() override { seal(); }
  void* base() const override { return memory_->base(); }
  size_t bytes() const override { return memory_->bytes(); }
  void seal() override {
    if (ownedToken_ != 0) SegmentTable::instance().remove(std::exchange(ownedToken_, 0));
  }

 private:
  std::shared_ptr<Mapping> memory_;
  uint64_t ownedToken_;
};

std::string formatName(uint64_t counter) {
  char name[sizeof(SegmentDescriptor::name)];
  uint64_t random = splitmix64(processToken() ^ drawRandom() ^ counter);
  std::snprintf(name, sizeof name, "%s%ld-%llu-%08llx", kNamePrefix, static_cast<long>(getpid()),
                static_cast<unsigned long long>(counter), static_cast<unsigned long long>(random & 0xffffffffull));
  return name;
}

[[noreturn]] void throwNoSpace(uint64_t freeBytes, uint64_t neededBytes, const std::string& context) {
  throw Error(ErrorCode::System,
              context + ": " + kShmDirectory + " has " + std::to_string(freeBytes) + " bytes free, the segment needs " +
                  std::to_string(neededBytes) + " bytes; enlarge " + kShmDirectory +
                  " (e.g. `mount -o remount,size=... /dev/shm`, or `--shm-size` for docker) or set NCCL_SHM_DISABLE=1");
}

// Free bytes for an unprivileged writer; nullopt-like -1 when statvfs itself fails.
int64_t shmFreeBytes() {
  struct statvfs info {};
  if (statvfs(kShmDirectory, &info) != 0) return -1;
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

std::unique_ptr<Segment> createInProcess(size_t bytes, SegmentDescriptor* out, const std::string& context) {
  // Anonymous memory: page-aligned, zero-filled, and populated now rather than on the hot path.
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (base == MAP_FAILED) throwSystemError(context + ": allocating " + std::to_string(bytes) + " bytes", errno);
  touchPages(base, bytes);
  auto memory = std::make_shared<Mapping>(base, bytes);
  uint64_t token = SegmentTable::instance().insert(memory);
  out->kind = kKindInProcess;
  out->token = token;
  TUTTI_TRACE(log::Shm, "%s: in-process segment %llu, %zu bytes", context.c_str(),
              static_cast<unsigned long long>(token), bytes);
  return std::make_unique<InProcessSegment>(std::move(memory), token);
}

std::unique_ptr<Segment> createShm(size_t bytes, SegmentDescriptor* out, const std::string& context) {
  static std::atomic<uint64_t> counter{0};
  // O_EXCL: a name left over by a crashed process, or a (vanishingly unlikely) collision, is
  // never reused; draw another.
  int fd = -1;
  std::string name;
  for (int attempt = 0; fd < 0; ++attempt) {
    name = formatName(++counter);
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && (errno != EEXIST || attempt == 16)) throwSystemError(context + ": shm_open " + name, errno);
  }
  FileDescriptor file(fd);
  ShmName owned(name);

  int64_t freeBytes = shmFreeBytes();
  if (freeBytes >= 0) checkShmFreeSpace(static_cast<uint64_t>(freeBytes), bytes, context);
  if (ftruncate(file.get(), static_cast<off_t>(bytes)) != 0)
    throwSystemError(context + ": ftruncate " + name + " to " + std::to_string(bytes) + " bytes", errno);
  // Reserve the pages now: without this, tmpfs running out later is a SIGBUS on first write.
  if (fallocate(file.get(), 0, 0, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    if (err == ENOSPC) throwNoSpace(static_cast<uint64_t>(std::max<int64_t>(shmFreeBytes(), 0)), bytes, context);
    if (err != EOPNOTSUPP && err != ENOSYS) throwSystemError(context + ": fallocate " + name, err);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, file.get(), 0);
  if (base == MAP_FAILED)
    throwSystemError(context + ": mmap " + name + " (" + std::to_string(bytes) + " bytes)", errno);
  Mapping mapping(base, bytes);
  touchPages(base, bytes);

  out->kind = kKindShm;
  std::memcpy(out->name, name.c_str(), name.size() + 1);
  TUTTI_INFO(log::Shm, "%s: created %s, %zu bytes", context.c_str(), name.c_str(), bytes);
  return std::make_unique<ShmSegment>(std::move(mapping), owned.release());
}

std::unique_ptr<Segment> attachInProcess(const SegmentDescriptor& descriptor, const std::string& context) {
  if (descriptor.ownerPid != static_cast<uint64_t>(getpid()))
    throw Error(ErrorCode::Internal, context + ": in-process segment " + std::to_string(descriptor.token) +
                                         " belongs to process " + std::to_string(descriptor.ownerPid) +
                                         ", not to this one (" + std::to_string(getpid()) + ")");
  bool multiAttach = (descriptor.flags & kSegmentMultiAttach) != 0;
  std::shared_ptr<Mapping> memory = SegmentTable::instance().take(descriptor.token, multiAttach);
  if (memory == nullptr)
    throw Error(ErrorCode::Remote, context + ": in-process segment " + std::to_string(descriptor.token) +
                                       " is gone (already attached, sealed, or its creator was destroyed)");
  if (memory->bytes() != descriptor.bytes)
    throw Error(ErrorCode::Remote, context + ": in-process segment " + std::to_string(descriptor.token) + " has " +
                                       std::to_string(memory->bytes()) + " bytes, the descriptor says " +
                                       std::to_string(descriptor.bytes));
  return std::make_unique<InProcessSegment>(std::move(memory), 0);
}

std::unique_ptr<Segment> attachShm(const SegmentDescriptor& descriptor, const std::string& context) {
  size_t nameLength = strnlen(descriptor.name, sizeof descriptor.name);
  std::string name(descriptor.name, nameLength);
  if (nameLength == sizeof descriptor.name || !name.starts_with(kNamePrefix) || name.find('/', 1) != std::string::npos)
    throw Error(ErrorCode::Remote, context + ": malformed shared-memory segment name in the peer's descriptor");

  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) throwSystemError(context + ": shm_open " + name, errno);
  FileDescriptor file(fd);
  struct stat info {};
  if (fstat(file.get(), &info) != 0) throwSystemError(context + ": fstat " + name, errno);
  if (static_cast<uint64_t>(info.st_size) != descriptor.bytes)
    throw Error(ErrorCode::Remote, context + ": " + name + " has " + std::to_string(info.st_size) +
                                       " bytes, the peer's descriptor says " + std::to_string(descriptor.bytes));
  size_t bytes = static_cast<size_t>(descriptor.bytes);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, file.get(), 0);
  if (base == MAP_FAILED)
    throwSystemError(context + ": mmap " + name + " (" + std::to_string(bytes) + " bytes)", errno);
  Mapping mapping(base, bytes);
  touchPages(base, bytes);
  // Both sides have it mapped: the name has served its purpose.
  if ((descriptor.flags & kSegmentMultiAttach) == 0) unlinkShmName(name);
  TUTTI_INFO(log::Shm, "%s: attached %s, %zu bytes", context.c_str(), name.c_str(), bytes);
  return std::make_unique<ShmSegment>(std::move(mapping), std::string());
}

}  // namespace

void checkShmFreeSpace(uint64_t freeBytes, uint64_t neededBytes, const std::string& context) {
  if (freeBytes < neededBytes) throwNoSpace(freeBytes, neededBytes, context);
}

std::unique_ptr<Segment> createSegment(size_t bytes, bool inProcess, SegmentDescriptor* out, const std::string& context,
                                       uint32_t flags) {
  if (bytes == 0) throw Error(ErrorCode::Internal, context + ": a shared segment of 0 bytes was requested");
  if ((flags & ~kSegmentMultiAttach) != 0)
    throw Error(ErrorCode::Internal, context + ": unknown segment flags " + std::to_string(flags));
  std::memset(out, 0, sizeof *out);  // the descriptor travels to other processes: no stray bytes
  out->flags = flags;
  out->bytes = bytes;
  out->ownerPid = static_cast<uint64_t>(getpid());
  return inProcess ? createInProcess(bytes, out, context) : createShm(bytes, out, context);
}

std::unique_ptr<Segment> attachSegment(const SegmentDescriptor& descriptor, const std::string& context) {
  if (descriptor.bytes == 0 || descriptor.bytes > SIZE_MAX)
    throw Error(ErrorCode::Remote,
                context + ": the peer's segment descriptor has " + std::to_string(descriptor.bytes) + " bytes");
  switch (descriptor.kind) {
    case kKindShm: return attachShm(descriptor, context);
    case kKindInProcess: return attachInProcess(descriptor, context);
    default: break;
  }
  throw Error(ErrorCode::Remote,
              context + ": the peer's segment descriptor has unknown kind " + std::to_string(descriptor.kind));
}

}  // namespace tutti::transport
