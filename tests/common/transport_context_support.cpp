// The test's communicator side of the transport interface.
#include "tests/common/transport_context_support.h"

#include <unistd.h>

namespace tutti_test {

TestTransportContext::TestTransportContext(int rank, int nranks, tutti::transport::FifoShape shape,
                                           std::shared_ptr<tutti::kern::DeviceMemory> memory)
    : rank_(rank), nranks_(nranks), shape_(shape), memory_(std::move(memory)) {}

std::string TestTransportContext::where() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + " (host" + std::to_string(rank_) +
         " pid " + std::to_string(1000 + rank_) + ")";
}

std::string TestTransportContext::describePeer(int peer) const {
  return "rank " + std::to_string(peer) + " (host" + std::to_string(peer) + " pid " + std::to_string(1000 + peer) + ")";
}

int TestTransportContext::peerPid(int) const { return int(getpid()); }

void TestTransportContext::fail(const tutti::Error& error, int peer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (firstFailure_.empty()) {
      firstFailure_ = error.message();
      firstFailureCode_ = error.code();
    }
  }
  failures_.fetch_add(1);
  abort.store(true);
}

std::string TestTransportContext::firstFailure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return firstFailure_;
}

tutti::ErrorCode TestTransportContext::firstFailureCode() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return firstFailureCode_;
}

}  // namespace tutti_test
