// Memory shared between two ranks: created by one side, attached by the other through a
// descriptor that travels over the bootstrap.
//
// Between processes a segment is POSIX shared memory: the creator shm_open()s and maps it, the
// attacher maps it and then unlinks the name, so once both sides have mapped it nothing is left
// in /dev/shm even if both crash. Free space in /dev/shm is checked before creating; the error
// gives the bytes needed and available and the remedy. Between rank threads of one process a
// segment is plain memory handed over through a process-wide table; both sides hold a reference,
// so either may go first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tutti::transport {

// Plain bytes, safe to send to another process.
struct SegmentDescriptor {
  uint32_t kind;   // 1: POSIX shm, 2: in-process
  uint32_t flags;  // kSegmentMultiAttach

  uint64_t bytes;
  uint64_t ownerPid;
  uint64_t token;  // in-process: key into the process-wide table
  char name[96];   // POSIX shm name, "/tutti-..."
};
static_assert(sizeof(SegmentDescriptor) == 128);

// A multi-attach segment (a rank's control block, which every peer on the node maps) is not
// unlinked or removed from the table by attaching; its creator calls seal() once every peer has
// attached (after an init barrier), and its destructor does so in any case.
constexpr uint32_t kSegmentMultiAttach = 1;

class Segment {
 public:
  virtual ~Segment() = default;
  virtual void* base() const = 0;
  virtual size_t bytes() const = 0;
  // Creator side: remove the name / table entry now, so no one else can attach. Idempotent.
  virtual void seal() = 0;
};

// Zero-filled memory of `bytes`. inProcess: the peer is a thread of this process.
// `context` goes into error messages (operation, ranks). flags: 0 or kSegmentMultiAttach.
std::unique_ptr<Segment> createSegment(size_t bytes, bool inProcess, SegmentDescriptor* out, const std::string& context,
                                       uint32_t flags = 0);
// Maps what the peer created. A single-attach segment can be attached exactly once (the attacher
// then unlinks / removes it); a multi-attach one until its creator seals it.
std::unique_ptr<Segment> attachSegment(const SegmentDescriptor& descriptor, const std::string& context);

// Throws a System error naming `context`, both figures and the remedy (enlarge /dev/shm or set
// NCCL_SHM_DISABLE=1) when /dev/shm's free bytes cannot hold the segment. Separate from
// createSegment so the message can be tested without filling /dev/shm.
void checkShmFreeSpace(uint64_t freeBytes, uint64_t neededBytes, const std::string& context);

}  // namespace tutti::transport
