// The p2p transport's copy thread under NCCL_P2P_USE_CUDA_MEMCPY (see p2p_copy_proxy.h).
#include "transports/p2p/p2p_copy_proxy.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/log.h"

namespace tutti::transport::p2p {
namespace {

char* bytesOf(kern::FifoHeader* header) { return reinterpret_cast<char*>(header); }

}  // namespace

CopyProxy::CopyProxy(TransportContext& context) : context_(context) {
  thread_ = std::thread([this] { run(); });
}

CopyProxy::~CopyProxy() { stop(); }

void CopyProxy::add(std::shared_ptr<CopyLink> link) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.push_back(std::move(link));
  wake_.notify_all();
}

void CopyProxy::remove(const CopyLink* link) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.erase(std::remove_if(links_.begin(), links_.end(),
                              [link](const std::shared_ptr<CopyLink>& l) { return l.get() == link; }),
               links_.end());
}

void CopyProxy::stop() {
  if (!thread_.joinable()) return;
  drain(context_.timeoutSeconds());
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  thread_.join();
}

void CopyProxy::drain(double seconds) {
  if (!thread_.joinable() || stopping_.load()) return;  // nobody copies any more
  // The thread keeps copying meanwhile; a failed or aborted communicator does not wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!context_.abortFlag().load() && !context_.failed() && std::chrono::steady_clock::now() < deadline) {
    bool done = false;
    try {
      done = drained();
    } catch (const Error&) {
      done = true;  // the thread reports what failed
    }
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool CopyProxy::drained() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::shared_ptr<CopyLink>& link : links_)
    if (link->memory->loadWord(&link->staging->head) != link->copied) return false;
  return true;
}

void CopyProxy::run() {
  // Busy while messages move; after that the pauses grow to a millisecond (device executors poll,
  // so nobody rings this thread).
  auto pause = std::chrono::microseconds(10);
  int idle = 0;
  while (!stopping_.load()) {
    bool moved = false;
    int failedPeer = -1;
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const std::shared_ptr<CopyLink>& link : links_) {
        failedPeer = link->peerRank;
        const uint64_t head = link->memory->loadWord(&link->staging->head);  // acquire: the message before its head
        while (link->copied < head) {
          move(*link, link->copied);
          link->copied++;
          link->messages.fetch_add(1, std::memory_order_relaxed);
          moved = true;
        }
        const uint64_t tail = link->memory->loadWord(&link->peer->tail);
        if (tail != link->tail) {
          link->memory->storeWord(&link->staging->tail, tail);
          link->tail = tail;
          moved = true;
        }
      }
    } catch (const Error& e) {
      context_.fail(Error(e.code(), context_.where() + ": p2p copy proxy (NCCL_P2P_USE_CUDA_MEMCPY): " + e.message()),
                    failedPeer);
      return;
    } catch (const std::exception& e) {
      context_.fail(
          Error(ErrorCode::Internal, context_.where() + ": p2p copy proxy (NCCL_P2P_USE_CUDA_MEMCPY): " + e.what()),
          failedPeer);
      return;
    }
    if (moved) {
      pause = std::chrono::microseconds(10);
      idle = 0;
      continue;
    }
    if (++idle < context_.spin()) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

