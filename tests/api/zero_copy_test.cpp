// Zero-copy on registered buffers (runtime/registrations.h, "Zero-copy"): all-gather, broadcast and
// all-reduce whose buffers are registered with ncclCommRegister let their peers read them in place.
// Every case is checked against the float64 reference and bitwise against the same call on
// unregistered buffers; each registered buffer is poisoned as soon as its call has returned, so a
// peer still reading it afterwards (an operation that ended before its direct messages were read)
// shows as a wrong result.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/collective_cases_support.h"
#include "tests/common/env_support.h"
#include "tests/common/log_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace {

using tutti_test::Case;
using tutti_test::Coll;

// Host buffers registered on one communicator for the length of one case; on the null stream
// (blocking calls) or a host stream of their own (queued calls).
class RegisteredBuffers final : public tutti_test::CaseBuffers {
 public:
  // windows: registered collectively with ncclCommWindowRegister (every rank allocates the same
  // buffers in the same order) rather than with ncclCommRegister.
  RegisteredBuffers(ncclComm_t comm, bool onStream, bool windows = false) : comm_(comm), windows_(windows) {
    if (onStream) TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream_));
  }
  ~RegisteredBuffers() override {
    if (stream_ != nullptr) tuttiStreamDestroy(stream_);
  }
  void* allocate(size_t bytes) override {
    void* p = std::malloc(bytes + 64);
    void* handle = nullptr;
    if (windows_) {
      ncclWindow_t win = nullptr;
      TUTTI_NCCL_CHECK(ncclCommWindowRegister(comm_, p, bytes + 64, &win, NCCL_WIN_DEFAULT));
      handle = win;
    } else {
      TUTTI_NCCL_CHECK(ncclCommRegister(comm_, p, bytes + 64, &handle));
    }
    held_.push_back({p, bytes + 64, handle});
    return p;
  }
  // The call has returned (and been synchronised): nobody may read the buffer any more.
  void release(void* p) override {
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      if (it->p != p) continue;
      if (windows_) TUTTI_NCCL_CHECK(ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(it->handle)));
      else TUTTI_NCCL_CHECK(ncclCommDeregister(comm_, it->handle));
      std::memset(p, 0xa5, it->bytes);
      std::free(p);
      held_.erase(it);
      return;
    }
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  cudaStream_t stream() override { return stream_; }
  void synchronize() override {
    if (stream_ != nullptr) TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream_));
  }

 private:
  struct Held {
    void* p;
    size_t bytes;
    void* handle;
  };
  ncclComm_t comm_;
  bool windows_;
  cudaStream_t stream_ = nullptr;
  std::vector<Held> held_;
};

// All-gather, broadcast (first and last root) and all-reduce (sum; average where it is exact
// enough) at odd counts, in and out of place, in several types. The larger counts exceed the
// device executors' LL messages (which never go direct) and span several FIFO slots.
// small: fewer counts and types, for the runs at more ranks.
std::vector<Case> zeroCopyCases(int nranks, bool small) {
  std::vector<Case> cases;
  const std::vector<size_t> counts = small ? std::vector<size_t>{7, 65537} : std::vector<size_t>{1, 1003, 65537, 300001};
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclInt32, ncclBfloat16, ncclInt8};
  for (size_t count : counts)
    for (ncclDataType_t type : types) {
      if (count > 70000 && type != ncclFloat32) continue;  // one type across many slots is enough
      if (small && type != ncclFloat32 && (count < 1000 || type == ncclInt32 || type == ncclBfloat16)) continue;
      for (bool inPlace : {false, true}) {
        cases.push_back({Coll::AllGather, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, 0});
        cases.push_back({Coll::Broadcast, type, ncclSum, count, inPlace, nranks - 1});
        cases.push_back({Coll::AllReduce, type, ncclSum, count, inPlace, 0});
        if (type == ncclFloat64) cases.push_back({Coll::AllReduce, type, ncclAvg, count, inPlace, 0});
      }
    }
  return cases;
}

// Runs every case on plain buffers and on registered ones (on ranks that `registers` says), and
// requires the same bytes. Under NCCL_ALGO=algorithm ("": the selector's choice).
void requireSameAsCopies(int nranks, const char* algorithm, bool onStream, bool small,
                         bool (*registers)(int rank) = [](int) { return true; }) {
  tutti_test::ScopedEnv algo("NCCL_ALGO", *algorithm ? algorithm : nullptr);
  const std::vector<Case> cases = zeroCopyCases(nranks, small);
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases) {
      std::vector<char> copied, direct;
      tutti_test::runCase(c, rank, n, comm, nullptr, &copied);
      if (registers(rank)) {
        RegisteredBuffers buffers(comm, onStream);
        tutti_test::runCase(c, rank, n, comm, &buffers, &direct);
      } else {
        tutti_test::runCase(c, rank, n, comm, nullptr, &direct);
      }
      tutti_test::check(copied == direct, tutti_test::describe(c, rank, n) + ": the registered buffers' result differs from the copied one");
    }
  });
  INFO(nranks << " ranks, NCCL_ALGO=" << (*algorithm ? algorithm : "(selector)") << (onStream ? ", host stream" : ", null stream"));
  INFO(failures);
  REQUIRE(failures.empty());
}

}  // namespace

