// A communicator's side of the transport interface for tests that run transports alone: one rank
// of a pretend job, its peers named "rank N (hostN pid 100N)", failures recorded for the test.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "transports/transport.h"

namespace tutti_test {

class TestTransportContext final : public tutti::transport::TransportContext {
 public:
  TestTransportContext(int rank, int nranks, tutti::transport::FifoShape shape,
                       std::shared_ptr<tutti::kern::DeviceMemory> memory = tutti::transport::hostFifoMemory());

  std::string where() const override;
  std::string describePeer(int peer) const override;
  int peerPid(int) const override;  // this process: a test's pretend peers live in it
  int device() const override { return rank_; }
  const std::atomic<bool>& abortFlag() const override { return abort; }
  double timeoutSeconds() const override { return 10; }
  int spin() const override { return 200; }
  bool failed() const override { return failures_.load() != 0; }
  void fail(const tutti::Error& error, int peer) override;
  tutti::transport::FifoShape fifoShape() const override { return shape_; }
  std::shared_ptr<tutti::kern::DeviceMemory> fifoMemory() const override { return memory_; }
  std::string netName() const override { return ""; }

  // The first failure reported: its message ("" when none) and code.
  std::string firstFailure() const;
  tutti::ErrorCode firstFailureCode() const;

  std::atomic<bool> abort{false};

 private:
  int rank_, nranks_;
  tutti::transport::FifoShape shape_;
  std::shared_ptr<tutti::kern::DeviceMemory> memory_;
  std::atomic<int> failures_{0};
  mutable std::mutex mutex_;
  std::string firstFailure_;
  tutti::ErrorCode firstFailureCode_ = tutti::ErrorCode::Internal;
};

}  // namespace tutti_test
