// Buffers registered with ncclCommRegister: a communicator's cache of them, by address range.
// Registering the same range again returns the same handle and counts a reference, as NCCL's
// cache does; a handle is checked against the cache before it is used, so one from another
// communicator, or one deregistered already, is refused rather than freed twice. What is still
// registered when the communicator goes is released with it.
//
// Zero-copy. A call whose input or output lies wholly in a registered range lets its peers read
// that buffer in place: launch asks covers() for each call (CommLaunch::opFor, OpWork::direct), and
// the plan's kDirect steps then send an address instead of the bytes (algorithms/plan.h, "Direct
// sends"; kernels/lane_engine.h). Between rank processes of a host on device backends the
// buffers are mapped into the peers first (runtime/comm/peer_buffers.h). Decisions:
//   - Addresses travel per message, in the FIFO beside the size (kernels/fifo.h), not at
//     registration: a receiver needs no table of its peers' ranges, and registration need not be
//     collective. Ranks of one process share addresses as they are; a peer process that mapped
//     the buffer gets the address in its mapping, which the sender looks up in its table of what
//     its peers mapped (kern::MappedBufferTable): the same message, the receiver's address space.
//   - Readiness: a direct message is published like any other (release of the FIFO's head) after
//     the span is written, so the receiver reads it after its acquire. Reuse: the receiver frees
//     the slot after reading, and the sender's operation ends only once every FIFO it sent direct
//     messages on is drained, so the user may reuse the buffer as soon as the call completes.
//   - A peer whose buffers are not registered sends bytes as before; a receiver takes either kind
//     of message, so ranks need not agree on what they registered. Unregistered buffers change
//     nothing, and a buffer deregistered between calls is copied from the next call on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace tutti {

class Registrations {
 public:
  // The handle of [buffer, buffer + bytes): a new one, or the existing one with another reference
  // (*created, when given, says which).
  void* add(const void* buffer, size_t bytes, bool* created = nullptr);
  // Drops one reference of `handle`; the range leaves the cache with its last (*gone, when given,
  // says so). Throws InvalidArgument, naming `where`, when the handle is not one of this cache's.
  void remove(void* handle, const std::string& where, bool* gone = nullptr);
  // The start and length of the range `handle` names (ncclWinGetUserPtr). Throws InvalidArgument,
  // naming `where`, when the handle is not one of this cache's.
  std::pair<void*, size_t> range(void* handle, const std::string& where) const;
  // Whether [p, p + bytes) lies inside one registered range.
  bool covers(const void* p, size_t bytes) const;
  size_t size() const;  // registered ranges
  // Whether nothing is registered, without the lock (a launch asks on every call).
  bool empty() const { return ranges_.load(std::memory_order_relaxed) == 0; }

 private:
  struct Entry {
    uintptr_t begin = 0;
    size_t bytes = 0;
    int references = 0;
  };
  mutable std::mutex mutex_;
  std::atomic<size_t> ranges_{0};                                           // entries_.size(), for empty()
  std::map<std::pair<uintptr_t, size_t>, std::unique_ptr<Entry>> entries_;  // by (begin, bytes)
};

}  // namespace tutti
