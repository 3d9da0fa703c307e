// Connection setup never waits for a peer: through a net backend of this file whose connect stays
// pending until the peer's accept has run (as aws-ofi-nccl's does, and NCCL's contract allows),
// ranks on two hosts connect at init (the ring) and lazily in a call (all-to-all's direct
// connections), where running every connect before any accept would wait until TUTTI_TIMEOUT.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "nccl.h"
#include "tests/common/hosts_support.h"
#include "transports/net/net.h"
#include "transports/net/socket/socket_backend.h"

namespace {

using tutti::Error;
using tutti::ErrorCode;
using tutti::SteadyClock;
using tutti::SteadyTime;
using namespace tutti::transport::net;

// Where the listeners mark that their accept has run, one file per listener (named by a token in
// the handle's last bytes): the rank processes are forked from the test's, so they share it.
std::string markDir;
// Set: accepts never mark, so every connect stays pending (a peer that takes no part in setup).
bool neverAccept = false;
constexpr size_t kTokenAt = kNetHandleBytes - sizeof(uint64_t);

std::string markOf(const NetHandle& handle) {
  uint64_t token = 0;
  std::memcpy(&token, handle.bytes + kTokenAt, sizeof token);
  return markDir + "/" + std::to_string(token);
}

bool accepted(const NetHandle& handle) { return access(markOf(handle).c_str(), F_OK) == 0; }

// The Socket backend's listener; every accept call first marks that it ran.
class MarkingListenComm final : public NetListenComm {
 public:
  MarkingListenComm(std::unique_ptr<NetListenComm> inner, NetHandle handle)
      : inner_(std::move(inner)), handle_(handle) {}
  std::unique_ptr<NetRecvComm> accept(SteadyTime deadline, const std::atomic<bool>* abortFlag) override {
    mark();
    return inner_->accept(deadline, abortFlag);
  }
  std::unique_ptr<NetRecvComm> acceptIfReady() override {
    mark();
    return inner_->acceptIfReady();
  }

 private:
  void mark() {
    if (marked_ || neverAccept) return;
    int fd = open(markOf(handle_).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(ErrorCode::System, "PendingAccept: cannot mark " + markOf(handle_));
    close(fd);
    marked_ = true;
  }
  std::unique_ptr<NetListenComm> inner_;
  NetHandle handle_;
  bool marked_ = false;
};

// A connect that makes no progress until the peer's accept has run; then the Socket backend's.
class PendingConnect final : public NetConnecting {
 public:
  PendingConnect(NetBackend& inner, int device, const NetHandle& handle, SteadyTime deadline,
                 const std::atomic<bool>* abortFlag)
      : inner_(inner), device_(device), handle_(handle), deadline_(deadline), abortFlag_(abortFlag) {}
  std::unique_ptr<NetSendComm> poll() override {
    if (!accepted(handle_)) return nullptr;
    return inner_.connect(device_, handle_, deadline_, abortFlag_);
  }

 private:
  NetBackend& inner_;
  int device_;
  NetHandle handle_;
  SteadyTime deadline_;
  const std::atomic<bool>* abortFlag_;
};

class PendingAcceptBackend final : public NetBackend {
 public:
  PendingAcceptBackend() : inner_(makeSocketBackend()) {}
  const char* name() const override { return "PendingAccept"; }
  int deviceCount() override { return inner_->deviceCount(); }
  NetProperties properties(int device) override { return inner_->properties(device); }

  std::unique_ptr<NetListenComm> listen(int device, NetHandle* handle) override {
    auto inner = inner_->listen(device, handle);
    for (size_t i = kTokenAt; i < kNetHandleBytes; i++)
      if (handle->bytes[i] != 0) throw Error(ErrorCode::Internal, "PendingAccept: the Socket handle fills the token");
    uint64_t token = std::random_device{}() * 4294967296ull + std::random_device{}();
    std::memcpy(handle->bytes + kTokenAt, &token, sizeof token);
    return std::make_unique<MarkingListenComm>(std::move(inner), *handle);
  }

