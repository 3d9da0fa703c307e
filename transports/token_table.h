// What one rank thread hands another of its process by token (an in-process segment, a local
// FIFO): held here from the offer until the taker takes it or the offerer withdraws it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tutti::transport {

template <typename T>
class TokenTable {
 public:
  // The one table of T's in the process. Never destroyed, so that what outlives main() can still
  // be withdrawn.
  static TokenTable& instance() {
    static auto* table = new TokenTable();
    return *table;
  }
  uint64_t insert(std::shared_ptr<T> item) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t token = ++lastToken_;
    entries_.emplace(token, std::move(item));
    return token;
  }
  // The item under `token`, removed from the table unless `keep`; null when absent.
  std::shared_ptr<T> take(uint64_t token, bool keep = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(token);
    if (found == entries_.end()) return nullptr;
    std::shared_ptr<T> item = found->second;
    if (!keep) entries_.erase(found);
    return item;
  }
  void remove(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.erase(token);
  }

 private:
  std::mutex mutex_;
  uint64_t lastToken_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<T>> entries_;
};

}  // namespace tutti::transport