TEST_CASE("zero-copy: registered buffers give the copied path's bytes, 2 to 8 ranks", "[register][zero-copy][device-path]") {
  // The direct messages are used: every launch on registered buffers says so.
  tutti_test::CapturedLog log("TRACE", "COLL");
  requireSameAsCopies(2, "", false, false);
  CHECK(!log.linesWith("zero-copy: peers read the input and output in place").empty());
  requireSameAsCopies(3, "ring", true, true);
  requireSameAsCopies(4, "", true, true);
  requireSameAsCopies(5, "tree", false, true);
  requireSameAsCopies(8, "", false, true);
}

TEST_CASE("zero-copy: a plan's direct sends in every algorithm that marks them", "[register][zero-copy]") {
  requireSameAsCopies(4, "ring", false, true);
  requireSameAsCopies(6, "tree", true, true);
  requireSameAsCopies(5, "binomial", false, true);
  requireSameAsCopies(4, "pat", false, true);
}

TEST_CASE("zero-copy: ranks need not agree on what they registered", "[register][zero-copy][device-path]") {
  // Odd ranks send bytes and even ranks addresses; every receiver takes either.
  requireSameAsCopies(3, "", false, true, [](int rank) { return rank % 2 == 0; });
}

TEST_CASE("zero-copy: a buffer deregistered between calls is copied from the next call on", "[register][zero-copy][device-path]") {
  tutti_test::CapturedLog log("TRACE", "COLL");
  const int nranks = 3;
  const size_t count = 40001;
  std::string failures = tutti_test::runThreads(nranks, [&](int rank, int n, ncclComm_t comm) {
    std::vector<float> in(count), out(count * size_t(n));
    void* handles[2] = {nullptr, nullptr};
    TUTTI_NCCL_CHECK(ncclCommRegister(comm, in.data(), in.size() * sizeof(float), &handles[0]));
    TUTTI_NCCL_CHECK(ncclCommRegister(comm, out.data(), out.size() * sizeof(float), &handles[1]));
    for (int call = 0; call < 3; call++) {
      for (size_t i = 0; i < count; i++) in[i] = float((i * 7 + size_t(rank) * 13 + size_t(call)) % 1000);
      std::fill(out.begin(), out.end(), -1.0f);
      TUTTI_NCCL_CHECK(ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr));
      for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
          tutti_test::check(out[size_t(r) * count + i] == float((i * 7 + size_t(r) * 13 + size_t(call)) % 1000),
                            "rank " + std::to_string(rank) + ", call " + std::to_string(call) + ": block " + std::to_string(r) +
                                " element " + std::to_string(i) + " is wrong");
      // Idle between the calls: the first ran on registered buffers; from the second on they are not.
      if (call == 0)
        for (void* h : handles) TUTTI_NCCL_CHECK(ncclCommDeregister(comm, h));
    }
  });
  INFO(failures);
  REQUIRE(failures.empty());
  // The first call of each rank was zero-copy, the later ones not (3 ranks, one launch each).
  const std::vector<std::string> direct = log.linesWith("AllGather #");
  size_t zeroCopy = 0, copied = 0;
  for (const std::string& line : direct) {
    if (line.find("count 40001") == std::string::npos) continue;
    (line.find("zero-copy") != std::string::npos ? zeroCopy : copied)++;
  }
  CHECK(zeroCopy == size_t(nranks));
  CHECK(copied == size_t(2 * nranks));
}

TEST_CASE("zero-copy: buffers registered as windows (ncclCommWindowRegister) go zero-copy and give the copied path's bytes",
          "[register][zero-copy][window]") {
  tutti_test::CapturedLog log("TRACE", "COLL");
  const std::vector<Case> cases = zeroCopyCases(3, true);
  std::string failures = tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases) {
      std::vector<char> copied, direct;
      tutti_test::runCase(c, rank, n, comm, nullptr, &copied);
      RegisteredBuffers windows(comm, false, true);
      tutti_test::runCase(c, rank, n, comm, &windows, &direct);
      tutti_test::check(copied == direct, tutti_test::describe(c, rank, n) + ": the windows' result differs from the copied one");
    }
  });
  INFO(failures);
  REQUIRE(failures.empty());
  CHECK(!log.linesWith("zero-copy: peers read the input and output in place").empty());
}

TEST_CASE("ncclCommWindowRegister: symmetric windows of different sizes, or flags that differ, fail every rank naming the peer",
          "[register][window][arguments]") {
  for (bool flagsDiffer : {false, true}) {
    std::string failures = tutti_test::runThreads(2, [&](int rank, int, ncclComm_t comm) {
      std::vector<char> buf(8192);
      ncclWindow_t win = nullptr;
      const size_t size = !flagsDiffer && rank == 1 ? 4096 : 8192;
      const int flags = flagsDiffer && rank == 1 ? NCCL_WIN_DEFAULT : NCCL_WIN_COLL_SYMMETRIC;
      const ncclResult_t result = ncclCommWindowRegister(comm, buf.data(), size, &win, flags);
      const std::string message = ncclGetLastError(comm);
      const std::string other = "rank " + std::to_string(1 - rank) + " (";
      tutti_test::check(result == ncclInvalidUsage && message.find(other) != std::string::npos &&
                            message.find(flagsDiffer ? "winFlags" : "symmetric window") != std::string::npos,
                        "rank " + std::to_string(rank) + " got " + ncclGetErrorString(result) + ": " + message);
    });
    INFO((flagsDiffer ? "flags differ: " : "sizes differ: ") << failures);
    CHECK(failures.empty());
  }
}