// Message n: its bytes, then (a Simple message) its words, then the receiver's head, each copy
// finished before the next begins (copyAcross waits), so the head never runs ahead of what it
// announces.
void CopyProxy::move(CopyLink& link, uint64_t n) {
  kern::DeviceMemory& memory = *link.memory;
  const uint64_t slot = n % link.nsteps;
  bool ll = false;
  uint64_t line0 = 0;
  if (link.llSlotBytes != 0) {
    memory.copyOut(&line0, bytesOf(link.staging) + link.llOffset + slot * link.llSlotBytes, sizeof line0);
    ll = uint32_t(line0 >> 32) == kern::llFlag(n);
  }
  if (ll) {
    const size_t bytes = std::max(kern::llSlotBytesFor(uint32_t(line0)), kern::kLLLineBytes * kern::kLLHeaderLines);
    if (bytes > link.llSlotBytes)
      throw Error(ErrorCode::Internal, link.what + ": LL message " + std::to_string(n) + " of " +
                                           std::to_string(uint32_t(line0)) + " bytes does not fit its slot");
    // Line 0's size half is the receiver's sign that the message is whole (the receiver polls it,
    // not the head): it lands last, after the data lines and the header's other halves, whatever
    // order a copy engine writes one range in.
    const uint64_t at = link.llOffset + slot * link.llSlotBytes;
    const size_t header = kern::kLLLineBytes * kern::kLLHeaderLines;
    memory.copyAcross(bytesOf(link.peer) + at + header, bytesOf(link.staging) + at + header, bytes - header);
    memory.copyAcross(bytesOf(link.peer) + at + sizeof(uint64_t), bytesOf(link.staging) + at + sizeof(uint64_t),
                      header - sizeof(uint64_t));
    memory.copyAcross(bytesOf(link.peer) + at, bytesOf(link.staging) + at, sizeof(uint64_t));
    // An LL message carries its size and signature in its lines; the Simple words beside them are
    // not written for it (kernels/lane_engine.h, finishRun), and no receiver reads them.
    memory.storeWord(&link.peer->head, n + 1);
    return;
  } else if (memory.loadWord(&link.staging->addrs[slot]) == 0) {  // else a direct message: its address, no bytes
    const uint64_t size = memory.loadWord(&link.staging->sizes[slot]);
    if (size > link.slotBytes)
      throw Error(ErrorCode::Internal, link.what + ": message " + std::to_string(n) + " of " + std::to_string(size) +
                                           " bytes does not fit its slot of " + std::to_string(link.slotBytes));
    const uint64_t at = link.slotOffset + slot * link.slotBytes;
    memory.copyAcross(bytesOf(link.peer) + at, bytesOf(link.staging) + at, size);
  }
  memory.copyAcross(&link.peer->sizes[slot], &link.staging->sizes[slot], sizeof(uint64_t));
  memory.copyAcross(&link.peer->sigs[slot], &link.staging->sigs[slot], sizeof(uint64_t));
  memory.copyAcross(&link.peer->sigCounts[slot], &link.staging->sigCounts[slot], sizeof(uint64_t));
  memory.copyAcross(&link.peer->addrs[slot], &link.staging->addrs[slot], sizeof(uint64_t));
  memory.storeWord(&link.peer->head, n + 1);  // release: the message before its head
}

std::shared_ptr<CopyLink> makeCopyLink(std::shared_ptr<kern::DeviceMemory> memory, void* staging, void* peer,
                                       int peerRank, const std::string& what, const kern::FifoHeader& header) {
  auto link = std::make_shared<CopyLink>();
  link->memory = std::move(memory);
  link->staging = static_cast<kern::FifoHeader*>(staging);
  link->peer = static_cast<kern::FifoHeader*>(peer);
  link->peerRank = peerRank;
  link->what = what;
  link->nsteps = header.nsteps;
  link->slotBytes = header.slotBytes;
  link->slotOffset = header.slotOffset;
  link->llOffset = header.llOffset;
  link->llSlotBytes = header.llSlotBytes;
  return link;
}

std::shared_ptr<CopyProxy> CopyProxyOwner::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!proxy_) proxy_ = std::make_shared<CopyProxy>(context_);
  return proxy_;
}

std::shared_ptr<CopyProxy> CopyProxyOwner::running() {
  std::lock_guard<std::mutex> lock(mutex_);
  return proxy_;
}

void CopyProxyOwner::drain(double seconds) {
  if (std::shared_ptr<CopyProxy> proxy = running()) proxy->drain(seconds);
}

void CopyProxyOwner::stop() {
  if (std::shared_ptr<CopyProxy> proxy = running()) proxy->stop();
}

}  // namespace tutti::transport::p2p