  // Whole: waits (until the deadline) for the peer's accept, as such a plugin's connect polled to
  // completion would.
  std::unique_ptr<NetSendComm> connect(int device, const NetHandle& handle, SteadyTime deadline,
                                       const std::atomic<bool>* abortFlag) override {
    while (!accepted(handle)) {
      if (abortFlag != nullptr && abortFlag->load()) throw Error(ErrorCode::Aborted, "PendingAccept: connect: aborted");
      if (SteadyClock::now() >= deadline)
        throw Error(ErrorCode::Timeout, "PendingAccept: connect: the peer's accept did not run");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return inner_->connect(device, handle, deadline, abortFlag);
  }

  std::unique_ptr<NetConnecting> startConnect(int device, const NetHandle& handle, SteadyTime deadline,
                                              const std::atomic<bool>* abortFlag) override {
    return std::make_unique<PendingConnect>(*inner_, device, handle, deadline, abortFlag);
  }

 private:
  std::unique_ptr<NetBackend> inner_;
};

void registerOnce() {
  static std::once_flag once;
  std::call_once(once,
                 [] { registerNetBackend("PendingAccept", [] { return std::make_unique<PendingAcceptBackend>(); }); });
}

TEST_CASE("connection setup: a net backend whose connect waits for the peer's accept connects at init and in a call",
          "[net][setup]") {
  registerOnce();
  char dir[] = "/tmp/tutti-pending-accept-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  markDir = dir;
  tutti_test::HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 2;
  layout.environment = {{"NCCL_NET", "PendingAccept"}, {"TUTTI_NET_REQUIRE", "PendingAccept"}, {"TUTTI_TIMEOUT", "20"}};
  layout.timeoutSeconds = 60;
  const auto start = std::chrono::steady_clock::now();
  auto outcomes = tutti_test::runOnHosts(layout, [](int rank, int nranks, ncclComm_t comm) {
    std::vector<float> sum(1027, float(rank + 1));
    tutti_test::checkNccl(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclFloat32, ncclSum, comm, nullptr),
                          "ncclAllReduce");
    for (float v : sum) tutti_test::check(v == float(nranks * (nranks + 1) / 2), "the all-reduce's sum is wrong");
    // Direct connections between every pair, made in this call: both ends of a pair across the
    // hosts connect to each other at once.
    const size_t each = 33;
    std::vector<int32_t> out(each * size_t(nranks)), in(out.size(), -1);
    for (size_t i = 0; i < out.size(); i++) out[i] = int32_t(rank * 100000 + int(i));
    tutti_test::checkNccl(ncclAlltoAll(out.data(), in.data(), each, ncclInt32, comm, nullptr), "ncclAlltoAll");
    for (int p = 0; p < nranks; p++)
      for (size_t i = 0; i < each; i++)
        tutti_test::check(in[size_t(p) * each + i] == int32_t(p * 100000 + int(size_t(rank) * each + i)),
                          "the all-to-all's block from rank " + std::to_string(p) + " is wrong");
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string failures = tutti_test::failuresOf(outcomes);
  size_t marks = 0;
  for (auto& entry : std::filesystem::directory_iterator(markDir)) marks += entry.is_regular_file() ? 1 : 0;
  std::filesystem::remove_all(markDir);
  INFO(failures);
  CHECK(failures.empty());
  // Within TUTTI_TIMEOUT: a connect that waited for an accept that came later would end there.
  CHECK(seconds < 15);
  // The backend carried the connections between the hosts: the ring's two, and all-to-all's.
  CHECK(marks >= 2);
}

TEST_CASE(
    "connection setup: a connect still pending at TUTTI_TIMEOUT says so without asking whether the peer made the call",
    "[net][setup]") {
  registerOnce();
  char dir[] = "/tmp/tutti-pending-accept-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  markDir = dir;
  neverAccept = true;
  tutti_test::HostLayout layout;
  layout.hosts = 2;
  layout.ranksPerHost = 1;
  layout.environment = {{"NCCL_NET", "PendingAccept"}, {"TUTTI_NET_REQUIRE", "PendingAccept"}, {"TUTTI_TIMEOUT", "3"}};
  layout.timeoutSeconds = 60;
  auto outcomes = tutti_test::runOnHosts(layout, [](int, int, ncclComm_t) {});
  neverAccept = false;
  std::filesystem::remove_all(markDir);
  // Both ranks made the call (their offers arrived): the error says what did not complete, and
  // blames neither for not making the call.
  for (const tutti_test::ProcessOutcome& o : outcomes) {
    INFO(o.failure);
    CHECK(o.failure.find("within TUTTI_TIMEOUT (3 s)") != std::string::npos);
    CHECK(o.failure.find("so it made the call") != std::string::npos);
    CHECK(o.failure.find("make the same call?") == std::string::npos);
  }
}

}  // namespace
