// Buffers registered with ncclCommRegister: a communicator's cache of them, by address range.
// Registering the same range again returns the same handle and counts a reference, as NCCL's
// cache does; a handle is checked against the cache before it is used, so one from another
// communicator, or one deregistered already, is refused rather than freed twice. Transports that
// can let a peer read a user buffer directly ask covers() (none does yet: every path copies
// through the FIFOs). What is still registered when the communicator goes is released with it.
#pragma once

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
  // The handle of [buffer, buffer + bytes): a new one, or the existing one with another reference.
  void* add(const void* buffer, size_t bytes);
  // Drops one reference of `handle`; the range leaves the cache with its last. Throws
  // InvalidArgument, naming `where`, when the handle is not one of this cache's.
  void remove(void* handle, const std::string& where);
  // Whether [p, p + bytes) lies inside one registered range.
  bool covers(const void* p, size_t bytes) const;
  size_t size() const;  // registered ranges

 private:
  struct Entry {
    uintptr_t begin = 0;
    size_t bytes = 0;
    int references = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<uintptr_t, size_t>, std::unique_ptr<Entry>> entries_;  // by (begin, bytes)
};

}  // namespace tutti
