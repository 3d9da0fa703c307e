// A communicator's cache of registered buffers, by address range.
#include "runtime/comm/registrations.h"

#include "base/error.h"

namespace tutti {

void* Registrations::add(const void* buffer, size_t bytes, bool* created) {
  const auto key = std::make_pair(reinterpret_cast<uintptr_t>(buffer), bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<Entry>& entry = entries_[key];
  if (!entry) entry = std::make_unique<Entry>(Entry{key.first, bytes, 0});
  entry->references++;
  if (created != nullptr) *created = entry->references == 1;
  ranges_.store(entries_.size(), std::memory_order_relaxed);
  return entry.get();
}

namespace {
[[noreturn]] void throwUnknownHandle(const std::string& where) {
  throw Error(ErrorCode::InvalidArgument,
              where +
                  ": the handle is not a registration of this communicator (from ncclCommRegister on "
                  "another communicator, or deregistered already)");
}
}  // namespace

std::pair<void*, size_t> Registrations::range(void* handle, const std::string& where) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, entry] : entries_)
    if (entry.get() == handle) return {reinterpret_cast<void*>(entry->begin), entry->bytes};
  throwUnknownHandle(where);
}

void Registrations::remove(void* handle, const std::string& where, bool* gone) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.get() != handle) continue;
    const bool last = --it->second->references == 0;
    if (gone != nullptr) *gone = last;
    if (last) entries_.erase(it);
    ranges_.store(entries_.size(), std::memory_order_relaxed);
    return;
  }
  throwUnknownHandle(where);
}

bool Registrations::covers(const void* p, size_t bytes) const {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, entry] : entries_)
    if (begin >= entry->begin && begin - entry->begin <= entry->bytes && bytes <= entry->bytes - (begin - entry->begin))
      return true;
  return false;
}

size_t Registrations::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace tutti
