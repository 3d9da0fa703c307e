// Host streams and the registry that recognises their handles.
#include "runtime/host_stream.h"

#include <unordered_set>

namespace tutti {
namespace {
std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<HostStream*>& registry() {
  static std::unordered_set<HostStream*> r;
  return r;
}
}  // namespace

HostStream::HostStream() : thread_([this] { loop(); }) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(this);
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(registryMutex());
    registry().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

HostStream* HostStream::fromHandle(cudaStream_t stream) {
  auto* candidate = reinterpret_cast<HostStream*>(stream);
  std::lock_guard<std::mutex> lock(registryMutex());
  return registry().count(candidate) ? candidate : nullptr;
}

void HostStream::enqueue(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_all();
}

void HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !running_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

bool HostStream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && !running_;
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    try {
      job();
    } catch (...) {
      std::lock_guard<std::mutex> relock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    running_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace tutti
